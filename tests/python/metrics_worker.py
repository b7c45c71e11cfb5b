"""A worker that serves /metrics (GRADWIRE_METRICS_PORT in its
environment, as `gradwire run` sets it): trains 3 steps, then prints as
JSON its SyncStats and the samples its own endpoint serves. With the
shards' addresses as its argument it is a one-worker job; without, it
takes its place from the environment (gradwire run) and stays up a
second longer, so that the run sees its endpoint."""

import json
import os
import sys
import time

import torch

import gradwire
import gradwire.torch
from conftest import scrape


def main():
    alone = len(sys.argv) > 1
    placement = dict(shards=sys.argv[1].split(","), node_rank=0,
                     num_nodes=1) if alone else {}
    torch.manual_seed(0)
    net = torch.nn.Linear(64, 64)
    optimizer = gradwire.torch.DistributedOptimizer(
        torch.optim.SGD(net.parameters(), lr=0.1), net,
        compression={"dense_below": 0}, **placement)
    for _ in range(3):
        optimizer.zero_grad()
        net(torch.randn(8, 64)).square().sum().backward()
        optimizer.step()
    port_file = os.environ["GRADWIRE_METRICS_PORT_FILE"]
    with open(port_file.replace("{rank}", os.environ["RANK"])) as f:
        port = int(f.read())
    samples = {}  # Summed over each family's label sets.
    for key, value in scrape(port).items():
        family = key.split("{")[0]
        samples[family] = samples.get(family, 0.0) + value
    print(json.dumps({"stats": optimizer.stats.as_dict(),
                      "samples": samples}), flush=True)
    if not alone:
        time.sleep(1.5)  # gradwire run looks for the port every 50 ms
    optimizer.close()


if __name__ == "__main__":
    main()
