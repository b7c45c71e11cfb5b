#!/usr/bin/python3
"""A GPT-style transformer trained on the Python manual's sources, data-
parallel with PyTorch DDP: the script as a user has it before gradwire, and
the reference that train.py's diff is counted against.

Byte-level tokens from the reStructuredText sources of Debian's
python3.11-doc (about 11 MB in 500 files); every tenth file is held out,
and rank 0 reports the held-out perplexity at the start and the end. AdamW
with weight decay on matrices and embeddings, a linear warm-up and a
cosine decay, gradients clipped at norm 1. Alone:

    /usr/bin/python3 original.py --steps 200

Under DDP, one process per rank with the environment torchrun sets:

    MASTER_ADDR=127.0.0.1 MASTER_PORT=29501 WORLD_SIZE=2 RANK=0 \\
        /usr/bin/python3 original.py &
    MASTER_ADDR=127.0.0.1 MASTER_PORT=29501 WORLD_SIZE=2 RANK=1 \\
        /usr/bin/python3 original.py

--gpt2-small trains GPT-2 small's width and depth (85M parameters).
"""
import argparse
import json
import math
import os
import resource
import sys
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from model import GPT, GPT2_SMALL, GPTConfig

CORPUS_DIR = "/usr/share/doc/python3.11/html/_sources"


def parse_args():
    p = argparse.ArgumentParser(description="GPT on the Python manual")
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--batch-size", type=int, default=16, help="per rank")
    p.add_argument("--block-size", type=int, default=128)
    p.add_argument("--n-layer", type=int, default=6)
    p.add_argument("--n-head", type=int, default=6)
    p.add_argument("--d-model", type=int, default=384)
    p.add_argument("--gpt2-small", action="store_true",
                   help="12 layers, 12 heads, d_model 768")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--min-lr", type=float, default=1e-4)
    p.add_argument("--weight-decay", type=float, default=0.1)
    p.add_argument("--warmup-steps", type=int, default=-1,
                   help="linear warm-up (-1: 10%% of --steps)")
    p.add_argument("--grad-clip", type=float, default=1.0)
    p.add_argument("--eval-batches", type=int, default=16)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--log-interval", type=int, default=20)
    p.add_argument("--corpus-dir", default=CORPUS_DIR)
    p.add_argument("--summary", default="",
                   help="write a JSON summary here ({rank} is replaced)")
    args = p.parse_args()
    if min(args.steps, args.batch_size, args.block_size, args.eval_batches,
           args.n_layer, args.n_head, args.d_model) < 1:
        p.error("--steps, --batch-size, --block-size, --eval-batches and the "
                "model's sizes must be at least 1")
    return args


def read_corpus(corpus_dir):
    """(train, held-out) byte tensors; every tenth file is held out."""
    if not os.path.isdir(corpus_dir):
        sys.exit(f"{corpus_dir} is missing: apt-get install python3.11-doc "
                 "(or pass --corpus-dir)")
    paths = sorted(os.path.join(folder, name)
                   for folder, _, names in os.walk(corpus_dir)
                   for name in names if name.endswith(".txt"))
    if len(paths) < 10:
        sys.exit(f"{corpus_dir} holds {len(paths)} .txt files; expected the "
                 "python3.11-doc sources")
    parts = ([], [])
    for i, path in enumerate(paths):
        with open(path, "rb") as f:
            parts[i % 10 == 0].append(f.read())
    return tuple(torch.frombuffer(bytearray(b"".join(p)), dtype=torch.uint8)
                 .long() for p in parts)


def batch(data, size, block, generator):
    starts = torch.randint(len(data) - block - 1, (size,), generator=generator)
    tokens = torch.stack([data[s:s + block + 1] for s in starts.tolist()])
    return tokens[:, :-1], tokens[:, 1:]


@torch.no_grad()
def perplexity(model, data, args):
    model.eval()
    generator = torch.Generator().manual_seed(1234)  # the same windows
    losses = [model(*batch(data, args.batch_size, args.block_size,
                           generator)).item()
              for _ in range(args.eval_batches)]
    model.train()
    return math.exp(sum(losses) / len(losses))


def warmup_cosine(warmup, total, floor):
    def factor(step):
        if step < warmup:
            return (step + 1) / warmup
        progress = (step - warmup) / max(1, total - warmup)
        return floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * progress))
    return factor


def main():
    args = parse_args()
    rank = int(os.environ.get("RANK", 0))
    world_size = int(os.environ.get("WORLD_SIZE", 1))
    distributed = world_size > 1
    if distributed:
        dist.init_process_group("gloo")
    torch.manual_seed(args.seed)
    shape = GPT2_SMALL if args.gpt2_small else dict(
        n_layer=args.n_layer, n_head=args.n_head, d_model=args.d_model)
    model = GPT(GPTConfig(block_size=args.block_size, **shape))
    train_model = DDP(model) if distributed else model
    optimizer = torch.optim.AdamW(model.optimizer_groups(args.weight_decay),
                                  lr=args.lr, betas=(0.9, 0.95))
    warmup = args.warmup_steps if args.warmup_steps >= 0 else args.steps // 10
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, warmup_cosine(warmup, args.steps, args.min_lr / args.lr))

    train_data, held_out = read_corpus(args.corpus_dir)
    parameters = sum(p.numel() for p in model.parameters())
    start_perplexity = perplexity(model, held_out, args) if rank == 0 else 0
    if rank == 0:
        print(f"{parameters / 1e6:.1f}M parameters, {len(train_data)} "
              f"training bytes, held-out perplexity {start_perplexity:.1f}")
    generator = torch.Generator().manual_seed(args.seed * 1000 + rank)
    start = time.time()
    for step in range(1, args.steps + 1):
        optimizer.zero_grad()
        loss = train_model(*batch(train_data, args.batch_size,
                                  args.block_size, generator))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), args.grad_clip)
        optimizer.step()
        scheduler.step()
        if step % args.log_interval == 0 or step == args.steps:
            print(f"rank {rank} step {step} loss {loss.item():.4f} "
                  f"{(time.time() - start) / step:.3f} s/step", flush=True)
    train_seconds = time.time() - start

    summary = {"rank": rank, "world_size": world_size, "steps": args.steps,
               "parameters": parameters, "final_loss": loss.item(),
               "seconds_per_step": train_seconds / args.steps,
               "peak_rss_mb": resource.getrusage(
                   resource.RUSAGE_SELF).ru_maxrss / 1024,
               # Equal on every rank when they all took the same steps.
               "weights_sum": sum(p.double().sum().item()
                                  for p in model.parameters())}
    if rank == 0:
        end_perplexity = perplexity(model, held_out, args)
        summary.update(start_perplexity=start_perplexity,
                       test_perplexity=end_perplexity)
        print(f"held-out perplexity {end_perplexity:.2f} (from "
              f"{start_perplexity:.1f})")
    if args.summary:
        with open(args.summary.format(rank=rank), "w") as f:
            json.dump(summary, f, indent=1)


if __name__ == "__main__":
    main()
