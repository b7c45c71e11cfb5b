#!/usr/bin/python3
"""Fashion-MNIST data-parallel training with gradwire, in Python: the
benchmarks' and tests' Python worker.

Every worker process trains its own part of Fashion-MNIST and exchanges
Top-K-compressed gradients with gradwire's parameter-server shards. It is
a drop-in worker for `gradwire local` and takes gradwire-worker's flags,
spelled the same way, so that its runs can be compared with
gradwire-worker's bit for bit. A short example to read and copy is
examples/python/train.py.

    # a whole job on this machine: 2 shards, 2 Python workers
    PYTHONPATH=build/python build/bin/gradwire local --shards=2 --workers=2 \\
        --worker-command="/usr/bin/python3 bench/python/worker.py" \\
        --model=cnn --compressor=topk --ratio=0.01 --error-feedback

    # by hand, against shards that already run
    PYTHONPATH=build/python /usr/bin/python3 bench/python/worker.py \\
        --shards=127.0.0.1:7000 --worker-id=0 --num-workers=2 --model=resnet18

    # the same training with plain PyTorch DDP (gloo), for comparison
    /usr/bin/python3 bench/python/worker.py --baseline=ddp \\
        --worker-id=0 --num-workers=2 --ddp-master=127.0.0.1:29511 ...

Three ways to exchange gradients (--api, --baseline):
  --api=sync       gradwire.ParameterSync: the shards run the optimizer
                   (--optimizer, --lr, --momentum) and send the new weights
                   back; sync.step() replaces optimizer.step().
  --api=optimizer  gradwire.torch.DistributedOptimizer: the shards only
                   average the compressed gradients; a local torch.optim
                   optimizer (chosen by --optimizer) steps on the average.
  --baseline=ddp   torch.nn.parallel.DistributedDataParallel over gloo, no
                   gradwire at all: dense fp32 all-reduce.

The data split, the batch order and the model's initial weights follow
gradwire-worker (apps/fashion_mnist/trainer.cc) exactly: worker w of W trains on the
examples i with i % W == w, each epoch visits them in a permutation that
depends only on (--seed + w, epoch), and torch.manual_seed(--seed) is set
before the model is built. Every worker takes the same number of steps.

Exit codes: 0 done, 1 a gradwire, shard or training error (printed),
2 a bad flag.

This script reads the command line and runs; the code is in the modules of
python_worker/ beside it (python_worker/__init__.py lists them).
"""

import os
import sys

import torch

try:
    import gradwire
    import gradwire.torch  # noqa: F401 - checked here, used by the package
except ImportError as error:
    sys.exit(f"worker.py: cannot import gradwire ({error}); build it "
             "(make build) and set PYTHONPATH=build/python")

# The modules beside this script (python_worker/), wherever it is run from
# or loaded by path.
_HERE = os.path.dirname(os.path.abspath(__file__))
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

from python_worker.flags import FLAG_GROUPS, parse_flags  # noqa: E402
from python_worker.training import run  # noqa: E402

__all__ = ["FLAG_GROUPS", "main", "parse_flags"]

USAGE_EXIT = 2


def main(argv):
    args = parse_flags(argv)
    if args.dry_run:
        for key, value in sorted(vars(args).items()):
            if isinstance(value, bool):
                value = str(value).lower()
            print(f"--{key.replace('_', '-')}={value}")
        return 0
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.tune_heap:
        _, description = gradwire.tuning.tune_heap()
        print(f"worker {args.worker_id}: {description}", file=sys.stderr)
    if args.local_size > 1:
        args.overlap = False  # ParameterSync's hooks need local_size 1
    try:
        run(args)
    except ValueError as error:  # a gradwire option the C++ side refused
        print(f"worker {args.worker_id}: {error}", file=sys.stderr)
        return USAGE_EXIT
    except (gradwire.Error, RuntimeError, OSError) as error:
        print(f"worker {args.worker_id}: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
