"""A worker of the resume test (test_resume.py), started as a process with
the environment contract of `gradwire run` (GRADWIRE_SHARDS, RANK,
WORLD_SIZE).

  resume_worker.py --from-step=A --to-step=B --checkpoint=PATH
                   [--resume] [--final=PATH] [--hold]
                   [--exchange=gradients|updates]

Trains a small MLP with Adam through DistributedOptimizer (Top-K 1% + error
feedback) on batches that depend only on the step and the rank, so that a
run cut in two and an uninterrupted one see the same data. With --resume
it loads its checkpoint before the first step; at --to-step it saves one,
writes the final weights (rank 0, --final) and, with --hold, prints READY
and waits to be killed.
"""

import argparse
import sys
import time

import torch

import gradwire
import gradwire.torch


def model_for_test():
    torch.manual_seed(7)
    return torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(),
                               torch.nn.Linear(128, 10))


def batch(step, rank):
    generator = torch.Generator().manual_seed(1000 * step + rank)
    x = torch.randn(32, 64, generator=generator)
    y = torch.randint(0, 10, (32,), generator=generator)
    return x, y


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--from-step", type=int, required=True)
    parser.add_argument("--to-step", type=int, required=True)
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--resume", action="store_true")
    parser.add_argument("--final", default="")
    parser.add_argument("--hold", action="store_true")
    parser.add_argument("--exchange", default="gradients")
    args = parser.parse_args()

    gradwire.init()
    torch.set_num_threads(1)
    model = model_for_test()
    optimizer = gradwire.torch.DistributedOptimizer(
        torch.optim.Adam(model.parameters(), lr=1e-3), model,
        compression=gradwire.Compression("topk", ratio=0.01),
        exchange=args.exchange)
    if args.resume:
        gradwire.torch.load_checkpoint(args.checkpoint, model, optimizer)
    if optimizer.next_step != args.from_step:
        sys.exit(f"the shards are at step {optimizer.next_step}, "
                 f"expected {args.from_step}")
    for step in range(args.from_step, args.to_step):
        x, y = batch(step, gradwire.rank())
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step()
    gradwire.torch.save_checkpoint(args.checkpoint, model, optimizer,
                                   step=args.to_step)
    if args.final and gradwire.rank() == 0:
        torch.save(model.state_dict(), args.final)
    if args.hold:
        print("READY", flush=True)
        while True:
            time.sleep(60)
    optimizer.close()


if __name__ == "__main__":
    main()
