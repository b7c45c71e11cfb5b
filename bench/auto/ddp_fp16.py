#!/usr/bin/python3
"""bench/python/worker.py --baseline=ddp with PyTorch's fp16 compression
hook: DistributedDataParallel casts each gradient bucket to fp16 before the
all-reduce and back after it (torch.distributed.algorithms.ddp_comm_hooks.
default_hooks.fp16_compress_hook), the DDP counterpart of gradwire's
--compressor=fp16. Takes worker.py's flags and writes its summary, with the
computed bytes at 2 per gradient element instead of 4.

    /usr/bin/python3 bench/auto/ddp_fp16.py --baseline=ddp --worker-id=0 \\
        --num-workers=2 --ddp-master=127.0.0.1:29511 --model=cnn ...

Without --baseline=ddp it refuses to run (exit 2): the hook is DDP's.
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                os.pardir, "python"))
import worker  # noqa: E402  (bench/python/worker.py)
from python_worker import exchange, training  # noqa: E402
from torch.distributed.algorithms.ddp_comm_hooks import (  # noqa: E402
    default_hooks)


class Fp16DdpBaseline(exchange.DdpBaseline):
    """worker.py's DDP baseline with the gradients all-reduced in fp16."""

    def __init__(self, args, model):
        super().__init__(args, model)
        self.forward.register_comm_hook(None,
                                        default_hooks.fp16_compress_hook)
        self.gradient_bytes //= 2  # fp16 on the wire: 2 bytes an element

    def describe(self):
        return super().describe() + ", fp16 all-reduce (fp16_compress_hook)"


def main(argv):
    if "--baseline=ddp" not in argv:
        print("ddp_fp16.py: --baseline=ddp is required (the fp16 hook is "
              "DDP's)", file=sys.stderr)
        return 2
    # python_worker.training.run() builds the DDP exchange by this name.
    training.DdpBaseline = Fp16DdpBaseline
    return worker.main(argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
