"""Fixtures of the gradwire Python tests: real gradwire-server processes on
ports the OS picks, stopped at the end of each test."""

import os
import pathlib
import signal
import subprocess
import tempfile
import threading
import time
import urllib.request

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


def server_binary():
    path = os.environ.get("GRADWIRE_SERVER_BIN",
                          str(ROOT / "build" / "bin" / "gradwire-server"))
    if not os.access(path, os.X_OK):
        pytest.fail(f"gradwire-server not found at {path} (build first, or "
                    "set GRADWIRE_SERVER_BIN)")
    return path


def _read_when_written(path, process, timeout=30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return int(path.read_text().strip())
        if process.poll() is not None:
            raise RuntimeError(f"gradwire-server exited with {process.returncode}")
        time.sleep(0.05)
    raise TimeoutError(f"{path} was not written in {timeout} s")


def scrape(port):
    """The samples of http://127.0.0.1:PORT/metrics as
    {'name{labels}': value}."""
    url = f"http://127.0.0.1:{port}/metrics"
    with urllib.request.urlopen(url, timeout=10) as response:
        text = response.read().decode()
    samples = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, value = line.rsplit(" ", 1)
            samples[key] = float(value)
    return samples


def run_in_threads(work, count, timeout=120.0):
    """Runs work(i) for i in [0, count) in threads (workers of one job; the
    C++ side releases the GIL) and re-raises the first exception."""
    errors = []

    def guarded(index):
        try:
            work(index)
        except BaseException as error:  # re-raised below, in the test
            errors.append(error)

    threads = [threading.Thread(target=guarded, args=(i,))
               for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=timeout)
    assert not any(t.is_alive() for t in threads), "a worker thread hung"
    if errors:
        raise errors[0]


class Shard:
    """One gradwire-server process. "{shard}" in an extra flag is replaced
    by the shard's id (a checkpoint directory of its own)."""

    def __init__(self, directory, shard_id, num_shards, num_workers, extra):
        extra = [flag.replace("{shard}", str(shard_id)) for flag in extra]
        self.port_file = pathlib.Path(directory) / f"port-{shard_id}"
        self.metrics_port_file = pathlib.Path(directory) / f"metrics-{shard_id}"
        self.log = open(pathlib.Path(directory) / f"shard-{shard_id}.log", "w")
        self.process = subprocess.Popen(
            [server_binary(), "--address=127.0.0.1", "--port=0",
             f"--port-file={self.port_file}", f"--shard-id={shard_id}",
             f"--num-shards={num_shards}", f"--num-workers={num_workers}",
             "--metrics-address=127.0.0.1", "--metrics-port=0",
             f"--metrics-port-file={self.metrics_port_file}"] + list(extra),
            stdout=self.log, stderr=subprocess.STDOUT)
        self.port = _read_when_written(self.port_file, self.process)
        self.metrics_port = _read_when_written(self.metrics_port_file,
                                               self.process)
        self.address = f"127.0.0.1:{self.port}"

    def metrics(self):
        """The /metrics samples as {'name{labels}': value}."""
        return scrape(self.metrics_port)

    def metric_sum(self, name, **labels):
        total = 0.0
        for key, value in self.metrics().items():
            if key.split("{")[0] != name:
                continue
            if all(f'{k}="{v}"' in key for k, v in labels.items()):
                total += value
        return total

    def kill(self):
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(timeout=30)

    def stop(self):
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.kill()
        self.log.close()


@pytest.fixture
def start_shards():
    """start_shards(count, num_workers, *extra_flags) -> [Shard]."""
    started = []
    directory = tempfile.TemporaryDirectory(prefix="gradwire-pytest-")

    def start(count, num_workers, *extra):
        # A folder per cluster: a port file left by an earlier one must not
        # be read as this one's.
        cluster = tempfile.mkdtemp(dir=directory.name)
        shards = [Shard(cluster, i, count, num_workers, extra)
                  for i in range(count)]
        started.extend(shards)
        return shards

    yield start
    for shard in started:
        shard.stop()
    directory.cleanup()
