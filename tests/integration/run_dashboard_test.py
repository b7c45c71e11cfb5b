"""`gradwire run --dashboard` with Python workers, seen through
Prometheus's HTTP API.

Two workers run a short script with gradwire.torch.DistributedOptimizer
against one shard that gradwire run starts. Once the run is over (the
dashboard stays up), the test asks the dashboard's Prometheus:

  - its targets: the shard under job gradwire-shard, each worker's
    /metrics (the port in its GRADWIRE_METRICS_PORT_FILE) under job
    gradwire-worker;
  - the series: each worker's last gradwire_worker_steps_total is the
    steps it trained, which Prometheus saw only because the workers kept
    /metrics up after the script ended (GRADWIRE_METRICS_LINGER_SECONDS),
    and the shard counted the bytes pushed.

Ctrl-C (SIGINT) then ends the dashboard: gradwire run exits 0 and
Prometheus's port closes.

Needs gradwire ($GRADWIRE_CLI_BIN, else build/bin/gradwire) with its
gradwire-server, the gradwire package on PYTHONPATH (its extension built)
and Debian's prometheus; skipped without the latter.
"""

import json
import os
import pathlib
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.parse
import urllib.request

import pytest

from dashboard_test import Lines, port_open  # beside this file

ROOT = pathlib.Path(__file__).resolve().parents[2]
WORKERS = 2
STEPS = 6
URL_RE = re.compile(r"dashboard at http://127\.0\.0\.1:(\d+)/consoles/"
                    r"gradwire\.html")
WORKER_SCRIPT = f"""
import torch
import gradwire.torch

torch.manual_seed(0)
net = torch.nn.Linear(32, 4)
optimizer = gradwire.torch.DistributedOptimizer(
    torch.optim.SGD(net.parameters(), lr=0.1), net)
for _ in range({STEPS}):
    optimizer.zero_grad()
    net(torch.randn(8, 32)).square().sum().backward()
    optimizer.step()
print("trained", flush=True)
"""


def api(port, path, **query):
    """The data of GET /api/v1/PATH?QUERY on the dashboard's Prometheus."""
    url = (f"http://127.0.0.1:{port}/api/v1/{path}?"
           + urllib.parse.urlencode(query))
    with urllib.request.urlopen(url, timeout=10) as response:
        answer = json.load(response)
    assert answer["status"] == "success", answer
    return answer["data"]


def last_values(port, metric):
    """{(job, instance): the metric's last value, summed over its other
    labels}, over the last hour: the workers have exited, and their series
    are stale now."""
    data = api(port, "query", query=f"sum by (job, instance) "
                                    f"(last_over_time({metric}[1h]))")
    return {(r["metric"]["job"], r["metric"]["instance"]): float(r["value"][1])
            for r in data["result"]}


def targets_by_job(port):
    """{job: {instance, ...}} of the dashboard's active targets."""
    by_job = {}
    for target in api(port, "targets")["activeTargets"]:
        by_job.setdefault(target["labels"]["job"], set()).add(
            target["labels"]["instance"])
    return by_job


def eventually(read, wanted, timeout=30):
    """read() once it returns `wanted`, or its last answer after
    `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        got = read()
        if got == wanted or time.monotonic() > deadline:
            return got
        time.sleep(0.5)


def test_the_dashboard_scrapes_the_shard_and_the_python_workers(tmp_path):
    prometheus = os.environ.get("GRADWIRE_PROMETHEUS") or shutil.which(
        "prometheus")
    if prometheus is None or not os.access(prometheus, os.X_OK):
        pytest.skip("Prometheus is not installed (Debian: prometheus)")
    gradwire = os.environ.get("GRADWIRE_CLI_BIN",
                              str(ROOT / "build/bin/gradwire"))
    if not os.access(gradwire, os.X_OK):
        pytest.fail(f"gradwire not found at {gradwire}")
    script = tmp_path / "train.py"
    script.write_text(WORKER_SCRIPT)
    run_dir = tmp_path / "run"
    # The workers' metrics variables are gradwire run's to set.
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("GRADWIRE_METRICS_")}
    process = subprocess.Popen(
        [gradwire, "run", "--dashboard", "--dashboard-linger-seconds=300",
         f"--prometheus={prometheus}", "-n", str(WORKERS), "--shards", "1",
         "--run-dir", str(run_dir), "--", sys.executable, str(script)],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        out = Lines(process.stdout)
        port = int(out.wait_for(URL_RE, 90).group(1))
        out.wait_for(r"dashboard stays up for", 180)
        assert sum("] trained" in line for line in out.lines) == WORKERS, \
            "".join(out.lines[-40:])

        shard_port = int((run_dir / "shard-0.metrics-port").read_text())
        worker_ports = [int((run_dir / f"worker-{w}.metrics-port")
                            .read_text()) for w in range(WORKERS)]
        # Prometheus hands targets to its scrapers every 5 s.
        wanted = {"gradwire-shard": {f"127.0.0.1:{shard_port}"},
                  "gradwire-worker": {f"127.0.0.1:{p}"
                                      for p in worker_ports}}
        targets = eventually(lambda: targets_by_job(port), wanted)
        assert targets == wanted

        steps = eventually(
            lambda: last_values(port, "gradwire_worker_steps_total"),
            {("gradwire-worker", f"127.0.0.1:{p}"): STEPS
             for p in worker_ports})
        assert steps == {("gradwire-worker", f"127.0.0.1:{p}"): STEPS
                         for p in worker_ports}, steps
        sent = last_values(port, "gradwire_worker_sent_bytes_total")
        assert len(sent) == WORKERS and min(sent.values()) > 0, sent
        received = last_values(port, "gradwire_shard_received_bytes_total")
        assert received.get(("gradwire-shard",
                             f"127.0.0.1:{shard_port}"), 0) > 0, received

        # Ctrl-C ends the dashboard's wait; the run's result stands.
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=60) == 0, "".join(out.lines[-40:])
        assert not port_open(port), f"Prometheus still listens on {port}"
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
