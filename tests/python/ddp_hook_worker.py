"""A rank of the DDP hook test (test_ddp_hook.py), started as a process
with torchrun's environment (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT)
and, with --hook, gradwire's (GRADWIRE_SHARDS).

  ddp_hook_worker.py --steps=N --out=PATH [--hook] [--compression=SPEC]
                     [--closure] [--optimizer=adam|sgd]

Trains a small MLP under DistributedDataParallel over gloo with Adam (the
seed's flow; --optimizer=sgd: SGD with momentum), on batches that depend
only on the step and the rank, with
DDP's own all-reduce or, with --hook, gradwire.torch.ddp_comm_hook. Rank 0
writes the final parameters, the losses and (with --hook) the bytes the
hook sent and received to PATH. --closure steps through step(closure)
instead (the hook's path is the same).
"""

import argparse
import os

import torch
import torch.distributed as dist

import gradwire
import gradwire.torch


def model_for_test():
    torch.manual_seed(11)
    return torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(),
                               torch.nn.Linear(256, 256), torch.nn.ReLU(),
                               torch.nn.Linear(256, 10))


def batch(step, rank):
    generator = torch.Generator().manual_seed(1000 * step + rank)
    x = torch.randn(32, 64, generator=generator)
    y = x[:, :10].argmax(dim=1)
    return x, y


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--hook", action="store_true")
    parser.add_argument("--compression", default="")
    parser.add_argument("--closure", action="store_true")
    parser.add_argument("--optimizer", default="adam", choices=("adam", "sgd"))
    args = parser.parse_args()
    rank = int(os.environ["RANK"])
    dist.init_process_group("gloo")
    model = torch.nn.parallel.DistributedDataParallel(model_for_test())
    state = None
    if args.hook:
        compression = (gradwire.Compression.parse(args.compression)
                       if args.compression else None)
        state = gradwire.torch.DDPHookState(compression=compression)
        model.register_comm_hook(state, gradwire.torch.ddp_comm_hook)
    optimizer = (torch.optim.Adam(model.parameters(), lr=1e-3)
                 if args.optimizer == "adam" else
                 torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9))
    losses = []
    for step in range(args.steps):
        x, y = batch(step, rank)

        def closure():
            optimizer.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            return loss

        if args.closure:
            loss = optimizer.step(closure)
        else:
            loss = closure()
            optimizer.step()
        losses.append(loss.item())
    if rank == 0:
        result = {"parameters": [p.detach().clone()
                                 for p in model.parameters()],
                  "losses": losses}
        if state is not None:
            result["pushed"] = state.stats.pushed_bytes
            result["pulled"] = state.stats.pulled_bytes
            result["dense"] = state.stats.dense_equivalent_bytes
            result["low_rank"] = state.exchange._lowrank is not None
        torch.save(result, args.out)
    if state is not None:
        state.close()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
