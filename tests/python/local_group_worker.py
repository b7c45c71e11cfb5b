"""A rank of a node's local group, run as `gradwire run --nnodes 1 -n 2
-- python local_group_worker.py OUT`: test_distributed_optimizer's model,
optimizer and schedule on this rank's data, compressed as
GRADWIRE_COMPRESSION says. Writes the weights it started and ended with
and its exchange count to OUT ("{rank}" replaced)."""

import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import gradwire  # noqa: E402
from gradwire.torch import DistributedOptimizer  # noqa: E402
from test_distributed_optimizer import STEPS, make_optimizer  # noqa: E402
from test_parameter_sync import batch, make_model  # noqa: E402


def weights(model):
    return [p.detach().flatten().tolist() for p in model.parameters()]


def main():
    rank = int(os.environ["RANK"])
    model = make_model(seed=rank + 1)
    optimizer = DistributedOptimizer(
        make_optimizer(model), named_parameters=model.named_parameters())
    initial = weights(model)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=3,
                                                gamma=0.5)
    for step in range(STEPS):
        points, labels = batch(step, rank)
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(model(points), labels).backward()
        optimizer.step()
        scheduler.step()
    with open(sys.argv[1].format(rank=rank), "w") as f:
        json.dump({"local_size": gradwire.local_size(),
                   "exchanges": optimizer.next_step, "initial": initial,
                   "final": weights(model)}, f)
    optimizer.close()


if __name__ == "__main__":
    main()
