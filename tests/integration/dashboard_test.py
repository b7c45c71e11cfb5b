"""`gradwire local --dashboard` seen in a real browser.

A short cluster (2 shards, 2 workers, MLP) runs with the dashboard: Debian's
Prometheus scrapes it and serves deploy/prometheus/consoles. Once training is
over (the dashboard stays up), headless chromium renders the overview, a
worker's and a shard's page; the test reads the rendered DOM:

  - the graphs hold data: each graph that must have series has SVG lines
    with points, and a legend naming every worker (or shard);
  - the bytes shown agree with the workers' summaries: each worker's pushed,
    pulled and dense-equivalent bytes (data-bytes, and the MB shown), and the
    compression ratio shown.

A screenshot of the overview goes to $GRADWIRE_DASHBOARD_SCREENSHOT (CTest:
the build directory's dashboard.png). Ctrl-C (SIGINT) then ends the
dashboard: gradwire local exits 0 and Prometheus' port closes.

Needs gradwire ($GRADWIRE_CLI_BIN, else build/bin/gradwire) with its
gradwire-server and gradwire-worker, Debian's prometheus and chromium
(scripts/install-deps.sh installs both).
"""

import html.parser
import json
import os
import pathlib
import queue
import re
import shutil
import signal
import socket
import subprocess
import threading
import time
import urllib.parse

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
WORKERS = 2
SHARDS = 2
# The graphs' time range: the whole run, with room on both sides.
RANGE_SECONDS = 240
URL_RE = re.compile(r"dashboard at (http://127\.0\.0\.1:(\d+)/consoles/"
                    r"gradwire\.html)")
# Graphs that must show a series per worker (overview and worker page) or
# per shard; Rickshaw names a series by its legend.
WORKER_GRAPHS = {
    "Bytes pushed and pulled by worker, against dense fp32":
        ["worker {w} pushed", "worker {w} pulled", "worker {w} dense fp32"],
    "Compression ratio over time": ["worker {w} push", "worker {w} pull"],
    "Bytes sent per second by worker": ["worker {w}"],
    "Training loss by worker": ["worker {w}"],
    "Steps per second by worker": ["worker {w}"],
}
SHARD_GRAPHS = {
    "Bytes received by shard": ["shard {s} push", "shard {s} pull"],
    "Bytes per second by shard (imbalance)":
        ["shard {s} received", "shard {s} sent"],
}
OTHER_GRAPHS = {
    "Step time p50 / p99": ["p50", "p99"],
    "Push and pull latency p50 / p99": ["push p50", "pull p50"],
    "Pushed bytes per second: actual vs dense fp32":
        ["pushed (actual)", "dense fp32 equivalent"],
}


def executable(env, default, what):
    path = os.environ.get(env, str(default))
    if not os.access(path, os.X_OK):
        pytest.fail(f"{what} not found at {path}")
    return path


class Page(html.parser.HTMLParser):
    """What a rendered console holds: for each graph panel (div.gw_panel),
    its SVG line paths and legend labels; for each table row with
    data-worker or data-shard, its cells (class, data-bytes, text)."""

    def __init__(self):
        super().__init__()
        self.panels = {}
        self.rows = {}
        self._stack = []  # (tag, panel title or None, row key or None)
        self._cell = None
        self._label = None

    def _context(self):
        panel = row = None
        for _, p, r in self._stack:
            panel = p or panel
            row = r or row
        return panel, row

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        classes = (a.get("class") or "").split()
        panel = a.get("data-panel") if "gw_panel" in classes else None
        row = None
        if tag == "tr" and ("data-worker" in a or "data-shard" in a):
            row = ("worker", a["data-worker"]) if "data-worker" in a else (
                "shard", a["data-shard"])
            self.rows[row] = []
        if panel is not None:
            self.panels[panel] = {"paths": [], "labels": []}
        if tag not in ("br", "img", "input", "link", "meta", "path",
                       "line", "rect", "circle"):
            self._stack.append((tag, panel, row))
        in_panel, in_row = self._context()
        if tag == "path" and in_panel and "path" in classes:
            self.panels[in_panel]["paths"].append(a.get("d") or "")
        if tag == "span" and in_panel and "label" in classes:
            self._label = ""
        if tag == "td" and in_row:
            self._cell = {"class": a.get("class") or "",
                          "bytes": a.get("data-bytes"), "text": ""}

    def handle_endtag(self, tag):
        in_panel, in_row = self._context()
        if tag == "span" and self._label is not None and in_panel:
            self.panels[in_panel]["labels"].append(self._label.strip())
            self._label = None
        if tag == "td" and self._cell is not None and in_row:
            self._cell["text"] = self._cell["text"].strip()
            self.rows[in_row].append(self._cell)
            self._cell = None
        # Close up to the innermost open `tag`; an end tag of an element
        # never pushed (</path>) closes nothing.
        if any(t == tag for t, _, _ in self._stack):
            while self._stack.pop()[0] != tag:
                pass

    def handle_data(self, data):
        if self._label is not None:
            self._label += data
        if self._cell is not None:
            self._cell["text"] += data


def points(path):
    """The (x, y) points of an SVG path's d attribute (Rickshaw draws each
    series as one path of M and L commands)."""
    return [(float(x), float(y)) for x, y in
            re.findall(r"[ML]([-\d.e]+),([-\d.e]+)", path)]


def chromium(*args):
    binary = shutil.which("chromium")
    if binary is None:
        pytest.fail("chromium not found: scripts/install-deps.sh installs it")
    result = subprocess.run(
        [binary, "--headless", "--no-sandbox", "--disable-gpu",
         "--hide-scrollbars", "--virtual-time-budget=10000", *args],
        capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def render(url):
    page = Page()
    page.feed(chromium(url_with_range(url), "--dump-dom"))
    return page


def url_with_range(url):
    # The time control reads the graphs' range from the URL's fragment.
    window = json.dumps({"duration": RANGE_SECONDS, "endTime": 0},
                        separators=(",", ":"))
    return f"{url}#pctc{urllib.parse.quote(window)}"


def check_graph(page, title, legends, rising=False):
    """The graph `title` names each of `legends` and draws as many lines of
    3 points or more; with `rising` (counters that grew during the run),
    every line climbs and never falls, and one by 10 pixels or more (SVG y
    grows downwards)."""
    assert title in page.panels, f"no graph {title!r}: {list(page.panels)}"
    graph = page.panels[title]
    for legend in legends:
        assert legend in graph["labels"], (title, legend, graph["labels"])
    lines = [points(p) for p in graph["paths"]]
    drawn = [line for line in lines if len(line) >= 3]
    assert len(drawn) >= len(legends), (title, graph["paths"][:4])
    if rising:
        climbs = []
        for line in drawn:
            ys = [y for _, y in line]
            assert all(b <= a + 0.01 for a, b in zip(ys, ys[1:])), (title, ys)
            climbs.append(ys[0] - ys[-1])
        assert min(climbs) > 0.2 and max(climbs) >= 10, (title, climbs)


def check_worker_row(cells, summary):
    """pushed, pulled, dense fp32: exact in data-bytes, to 0.01 MB shown;
    the push ratio to 0.1 shown."""
    by_class = [c for c in cells if c["class"] == "gw_bytes"]
    assert len(by_class) == 3, cells
    wanted = [summary["pushed_bytes"], summary["pulled_bytes"],
              summary["dense_equivalent_bytes"]]
    for cell, want in zip(by_class, wanted):
        assert cell["bytes"] is not None, cell
        assert float(cell["bytes"]) == want, (cell, want)
        shown = re.fullmatch(r"(\d+\.\d\d) MB", cell["text"])
        assert shown, cell
        assert abs(float(shown.group(1)) - want / 1e6) <= 0.0051, (cell, want)
    ratio = [c for c in cells if c["class"] == "gw_ratio"][0]
    shown = re.fullmatch(r"(\d+\.\d)×", ratio["text"])
    assert shown, ratio
    want = summary["dense_equivalent_bytes"] / summary["pushed_bytes"]
    assert abs(float(shown.group(1)) - want) <= 0.051, (ratio, want)


class Lines:
    """A process's output, line by line, from a thread (run_dashboard_test
    reads gradwire run's with it too)."""

    def __init__(self, stream):
        self.lines = []
        self._queue = queue.Queue()
        threading.Thread(target=self._read, args=(stream,), daemon=True).start()

    def _read(self, stream):
        for line in stream:
            self._queue.put(line)
        self._queue.put(None)

    def wait_for(self, pattern, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self._queue.get(timeout=1)
            except queue.Empty:
                continue
            if line is None:
                break
            self.lines.append(line)
            match = re.search(pattern, line)
            if match:
                return match
        pytest.fail(f"no line matching {pattern!r} within {timeout} s:\n"
                    + "".join(self.lines[-40:]))


def port_open(port):
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", port)) == 0


def test_dashboard_shows_the_bytes_of_the_workers(tmp_path):
    gradwire = executable("GRADWIRE_CLI_BIN", ROOT / "build/bin/gradwire",
                          "gradwire")
    executable("GRADWIRE_PROMETHEUS", "/usr/bin/prometheus",
               "Prometheus (Debian: prometheus)")
    screenshot = pathlib.Path(os.environ.get(
        "GRADWIRE_DASHBOARD_SCREENSHOT", ROOT / "build/dashboard.png"))
    run_dir = tmp_path / "run"
    process = subprocess.Popen(
        [gradwire, "local", f"--shards={SHARDS}", f"--workers={WORKERS}",
         f"--log-dir={run_dir}", "--dashboard",
         "--dashboard-linger-seconds=300", "--model=mlp", "--max-steps=120",
         "--train-limit=16000", "--test-limit=500", "--progress=log",
         # About 15 s of training, so that the graphs get points while the
         # counters grow (the MLP alone takes about a second).
         "--step-delay-ms=120"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        out = Lines(process.stdout)
        url, port = out.wait_for(URL_RE, 90).groups()
        port = int(port)
        out.wait_for(r"dashboard stays up for", 150)
        summaries = [json.loads((run_dir / f"worker-{w}.json").read_text())
                     for w in range(WORKERS)]

        overview = render(url)
        for title, legends in WORKER_GRAPHS.items():
            check_graph(overview, title, [l.format(w=w) for l in legends
                                          for w in range(WORKERS)],
                        rising=title.startswith("Bytes pushed"))
        for title, legends in SHARD_GRAPHS.items():
            check_graph(overview, title, [l.format(s=s) for l in legends
                                          for s in range(SHARDS)],
                        rising=title == "Bytes received by shard")
        for title, legends in OTHER_GRAPHS.items():
            check_graph(overview, title, legends)
        for w in range(WORKERS):
            check_worker_row(overview.rows[("worker", str(w))], summaries[w])
        total = {k: sum(s[k] for s in summaries) for k in (
            "pushed_bytes", "pulled_bytes", "dense_equivalent_bytes")}
        check_worker_row(overview.rows[("worker", "all")], total)
        for s in range(SHARDS):
            received = [c for c in overview.rows[("shard", str(s))]
                        if c["class"] == "gw_bytes"][0]
            assert float(received["bytes"]) > 0, received

        worker_page = render(url.replace("gradwire.html",
                                         "gradwire-worker.html?worker=1"))
        check_worker_row(worker_page.rows[("worker", "1")], summaries[1])
        check_graph(worker_page, "Mean step phase times",
                    ["reduce", "compress", "push", "pull"])
        check_graph(worker_page, "Bytes pushed and pulled by worker, "
                    "against dense fp32", ["pushed", "pulled", "dense fp32"])
        shard_page = render(url.replace("gradwire.html",
                                        "gradwire-shard.html?shard=0"))
        check_graph(shard_page, "Bytes received by shard",
                    ["push requests", "pull requests"])
        check_graph(shard_page, "Chunk version min / max by shard",
                    ["min", "max"])

        screenshot.parent.mkdir(parents=True, exist_ok=True)
        chromium("--window-size=1400,2300", f"--screenshot={screenshot}",
                 url_with_range(url))
        assert screenshot.stat().st_size > 50_000, screenshot

        # Ctrl-C ends the dashboard's wait; the run's result stands.
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=60) == 0, "".join(out.lines[-40:])
        assert not port_open(port), f"Prometheus still listens on {port}"
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
