#!/usr/bin/python3
"""bench/python/worker.py --baseline=ddp with PyTorch's fp16 compression
hook: DistributedDataParallel casts each gradient bucket to fp16 before the
all-reduce and back after it (torch.distributed.algorithms.ddp_comm_hooks.
default_hooks.fp16_compress_hook), the DDP counterpart of gradwire's
--compressor=fp16. Takes worker.py's flags and writes its summary, with the
computed bytes at 2 per gradient element instead of 4, and the bytes its
link carried during the steps where GLOO_SOCKET_IFNAME names it
(ddp_link.py).

    /usr/bin/python3 bench/auto/ddp_fp16.py --baseline=ddp --worker-id=0 \\
        --num-workers=2 --ddp-master=127.0.0.1:29511 --model=cnn ...

Without --baseline=ddp it refuses to run (exit 2): the hook is DDP's.
"""

import sys

import ddp_link  # bench/auto/ddp_link.py, beside this script
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks


class Fp16DdpBaseline(ddp_link.LinkCountingDdp):
    """worker.py's DDP baseline with the gradients all-reduced in fp16."""

    def __init__(self, args, model):
        super().__init__(args, model)
        self.forward.register_comm_hook(None,
                                        default_hooks.fp16_compress_hook)
        self.gradient_bytes //= 2  # fp16 on the wire: 2 bytes an element

    def describe(self):
        return super().describe() + ", fp16 all-reduce (fp16_compress_hook)"


def main(argv):
    return ddp_link.run(argv, Fp16DdpBaseline, "ddp_fp16.py")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
