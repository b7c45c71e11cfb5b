"""A rank of the mixed-precision tests (test_mixed_precision.py), started
as a process with torchrun's environment (RANK, WORLD_SIZE, MASTER_ADDR,
MASTER_PORT) and gradwire's (GRADWIRE_SHARDS).

  mixed_precision_worker.py --api=optimizer|hook --steps=N --out=PATH
      [--autocast] [--bf16] [--scaler] [--inf-at=STEP]
      [--compression=SPEC] [--restore-residuals=auto|on|off]

Trains a small MLP with SGD and momentum, written as a plain PyTorch AMP
script: the forward pass under torch.autocast("cpu", bfloat16) with
--autocast, the model converted with .to(torch.bfloat16) with --bf16, and
with --scaler the GradScaler lines (scaler.scale(loss).backward(),
scaler.step(optimizer), scaler.update()). --api=optimizer wraps the
optimizer in gradwire.torch.DistributedOptimizer; --api=hook wraps the
model in DistributedDataParallel over gloo with gradwire's communication
hook. --inf-at: rank 0's first gradient gets an infinity at that step, as
an fp16 overflow would. Each rank writes PATH with {rank} replaced: the
losses, the parameters after each step, the error-feedback residual's norm
after each step, the scaler's scale after each step and the compression.
"""

import argparse
import contextlib
import os
import warnings

import torch
import torch.distributed as dist

import gradwire
import gradwire.torch


def _check_and_unscale(grads, found_inf, inv_scale):
    # torch._amp_foreach_non_finite_check_and_unscale_, on the CPU.
    for g in grads:
        if not bool(torch.isfinite(g).all()):
            found_inf.fill_(1.0)
        g.mul_(inv_scale)


def _update_scale(scale, growth_tracker, found_inf, growth_factor,
                  backoff_factor, growth_interval):
    # torch._amp_update_scale_, on the CPU.
    if float(found_inf) > 0:
        scale.mul_(backoff_factor)
        growth_tracker.zero_()
    else:
        growth_tracker.add_(1)
        if int(growth_tracker) == growth_interval:
            scale.mul_(growth_factor)
            growth_tracker.zero_()
    return scale


@contextlib.contextmanager
def _replaced(name, replacement, module=torch):
    saved = getattr(module, name)
    setattr(module, name, replacement)
    try:
        yield
    finally:
        setattr(module, name, saved)


class CpuGradScaler(torch.cuda.amp.GradScaler):
    """torch's own GradScaler, run on the CPU. torch 1.13's turns itself
    off without CUDA, asserts CUDA tensors in scale() and in its walk over
    the gradients, and has its two kernels (non-finite check and unscale,
    scale update) for CUDA only: this class constructs it as if CUDA were
    there and does those three pieces on the CPU, so that the rest is
    torch's code as a CUDA script runs it: step()'s dispatch on
    _step_supports_amp_scaling, unscale_()'s stages and found_inf, and
    update()'s backoff."""

    def __init__(self, **options):
        with _replaced("is_available", lambda: True, torch.cuda):
            super().__init__(**options)

    def scale(self, outputs):
        if self._scale is None:
            self._lazy_init_scale_growth_tracker(outputs.device)
        return outputs * self._scale.to(outputs.dtype)

    @torch.no_grad()
    def _unscale_grads_(self, optimizer, inv_scale, found_inf, allow_fp16):
        _check_and_unscale([p.grad for group in optimizer.param_groups
                            for p in group["params"] if p.grad is not None],
                           found_inf, inv_scale)
        return {found_inf.device: found_inf}

    def update(self, new_scale=None):
        with _replaced("_amp_update_scale_", _update_scale):
            super().update(new_scale)


def model_for_test():
    torch.manual_seed(11)
    return torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(),
                               torch.nn.Linear(256, 10))


def batch(step, rank):
    generator = torch.Generator().manual_seed(1000 * step + rank)
    x = torch.randn(32, 64, generator=generator)
    return x, x[:, :10].argmax(dim=1)


def poison(gradient):
    gradient = gradient.clone()
    gradient[0, 0] = float("inf")
    return gradient


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--api", choices=("optimizer", "hook"),
                        required=True)
    parser.add_argument("--steps", type=int, required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--autocast", action="store_true")
    parser.add_argument("--bf16", action="store_true")
    parser.add_argument("--scaler", action="store_true")
    parser.add_argument("--inf-at", type=int, default=-1)
    parser.add_argument("--compression",
                        default="topk,ratio=0.25,dense_below=0")
    parser.add_argument("--restore-residuals", default="auto",
                        choices=("auto", "on", "off"))
    args = parser.parse_args()
    rank = int(os.environ["RANK"])
    compression = gradwire.Compression.parse(args.compression)
    options = {"restore_residuals": {"auto": None, "on": True,
                                     "off": False}[args.restore_residuals]}
    model = model_for_test()
    if args.bf16:
        model = model.to(torch.bfloat16)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    if args.api == "optimizer":
        train_model = model
        optimizer = gradwire.torch.DistributedOptimizer(
            optimizer, model, compression=compression, **options)
        exchange = optimizer
    else:
        dist.init_process_group("gloo")
        train_model = torch.nn.parallel.DistributedDataParallel(model)
        exchange = gradwire.torch.DDPHookState(compression=compression,
                                               **options)
        train_model.register_comm_hook(exchange,
                                       gradwire.torch.ddp_comm_hook)
    scaler = CpuGradScaler(init_scale=2.0 ** 10) if args.scaler else None
    result = {"losses": [], "parameters": [], "residual_norms": [],
              "scales": []}
    warnings.simplefilter("ignore", RuntimeWarning)
    for step in range(args.steps):
        x, y = batch(step, rank)
        if args.bf16:
            x = x.to(torch.bfloat16)
        optimizer.zero_grad()
        handle = None
        if rank == 0 and step == args.inf_at:
            handle = next(model.parameters()).register_hook(poison)
        with torch.autocast("cpu", dtype=torch.bfloat16,
                            enabled=args.autocast):
            loss = torch.nn.functional.cross_entropy(train_model(x), y)
        if scaler is None:
            loss.backward()
            optimizer.step()
        else:
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
            result["scales"].append(scaler.get_scale())
        if handle is not None:
            handle.remove()
        result["losses"].append(loss.item())
        result["parameters"].append(
            [p.detach().clone() for p in model.parameters()])
        figures = exchange.metrics()
        result["residual_norms"].append(figures["gradwire/residual_norm"])
        result["skipped"] = figures["gradwire/skipped_steps"]
    result["compression"] = repr(
        exchange.compression if args.api == "optimizer"
        else exchange.exchange.compression)
    torch.save(result, args.out.replace("{rank}", str(rank)))
    exchange.close()
    if args.api == "hook":
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
