#!/usr/bin/python3
"""bench/python/worker.py --baseline=ddp, counting what its network
interface carries during the training steps: the "ddp" row of
bench/auto/auto.sh, and the DDP exchange that the rows with a compression
hook (ddp_fp16.py, ddp_powersgd.py) build on.

The interface is the one gloo sends on, GLOO_SOCKET_IFNAME (auto.sh's rows
set it to eth0 of the worker's network host, whose only traffic is this
process's). Its byte counters (/proc/net/dev of this process's network
namespace: every packet sent or received, headers and retransmissions
included, with one header per offloaded packet of up to 64 KiB) are
read when start-up has ended (the process group is up and DDP has
broadcast the initial weights) and again after the last step, each time
after a barrier: bytes a collective left in a socket's send buffer or a
shaped link's queue have then reached the peer, and count on their side of
the boundary. The summary (--summary-json) gets

  link_interface        the interface
  link_sent_bytes       bytes it sent during the steps
  link_received_bytes   bytes it received during the steps

and whatever the exchange's summary_fields() adds. The second barrier's
packets (about 100 bytes each way) are counted; the test evaluation, which
has no network traffic, falls between the last step and that read. Without
GLOO_SOCKET_IFNAME (a run on loopback, the tests) nothing is counted, no
barrier is added, and the summary is worker.py's.

    GLOO_SOCKET_IFNAME=eth0 /usr/bin/python3 bench/auto/ddp_link.py \\
        --baseline=ddp --worker-id=0 --num-workers=2 \\
        --ddp-master=10.88.0.20:29511 --model=cnn ...

Takes worker.py's flags; without --baseline=ddp it refuses to run (exit 2).
"""

import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                os.pardir, "python"))
import worker  # noqa: E402  (bench/python/worker.py)
from python_worker import exchange, training  # noqa: E402

from link_bytes import InterfaceCounters  # noqa: E402  (beside this file)


class LinkCountingDdp(exchange.DdpBaseline):
    """worker.py's DDP baseline, reading GLOO_SOCKET_IFNAME's counters at
    the end of start-up, after the last step, and wherever a subclass calls
    read_link()."""

    def __init__(self, args, model):
        super().__init__(args, model)
        name = os.environ.get("GLOO_SOCKET_IFNAME")
        self.link = InterfaceCounters(name) if name else None
        self.link_reads = {}  # label: (sent, received)
        self.steps_settled = False
        self.read_link("start")

    def read_link(self, label):
        """Records the counters under `label` once every rank has got here
        (a barrier); nothing where no interface is counted. Every rank must
        call it at the same point."""
        if self.link is None:
            return
        self.dist.barrier()
        self.link_reads[label] = self.link.read()

    def link_bytes(self, since, until="end"):
        """(sent, received) between two reads; None unless both were
        made."""
        if since not in self.link_reads or until not in self.link_reads:
            return None
        return tuple(b - a for a, b in zip(self.link_reads[since],
                                           self.link_reads[until]))

    def step(self, epoch):
        super().step(epoch)
        self.steps_settled = False

    def settle(self):
        super().settle()
        self.steps_settled = True

    def close(self):
        # Only after the loop ended normally: a rank that failed mid-step
        # would leave its peer waiting in the barrier.
        if self.steps_settled:
            self.read_link("end")
        super().close()

    def summary_fields(self):
        """What this exchange adds to worker.py's summary."""
        steps = self.link_bytes("start")
        if steps is None:
            return {}
        return {"link_interface": self.link.name,
                "link_sent_bytes": steps[0], "link_received_bytes": steps[1]}


def add_to_summary(path, fields):
    """Adds `fields` to the summary worker.py wrote at `path`."""
    with open(path, encoding="utf-8") as f:
        out = json.load(f)
    out.update(fields)
    with open(path, "w", encoding="utf-8") as f:
        f.write(json.dumps(out) + "\n")


def run(argv, baseline, prog):
    """worker.main(argv) with `baseline` (a LinkCountingDdp) as its DDP
    exchange, then the exchange's summary_fields() added to --summary-json.
    Returns worker.py's exit code (2 without --baseline=ddp)."""
    if "--baseline=ddp" not in argv:
        print(f"{prog}: --baseline=ddp is required (this is worker.py's "
              "DDP baseline)", file=sys.stderr)
        return 2
    built = []

    def build(args, model):
        built.append(baseline(args, model))
        return built[-1]

    # python_worker.training.run() builds the DDP exchange by this name.
    training.DdpBaseline = build
    code = worker.main(argv)
    if code == 0 and built:
        summary_json = worker.parse_flags(argv).summary_json
        if summary_json:
            add_to_summary(summary_json, built[-1].summary_fields())
    return code


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:], LinkCountingDdp, "ddp_link.py"))
