#!/usr/bin/python3
"""bench/python/worker.py --baseline=ddp with PyTorch's PowerSGD hook
(torch.distributed.algorithms.ddp_comm_hooks.powerSGD_hook, PyTorch 1.13):
each step all-reduces two low-rank factors P and Q of every gradient matrix
instead of the matrix (Vogels et al., https://arxiv.org/abs/1905.13727),
with error feedback and warm start. Takes worker.py's flags and these,
which it takes out of the command line before worker.py reads it:

  --powersgd-rank=R   matrix_approximation_rank: 1, 2 or 4 (default 1)
  --powersgd-batched  batched_powerSGD_hook: the whole gradient as one
                      square matrix, instead of powerSGD_hook's one matrix
                      per parameter (vectors, and matrices that would not
                      shrink by min_compression_rate = 2, all-reduced
                      as they are)
  --powersgd-start=S  start_powerSGD_iter (default 2): the first S steps
                      all-reduce the dense gradient, PowerSGD runs from
                      step S + 1

PyTorch's documentation recommends starting start_powerSGD_iter at about
10% of the training steps, and raising it until the accuracy satisfies:
the beginning of training is sensitive to inaccurate gradients, and
compressing too early can set it on a worse trajectory for good. With
error feedback or warm start it must be at least 2 (DDP rebuilds its
buckets after the first iteration, which would invalidate the error and
the factors kept per bucket). A short benchmark (auto.sh: 30 steps) uses 2,
so that nearly all its steps run, and are timed, compressed; its accuracy
after so few steps says little either way.

Over gloo both hooks work only with all the gradients in one DDP bucket:
with two (the CNN's, by default) the ranks' collectives mismatch within a
few steps of PowerSGD starting (gloo's "op.preamble.length <= op.nbytes",
or a reset connection), presumably because each bucket's P and Q
all-reduces are issued from future callbacks, in an order that can differ
between the ranks. So DDP is built with bucket_cap_mb and its first
bucket's cap (torch.distributed._DEFAULT_FIRST_BUCKET_BYTES, 1 MiB, which
DDP applies when it rebuilds its buckets after the first step, whatever
bucket_cap_mb says) above the gradient's size: raising bucket_cap_mb
alone still leaves the CNN two buckets and fails the same way.

The summary's computed bytes (pushed_bytes, pulled_bytes) are what the hook
all-reduces, 4 bytes an element: the dense gradient in each of the first S
steps, then P, Q and the uncompressed tensors (the hook's own element
counts); dense_equivalent_bytes stays the dense gradient. Where
GLOO_SOCKET_IFNAME names the link, ddp_link.py's measured link_* fields
cover every step, and link_after_warmup_{sent,received}_bytes the steps
from S + 1 on (warmup_steps: S).

    /usr/bin/python3 bench/auto/ddp_powersgd.py --powersgd-rank=4 \\
        --baseline=ddp --worker-id=0 --num-workers=2 \\
        --ddp-master=127.0.0.1:29511 --model=cnn ...

Without --baseline=ddp it refuses to run (exit 2): the hook is DDP's.
"""

import argparse
import contextlib
import functools
import sys
from unittest import mock

import ddp_link  # bench/auto/ddp_link.py, beside this script
import torch
import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook

PROG = "ddp_powersgd.py"


@contextlib.contextmanager
def one_bucket(gradient_bytes):
    """While it lasts, DistributedDataParallel(model), as DdpBaseline calls
    it, puts a gradient of up to `gradient_bytes` in one bucket, before and
    after DDP rebuilds its buckets. DdpBaseline takes no DDP options; this
    hands it a DistributedDataParallel with them bound."""
    cap_mb = gradient_bytes / 2**20 + 1
    with mock.patch.object(
            torch.nn.parallel, "DistributedDataParallel",
            functools.partial(torch.nn.parallel.DistributedDataParallel,
                              bucket_cap_mb=cap_mb)), \
            mock.patch.object(dist, "_DEFAULT_FIRST_BUCKET_BYTES",
                              int(cap_mb * 2**20)):
        yield


TORCH_ORTHOGONALIZE = powerSGD_hook._orthogonalize


def orthogonalize_matrices_too(matrices, epsilon=0):
    """powerSGD_hook._orthogonalize, which PyTorch 1.13's own
    batched_powerSGD_hook breaks: it passes one (n, r) matrix where the
    function asserts a batch (b, n, r). A one-matrix batch is a view, so
    orthogonalising it orthogonalises the matrix."""
    if matrices.dim() == 2:
        matrices = matrices.unsqueeze(0)
    TORCH_ORTHOGONALIZE(matrices, epsilon)


class PowerSgdDdpBaseline(ddp_link.LinkCountingDdp):
    """worker.py's DDP baseline with PowerSGD compressing the all-reduce:
    `powersgd` holds this script's flags (parse_own_flags)."""

    def __init__(self, args, model, powersgd):
        self.rank = powersgd.powersgd_rank
        self.batched = powersgd.powersgd_batched
        self.start = powersgd.powersgd_start
        dense = 4 * sum(p.numel() for p in model.parameters()
                        if p.requires_grad)
        with one_bucket(dense):
            super().__init__(args, model)
        self.state = powerSGD_hook.PowerSGDState(
            process_group=None, matrix_approximation_rank=self.rank,
            start_powerSGD_iter=self.start, min_compression_rate=2,
            use_error_feedback=True, warm_start=True)
        if self.batched:
            powerSGD_hook._orthogonalize = orthogonalize_matrices_too
        self.hook = (powerSGD_hook.batched_powerSGD_hook if self.batched
                     else powerSGD_hook.powerSGD_hook)
        self.forward.register_comm_hook(self.state, self.hook)

    def step(self, epoch):
        super().step(epoch)
        if self.next_step == self.start:
            self.read_link("warmup")

    def stats(self):
        out = super().stats()
        # One bucket: the hook counts an iteration a step.
        dense_steps = min(self.state.iter, self.start)
        elements = (self.gradient_bytes // 4 * dense_steps
                    + self.state.total_numel_after_compression)
        out["pushed_bytes"] = out["pulled_bytes"] = 4 * elements
        return out

    def describe(self):
        return (super().describe() + f", PowerSGD rank {self.rank} "
                f"({self.hook.__name__}, error feedback, warm start) from "
                f"step {self.start + 1}, dense all-reduce before")

    def summary_fields(self):
        out = super().summary_fields()
        out.update({
            "powersgd_hook": self.hook.__name__,
            "powersgd_rank": self.rank,
            "powersgd_compression_rate":
                round(self.state.compression_stats()[0], 3),
            "warmup_steps": self.start,
            "byte_counts": "computed, not measured: what the PowerSGD hook "
                           "all-reduces, 4 bytes an element (the dense "
                           "gradient in the warm-up steps, then P, Q and "
                           "the uncompressed tensors); link_*: measured",
        })
        after = self.link_bytes("warmup")
        if after is not None:
            out["link_after_warmup_sent_bytes"] = after[0]
            out["link_after_warmup_received_bytes"] = after[1]
        return out


def parse_own_flags(argv):
    """This script's flags out of argv: (their values, the rest for
    worker.py). Bad values end the process (exit 2)."""
    parser = argparse.ArgumentParser(prog=PROG, add_help=False,
                                     allow_abbrev=False)
    parser.add_argument("--powersgd-rank", type=int, choices=(1, 2, 4),
                        default=1)
    parser.add_argument("--powersgd-batched", action="store_true")
    parser.add_argument("--powersgd-start", type=int, default=2)
    own, rest = parser.parse_known_args(argv)
    if own.powersgd_start < 2:
        parser.error(f"--powersgd-start={own.powersgd_start}: must be at "
                     "least 2 (error feedback and warm start are on)")
    return own, rest


def main(argv):
    own, rest = parse_own_flags(argv)
    return ddp_link.run(
        rest, functools.partial(PowerSgdDdpBaseline, powersgd=own), PROG)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
