#!/usr/bin/python3
"""A model's DDP script (examples/python/MODEL/original.py) run with one of
PyTorch's own DDP communication hooks, as a user switches compression on
in the script: the DDP peers of gradwire in bench/models/models.py.

    ddp_hooked.py --hook=powersgd,rank=4[,start=2] SCRIPT [SCRIPT FLAGS]
    ddp_hooked.py --hook=fp16 SCRIPT [SCRIPT FLAGS]
    gradwire run -n W --shards S -- ddp_hooked.py --hook=gradwire SCRIPT ...

powersgd: torch.distributed.algorithms.ddp_comm_hooks.powerSGD_hook
(PyTorch 1.13) with matrix_approximation_rank=rank, error feedback, warm
start, min_compression_rate 2 and start_powerSGD_iter=start (default 2,
the least it allows with error feedback; PyTorch's documentation
recommends about a tenth of the training's steps, where accuracy needs
it). Over gloo PowerSGD needs every gradient in one bucket (with several,
the ranks' factor all-reduces interleave differently and gloo fails), so
DDP is built with bucket_cap_mb and its first bucket's cap
(torch.distributed._DEFAULT_FIRST_BUCKET_BYTES, applied when DDP rebuilds
its buckets) above the model's size. fp16: fp16_compress_hook.
gradwire: gradwire's own hook (gradwire.torch.DDPHookState and
ddp_comm_hook) with the compression GRADWIRE_COMPRESSION names (its
default where unset), under `gradwire run`, which starts the shards and
sets the DDP script's MASTER_ADDR, MASTER_PORT, RANK and WORLD_SIZE; the
shards count its bytes.

The script runs as __main__ with DistributedDataParallel replaced by one
that registers the hook; its flags are its own. Its --summary file (this
rank's) then gets "ddp_hook": the hook's name and options and
allreduced_bytes_per_step, what the hook all-reduced a step on average:
the gradient's bytes at fp16, or PowerSGD's element counts (the dense
gradient in its warm-up steps, then P, Q and the tensors it leaves whole)
at 4 bytes. Exit 2 for a bad --hook.
"""

import json
import os
import runpy
import sys

import torch
import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks import (default_hooks,
                                                          powerSGD_hook)


def parse_hook(spec):
    """(name, options) of --hook's value; raises ValueError naming what is
    wrong."""
    name, *parts = spec.split(",")
    options = {}
    for part in parts:
        key, sep, value = part.partition("=")
        if not sep or key not in ("rank", "start"):
            raise ValueError(f"--hook: '{part}' is not rank=N or start=N")
        options[key] = int(value)
    if name not in ("powersgd", "fp16", "gradwire"):
        raise ValueError(f"--hook: '{name}' is not powersgd, fp16 or "
                         "gradwire")
    if name != "powersgd" and options:
        raise ValueError(f"--hook: {name} takes no options")
    if options.get("rank", 1) < 1 or options.get("start", 2) < 2:
        raise ValueError("--hook: rank must be >= 1 and start >= 2")
    return name, options


def hooked_ddp(name, options, built):
    """A DistributedDataParallel factory that registers the hook and
    appends (model, hook state) to `built`."""
    plain = torch.nn.parallel.DistributedDataParallel

    def build(module, *args, **kwargs):
        if name == "powersgd":
            size = sum(p.numel() * p.element_size()
                       for p in module.parameters())
            cap_mb = size / 2**20 + 1
            kwargs["bucket_cap_mb"] = cap_mb
            dist._DEFAULT_FIRST_BUCKET_BYTES = int(cap_mb * 2**20)
        model = plain(module, *args, **kwargs)
        if name == "gradwire":
            import gradwire.torch
            state = gradwire.torch.DDPHookState()
            model.register_comm_hook(state, gradwire.torch.ddp_comm_hook)
            built.append((model, state))
            return model
        if name == "fp16":
            model.register_comm_hook(None, default_hooks.fp16_compress_hook)
            built.append((model, None))
            return model
        state = powerSGD_hook.PowerSGDState(
            process_group=None,
            matrix_approximation_rank=options.get("rank", 1),
            start_powerSGD_iter=options.get("start", 2),
            min_compression_rate=2, use_error_feedback=True,
            warm_start=True)
        model.register_comm_hook(state, powerSGD_hook.powerSGD_hook)
        built.append((model, state))
        return model

    return build


def allreduced_bytes_per_step(name, model, state, steps):
    """What the hook all-reduced a step, on average over `steps`."""
    dense = sum(p.numel() for p in model.parameters() if p.requires_grad)
    if name == "fp16":
        return 2 * dense
    # One bucket: the state counts an iteration a step, and elements only
    # from start_powerSGD_iter on.
    warmup = min(state.iter, state.start_powerSGD_iter)
    return 4 * (dense * warmup + state.total_numel_after_compression) / max(
        steps, 1)


def add_to_summary(argv, name, options, built):
    """Adds "ddp_hook" to this rank's --summary file, where there is one."""
    path = next((a.split("=", 1)[1] for a in argv
                 if a.startswith("--summary=")), None)
    if not path or not built:
        return
    path = path.replace("{rank}", os.environ.get("RANK", "0"))
    with open(path) as f:
        summary = json.load(f)
    model, state = built[-1]
    summary["ddp_hook"] = {"name": name, "options": options}
    if name == "gradwire":
        summary["ddp_hook"]["compression"] = os.environ.get(
            "GRADWIRE_COMPRESSION", "")
    else:
        summary["ddp_hook"]["allreduced_bytes_per_step"] = (
            allreduced_bytes_per_step(name, model, state,
                                      summary.get("steps", 0)))
    with open(path, "w") as f:
        json.dump(summary, f, indent=1)


def main(argv):
    if len(argv) < 2 or not argv[0].startswith("--hook="):
        print(__doc__, file=sys.stderr)
        return 2
    try:
        name, options = parse_hook(argv[0].split("=", 1)[1])
    except ValueError as error:
        print(f"ddp_hooked.py: {error}", file=sys.stderr)
        return 2
    built = []
    torch.nn.parallel.DistributedDataParallel = hooked_ddp(name, options,
                                                           built)
    sys.argv = argv[1:]
    # As `python3 SCRIPT` would: the script's folder first on the path.
    sys.path.insert(0, os.path.dirname(os.path.abspath(argv[1])))
    runpy.run_path(argv[1], run_name="__main__")
    add_to_summary(argv[2:], name, options, built)
    for _, state in built:
        if name == "gradwire":
            state.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
