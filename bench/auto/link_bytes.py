"""The bytes each worker host's link carried during a row of the
shaped-link matrix (bench/auto/auto.sh): auto.sh reads both worker hosts'
interface counters before and after a run (link-start.txt, link-end.txt
in the row's folder), DDP ranks and the real models' workers read their
own around the steps (InterfaceCounters: bench/auto/ddp_link.py,
bench/auto/periodic_eval.py), and auto_report.py records them as the
row's link_* fields."""

import os


class InterfaceCounters:
    """The byte counters of one network interface of this process's
    network namespace."""

    def __init__(self, name):
        self.name = name

    def read(self):
        """(sent, received) bytes since the interface was made. Raises
        OSError when this namespace has no such interface."""
        with open("/proc/net/dev", encoding="ascii") as f:
            for line in f:
                name, colon, fields = line.partition(":")
                if colon and name.strip() == self.name:
                    values = fields.split()
                    # 8 receive fields, then transmit: bytes first in each.
                    return int(values[8]), int(values[0])
        raise OSError(f"/proc/net/dev has no interface {self.name}")


def read_link_counters(path):
    """{worker id: (sent, received)} from a file of auto.sh's
    link_counters ("worker<i> SENT RECEIVED" lines); None without it."""
    if not os.path.exists(path):
        return None
    counters = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            name, sent, received = line.split()
            counters[int(name.removeprefix("worker"))] = (int(sent),
                                                          int(received))
    return counters


def numbers(summary, *keys):
    """The summary's values of `keys`; None unless every one is a
    number."""
    values = [summary.get(k) for k in keys]
    if not all(isinstance(v, (int, float)) for v in values):
        return None
    return values


# The summaries' link counts: DDP's of the steps (bench/auto/ddp_link.py),
# gradwire-worker's TCP payload of start-up.
STEP_LINK_FIELDS = ("link_sent_bytes", "link_received_bytes")
STARTUP_WIRE_FIELDS = ("startup_wire_sent_bytes",
                       "startup_wire_received_bytes")


def run_link_bytes(directory):
    """{worker id: (sent, received)} over the workers' whole run, from
    auto.sh's reads before and after it; None without them."""
    start = read_link_counters(os.path.join(directory, "link-start.txt"))
    end = read_link_counters(os.path.join(directory, "link-end.txt"))
    if start is None or end is None:
        return None
    return {w: (end[w][0] - start[w][0], end[w][1] - start[w][1])
            for w in start if w in end}


def step_link_bytes(summaries, run):
    """(how the steps were told apart, [sent, received] of each worker's
    steps), or (None, []): measured by each DDP rank itself, or the whole
    run less start-up's TCP payload (gradwire)."""
    if all(numbers(s, *STEP_LINK_FIELDS) for s in summaries):
        return "steps", [numbers(s, *STEP_LINK_FIELDS) for s in summaries]
    if run is None or not all(s.get("worker_id") in run
                              and numbers(s, *STARTUP_WIRE_FIELDS)
                              for s in summaries):
        return None, []
    # Not startup_packet_*: those count a header per TCP segment, the
    # interface one per offloaded packet, and would take too much off.
    return "run less start-up payload", [
        [a - b for a, b in zip(run[s["worker_id"]],
                               numbers(s, *STARTUP_WIRE_FIELDS))]
        for s in summaries]


def link_fields(directory, summaries, steps):
    """The row's link_* fields (see the docstring)."""
    by_worker = sorted(summaries, key=lambda s: s.get("worker_id", 0))
    run = run_link_bytes(directory)
    window, per_worker = step_link_bytes(by_worker, run)
    out = {"link_window": window,
           "link_bytes_per_step": None if window is None else round(
               sum(sum(w) for w in per_worker) / steps),
           "link_sent_bytes_per_step":
               [round(w[0] / steps) for w in per_worker] or None,
           "link_received_bytes_per_step":
               [round(w[1] / steps) for w in per_worker] or None,
           "link_run_sent_bytes":
               None if run is None else [run[w][0] for w in sorted(run)],
           "link_run_received_bytes":
               None if run is None else [run[w][1] for w in sorted(run)]}
    out.update(warmup_fields(by_worker, steps))
    return out


def warmup_fields(summaries, steps):
    """Where the DDP exchange has warm-up steps (PowerSGD's dense
    all-reduce before start_powerSGD_iter): their count, and both workers'
    link bytes per step after them."""
    warmup = {s.get("warmup_steps") for s in summaries}
    if len(warmup) != 1 or not isinstance(next(iter(warmup)), int):
        return {}
    warmup = warmup.pop()
    out = {"warmup_steps": warmup, "link_bytes_per_step_after_warmup": None}
    after = [numbers(s, "link_after_warmup_sent_bytes",
                     "link_after_warmup_received_bytes") for s in summaries]
    if steps > warmup and all(after):
        out["link_bytes_per_step_after_warmup"] = round(
            sum(sum(a) for a in after) / (steps - warmup))
    return out
