#!/usr/bin/python3
"""ResNet-18 on Fashion-MNIST, data-parallel through gradwire: original.py
(the same script under PyTorch DDP) with four lines changed. Run it with

    gradwire run -n 2 --shards 2 -- /usr/bin/python3 train.py --steps 300

which starts 2 parameter-server shards and two copies of the command, each
learning its rank and the shards' addresses from the environment.
gradwire.torch.DistributedOptimizer sends each step's gradients, compressed,
to the shards, which average them; the SGD optimizer (its momentum, weight
decay and schedule) steps on the average, the same on every worker, and
BatchNorm's running statistics follow rank 0's, as DDP's do.
"""
import argparse
import gzip
import json
import math
import os
import resource
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset
import gradwire, gradwire.torch

try:
    import torchvision
except ImportError:
    sys.exit("torchvision is missing: apt-get install python3-torchvision")

DATA_DIR = "/usr/share/datasets/fashion-mnist"
MEAN, STD = 0.2860, 0.3530


def parse_args():
    p = argparse.ArgumentParser(description="ResNet-18 on Fashion-MNIST")
    p.add_argument("--steps", type=int, default=937,
                   help="optimizer steps (937: one epoch of 2 x 32)")
    p.add_argument("--batch-size", type=int, default=32, help="per rank")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--weight-decay", type=float, default=5e-4)
    p.add_argument("--warmup-steps", type=int, default=-1,
                   help="linear warm-up (-1: 5%% of --steps)")
    p.add_argument("--train-limit", type=int, default=-1)
    p.add_argument("--test-limit", type=int, default=-1)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--log-interval", type=int, default=20)
    p.add_argument("--data-dir", default=DATA_DIR)
    p.add_argument("--summary", default="",
                   help="write a JSON summary here ({rank} is replaced)")
    args = p.parse_args()
    if args.steps < 1 or args.batch_size < 1:
        p.error("--steps and --batch-size must be at least 1")
    return args


def read_idx(path, header_words, limit):
    if not os.path.isfile(path):
        sys.exit(f"{path} is missing: apt-get install dataset-fashion-mnist "
                 "(or pass --data-dir)")
    with gzip.open(path, "rb") as f:
        header = f.read(4 * header_words)
        count = int.from_bytes(header[4:8], "big")
        count = count if limit < 0 else min(limit, count)
        size = count * (784 if header_words == 4 else 1)
        data = torch.frombuffer(bytearray(f.read(size)), dtype=torch.uint8)
    return data, count


def fashion_mnist(data_dir, train, limit=-1):
    prefix = os.path.join(data_dir, "train" if train else "t10k")
    pixels, n = read_idx(prefix + "-images-idx3-ubyte.gz", 4, limit)
    labels, _ = read_idx(prefix + "-labels-idx1-ubyte.gz", 2, limit)
    images = (pixels.view(n, 1, 28, 28).float() / 255 - MEAN) / STD
    return TensorDataset(images, labels.long())


def augment(images, generator):
    """Random 28x28 crops of the images padded by 2, and horizontal flips."""
    padded = F.pad(images, (2, 2, 2, 2))
    shifts = torch.randint(0, 5, (len(images), 2), generator=generator)
    flips = torch.rand(len(images), generator=generator) < 0.5
    out = torch.empty_like(images)
    for i, (dy, dx) in enumerate(shifts.tolist()):
        out[i] = padded[i, :, dy:dy + 28, dx:dx + 28]
    out[flips] = out[flips].flip(3)
    return out


def resnet18():
    """torchvision's resnet18 with the CIFAR stem, for 28x28 images."""
    model = torchvision.models.resnet18(num_classes=10)
    model.conv1 = nn.Conv2d(1, 64, 3, 1, 1, bias=False)
    model.maxpool = nn.Identity()
    return model


def warmup_cosine(warmup, total):
    def factor(step):
        if step < warmup:
            return (step + 1) / warmup
        return 0.5 * (1 + math.cos(math.pi * (step - warmup) /
                                   max(1, total - warmup)))
    return factor


@torch.no_grad()
def evaluate(model, dataset):
    model.eval()
    correct, loss = 0, 0.0
    for images, labels in DataLoader(dataset, batch_size=500):
        logits = model(images)
        loss += F.cross_entropy(logits, labels, reduction="sum").item()
        correct += (logits.argmax(1) == labels).sum().item()
    model.train()
    return correct / len(dataset), loss / len(dataset)


def main():
    args = parse_args()
    rank = int(os.environ.get("RANK", 0))
    world_size = int(os.environ.get("WORLD_SIZE", 1))
    distributed = world_size > 1
    if distributed:
        gradwire.init()
    torch.manual_seed(args.seed)
    model = resnet18()
    train_model = model
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr,
                                momentum=args.momentum,
                                weight_decay=args.weight_decay)
    optimizer = gradwire.torch.DistributedOptimizer(optimizer, model)
    warmup = args.warmup_steps if args.warmup_steps >= 0 else args.steps // 20
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, warmup_cosine(warmup, args.steps))

    train_set = fashion_mnist(args.data_dir, True, args.train_limit)
    sampler = DistributedSampler(train_set, world_size, rank, seed=args.seed)
    loader = DataLoader(train_set, batch_size=args.batch_size,
                        sampler=sampler, drop_last=True)
    generator = torch.Generator().manual_seed(args.seed * 1000 + rank)
    step, epoch, start = 0, 0, time.time()
    while step < args.steps:
        sampler.set_epoch(epoch)
        for images, labels in loader:
            optimizer.zero_grad()
            loss = F.cross_entropy(train_model(augment(images, generator)),
                                   labels)
            loss.backward()
            optimizer.step()
            scheduler.step()
            step += 1
            if step % args.log_interval == 0 or step == args.steps:
                print(f"rank {rank} step {step} loss {loss.item():.4f} "
                      f"{(time.time() - start) / step:.3f} s/step",
                      flush=True)
            if step == args.steps:
                break
        epoch += 1
    train_seconds = time.time() - start

    summary = {"rank": rank, "world_size": world_size, "steps": step,
               "parameters": sum(p.numel() for p in model.parameters()),
               "final_loss": loss.item(),
               "seconds_per_step": train_seconds / step,
               "peak_rss_mb": resource.getrusage(
                   resource.RUSAGE_SELF).ru_maxrss / 1024,
               # Equal on every rank when they all took the same steps.
               "weights_sum": sum(p.double().sum().item()
                                  for p in model.parameters())}
    if rank == 0:
        accuracy, test_loss = evaluate(
            model, fashion_mnist(args.data_dir, False, args.test_limit))
        summary.update(test_accuracy=accuracy, test_loss=test_loss)
        print(f"test accuracy {accuracy:.4f} loss {test_loss:.4f}")
    if args.summary:
        with open(args.summary.format(rank=rank), "w") as f:
            json.dump(summary, f, indent=1)


if __name__ == "__main__":
    main()
