#!/usr/bin/python3
"""Fashion-MNIST data-parallel training with gradwire: an example to read
top to bottom and copy.

Every process that `gradwire run` starts is one worker. It trains a small
CNN on its own part of Fashion-MNIST; gradwire.torch.DistributedOptimizer
sends each step's gradients, Top-K compressed, to gradwire's parameter-server
shards, which average them, and a local torch.optim.SGD steps on the
average, the same on every worker. At the end worker 0 measures the test
accuracy.

    # 2 workers and 2 shards on this machine
    PYTHONPATH=build/python build/bin/gradwire run -n 2 --shards 2 -- \\
        /usr/bin/python3 examples/python/train.py --epochs 1

The data come from Debian's dataset-fashion-mnist package
(gradwire.datasets). examples/python/mnist/ shows the same change made to
the classic PyTorch MNIST script; bench/python/worker.py is the benchmarks'
worker, with gradwire-worker's flags and summary.
"""

import argparse
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

import gradwire
import gradwire.torch
from gradwire.datasets import FASHION_MNIST_DIR, load_fashion_mnist


def parse_args():
    parser = argparse.ArgumentParser(
        description="Trains a CNN on Fashion-MNIST as one worker of a "
        "gradwire job (start it with gradwire run).")
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--batch-size", type=int, default=64,
                        help="examples per step on each worker")
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--momentum", type=float, default=0.9)
    parser.add_argument("--ratio", type=float, default=0.01,
                        help="fraction of each gradient's values sent "
                        "(Top-K); 1 sends them all")
    parser.add_argument("--max-steps", type=int, default=0,
                        help="stop after this many steps (0: no limit)")
    parser.add_argument("--train-limit", type=int, default=-1,
                        help="use only the first N training examples")
    parser.add_argument("--test-limit", type=int, default=-1,
                        help="use only the first N test examples")
    parser.add_argument("--log-interval", type=int, default=50,
                        help="steps between progress lines")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--data-dir", default=FASHION_MNIST_DIR)
    return parser.parse_args()


class Net(nn.Module):
    """Two 5x5 convolutions with max-pooling, then two linear layers:
    about 215,000 parameters, about a minute an epoch on a CPU."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 5, padding=2)   # 16 x 28 x 28
        self.conv2 = nn.Conv2d(16, 32, 5, padding=2)  # 32 x 14 x 14
        self.fc1 = nn.Linear(32 * 7 * 7, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc2(F.relu(self.fc1(x.flatten(1))))


def megabytes(count):
    return f"{count / 1e6:.1f} MB"


def train(args, model, optimizer, loader, sampler, rank):
    """The usual PyTorch loop; only the optimizer is gradwire's."""
    model.train()
    total = len(loader) * args.epochs
    if args.max_steps:
        total = min(total, args.max_steps)
    step = 0
    start = time.monotonic()
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)    # a new shuffle every epoch
        optimizer.set_epoch(epoch)  # for compressors with warm-up
        for images, labels in loader:
            if step == total:
                return step
            optimizer.zero_grad()
            loss = F.cross_entropy(model(images), labels)
            loss.backward()     # pushes each gradient as soon as it is ready
            optimizer.step()    # waits for the average, then SGD steps
            step += 1
            if rank == 0 and (step % args.log_interval == 0 or step == total):
                stats = optimizer.stats
                seconds = time.monotonic() - start
                print(f"epoch {epoch + 1}/{args.epochs} step {step}/{total} "
                      f"loss {loss.item():.4f} "
                      f"{step * args.batch_size / seconds:.0f} samples/s "
                      f"sent {megabytes(stats.pushed_bytes)} "
                      f"(dense fp32: {megabytes(stats.dense_equivalent_bytes)})",
                      flush=True)
    return step


@torch.no_grad()
def test_accuracy(model, images, labels):
    model.eval()
    correct = 0
    for first in range(0, len(labels), 1000):
        logits = model(images[first:first + 1000])
        correct += (logits.argmax(1) == labels[first:first + 1000]).sum()
    return int(correct) / max(1, len(labels))


def main():
    args = parse_args()
    # RANK, WORLD_SIZE and GRADWIRE_SHARDS, as gradwire run sets them.
    gradwire.init()
    rank, size = gradwire.rank(), gradwire.size()
    torch.manual_seed(args.seed)

    # Each worker trains on its own 1/size of the training set, reshuffled
    # every epoch; drop_last keeps every worker at the same number of steps,
    # as the shards need one gradient from each worker per step.
    train_set = TensorDataset(*load_fashion_mnist(
        args.data_dir, train=True, limit=args.train_limit))
    sampler = DistributedSampler(train_set, num_replicas=size, rank=rank,
                                 shuffle=True, seed=args.seed, drop_last=True)
    loader = DataLoader(train_set, batch_size=args.batch_size,
                        sampler=sampler, drop_last=True)
    if len(loader) == 0:
        sys.exit(f"{len(train_set)} training examples over {size} workers "
                 f"do not fill one batch of {args.batch_size}")

    model = Net()
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr,
                                momentum=args.momentum)
    # The shards keep the weights of the first worker to reach them, and
    # every worker starts from those.
    optimizer = gradwire.torch.DistributedOptimizer(
        optimizer, model,
        compression=gradwire.Compression("topk", ratio=args.ratio,
                                         error_feedback=True))
    try:
        start = time.monotonic()
        steps = train(args, model, optimizer, loader, sampler, rank)
        seconds = time.monotonic() - start
        stats = optimizer.stats
    finally:
        optimizer.close()

    pushed, dense = stats.pushed_bytes, stats.dense_equivalent_bytes
    print(f"worker {rank}: {steps} steps in {seconds:.1f} s, sent "
          f"{megabytes(pushed)} of {megabytes(dense)} dense fp32 "
          f"({dense / max(1, pushed):.0f}x less)", flush=True)
    if rank == 0:
        # Every worker holds the same weights: one evaluation is enough.
        images, labels = load_fashion_mnist(args.data_dir, train=False,
                                            limit=args.test_limit)
        print(f"test accuracy {test_accuracy(model, images, labels):.4f}",
              flush=True)


if __name__ == "__main__":
    main()
