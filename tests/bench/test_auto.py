"""bench/auto/auto.sh without training: its argument checks (before it
needs root or binaries), and bench/auto/auto_report.py on hand-written
worker summaries: the row it records, the table and JSON report, rows that
are not available, and the convergence table; and bench/auto/ddp_fp16.py
as two real gloo ranks (DDP with the fp16 hook)."""

import json
import os
import pathlib
import socket
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench" / "auto" / "auto.sh"
REPORT = ROOT / "bench" / "auto" / "auto_report.py"


def run_script(*args):
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True,
                          text=True, timeout=60)


def run_report(*args):
    result = subprocess.run([sys.executable, str(REPORT), *map(str, args)],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.mark.parametrize("argument, named", [
    ("--links=2mbit", "--links: '2mbit'"),
    ("--links=10gbit", "--links: '10gbit'"),
    ("--configs=dense,zip", "--configs: 'zip'"),
    ("--steps=0", "--steps: '0'"),
    ("--slow-steps=x", "--slow-steps: 'x'"),
    ("--test-limit=-1", "--test-limit: '-1'"),
    ("--seeds=1,a", "--seeds: '1,a'"),
    ("--bin=/nonexistent", "--bin: '/nonexistent'"),
    ("--rate", "unknown argument '--rate'"),
])
def test_bad_arguments_name_the_option(argument, named):
    result = run_script(argument)
    assert result.returncode == 2
    assert named in result.stderr


def write_summaries(directory, summaries):
    directory.mkdir()
    for i, summary in enumerate(summaries):
        (directory / f"worker-{i}.json").write_text(json.dumps(summary))
    return directory


def summary(worker, steps, train, wall, pushed, pulled, accuracy=None,
            **extra):
    out = {"worker_id": worker, "steps": steps, "train_seconds": train,
           "wall_seconds": wall, "pushed_bytes": pushed,
           "pulled_bytes": pulled, "epoch_loss": [1.0]}
    if accuracy is not None:
        out["test_accuracy"] = accuracy
    out.update(extra)
    return out


def record(directory, *extra, steps=10, elapsed=20.0):
    line = run_report("record", "--link=100mbit", "--config=topk1",
                      "--title=Top-K 1% + EF", f"--steps={steps}",
                      f"--elapsed={elapsed}", "--load=1.5", *extra,
                      directory)
    return json.loads(line)


def test_record_takes_the_slower_worker_and_both_workers_bytes(tmp_path):
    directory = write_summaries(tmp_path / "run", [
        summary(0, 10, 4.0, 6.0, 1000, 3000, accuracy=0.75),
        summary(1, 10, 5.0, 5.5, 2000, 4000)])
    row = record(directory)
    assert row["status"] == "ok"
    assert row["steps"] == 10 and not row["reduced_steps"]
    assert row["seconds_per_step"] == pytest.approx(0.5)
    assert row["payload_bytes_per_step"] == 1000
    assert row["wire_bytes_per_step"] is None
    assert row["test_accuracy"] == 0.75
    # launch to exit (20 s) less the slower training loop (6 s)
    assert row["startup_seconds"] == pytest.approx(14.0)


def test_record_adds_wire_bytes_and_marks_fewer_steps(tmp_path):
    directory = write_summaries(tmp_path / "run", [
        summary(0, 4, 2.0, 2.0, 10, 10, accuracy=0.5,
                wire_sent_bytes=500, wire_received_bytes=40,
                startup_wire_sent_bytes=100, startup_wire_received_bytes=0,
                startup_seconds=1.5),
        summary(1, 4, 2.0, 2.0, 10, 10, wire_sent_bytes=400,
                wire_received_bytes=60, startup_wire_sent_bytes=0,
                startup_wire_received_bytes=20, startup_seconds=2.5)])
    row = record(directory, steps=30)
    assert row["reduced_steps"]
    # (400 + 40 + 400 + 40) over 4 steps: start-up's bytes left out.
    assert row["wire_bytes_per_step"] == 220
    assert row["worker_startup_seconds"] == 2.5


def test_record_leaves_wire_bytes_out_unless_every_worker_counts(tmp_path):
    directory = write_summaries(tmp_path / "run", [
        summary(0, 4, 2.0, 2.0, 10, 10, accuracy=0.5,
                wire_sent_bytes=400, wire_received_bytes=40,
                startup_wire_sent_bytes=0, startup_wire_received_bytes=0),
        summary(1, 4, 2.0, 2.0, 10, 10, wire_sent_bytes=None,
                wire_received_bytes=None)])
    row = record(directory)
    assert row["wire_bytes_per_step"] is None
    assert row["worker_startup_seconds"] is None


def test_record_refuses_a_missing_summary(tmp_path):
    directory = write_summaries(tmp_path / "run", [
        summary(0, 4, 2.0, 2.0, 10, 10)])
    result = subprocess.run(
        [sys.executable, str(REPORT), "record", "--link=unshaped",
         "--config=dense", "--title=dense", "--steps=4", "--elapsed=3",
         "--load=0", str(directory)], capture_output=True, text=True)
    assert result.returncode != 0
    assert "expected 2 worker summaries, found 1" in result.stderr


def test_report_compares_with_compute_and_writes_every_row(tmp_path):
    compute = write_summaries(tmp_path / "compute", [
        summary(0, 10, 1.0, 1.0, 0, 0, accuracy=0.4),
        summary(1, 10, 1.0, 1.0, 0, 0)])
    topk = write_summaries(tmp_path / "topk", [
        summary(0, 10, 3.0, 3.0, 500, 500, accuracy=0.6),
        summary(1, 10, 2.0, 2.0, 500, 500)])
    rows = tmp_path / "rows.jsonl"
    rows.write_text(
        run_report("record", "--link=none", "--config=compute",
                   "--title=compute only", "--steps=10", "--elapsed=5",
                   "--load=1", "--payload=none", compute)
        + run_report("record", "--link=10mbit", "--config=topk1",
                     "--title=Top-K 1% + EF", "--steps=10", "--elapsed=9",
                     "--load=1", topk)
        + run_report("unavailable", "--link=10mbit", "--config=auto",
                     "--title=auto", "--reason=unknown compressor 'auto'"))
    out_json = tmp_path / "out" / "auto.json"
    table = run_report("report", f"--json={out_json}", "--command=auto.sh",
                       "--steps=10", "--slow-steps=3", rows)
    assert "link: 10mbit" in table
    assert "not available: unknown compressor 'auto'" in table
    report = json.loads(out_json.read_text())
    assert report["command"] == "auto.sh"
    assert report["machine"]["cores"] >= 1
    by_config = {r["config"]: r for r in report["rows"]}
    assert set(by_config) == {"compute", "topk1", "auto"}
    assert by_config["compute"]["payload_bytes_per_step"] == 0
    assert by_config["topk1"]["vs_compute"] == pytest.approx(3.0)
    assert by_config["auto"]["status"] == "not available"


def test_convergence_table_has_a_column_per_seed(tmp_path):
    lines = []
    for seed, accuracy in ((1, 0.80), (2, 0.84)):
        directory = write_summaries(tmp_path / f"dense-{seed}", [
            summary(0, 468, 46.8, 50.0, 1, 1, accuracy=accuracy),
            summary(1, 468, 46.8, 50.0, 1, 1)])
        lines.append(run_report(
            "record", "--link=unshaped", "--config=dense",
            "--title=dense fp32", "--steps=0", "--elapsed=60", "--load=1",
            f"--seed={seed}", directory))
        lines.append(run_report(
            "unavailable", "--link=10mbit", "--config=auto", "--title=auto",
            "--reason=not in this build", f"--seed={seed}"))
    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(lines))
    out_json = tmp_path / "convergence.json"
    table = run_report("convergence", f"--json={out_json}",
                       "--command=auto.sh --convergence", rows)
    assert "| setting | link | seed 1 | seed 2 |" in table
    assert "| dense fp32 | unshaped | 0.8000 | 0.8400 | 0.8200 ± 0.0200 |" \
        in table
    assert "| auto | 10mbit | not available: not in this build |" in table
    report = json.loads(out_json.read_text())
    assert report["summary"][0]["mean"] == pytest.approx(0.82)


def python_package_dir():
    """build/python beside the CLI under test, where gradwire is built."""
    cli = os.environ.get("GRADWIRE_CLI_BIN")
    build = (pathlib.Path(cli).resolve().parents[1] if cli
             else ROOT / "build")
    return build / "python"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_ddp(script, tmp_path, name):
    """Two DDP ranks of SCRIPT for 2 steps on loopback; their summaries."""
    env = dict(os.environ, PYTHONPATH=str(python_package_dir()),
               OMP_NUM_THREADS="1")
    master = f"127.0.0.1:{free_port()}"
    ranks = [subprocess.Popen(
        [sys.executable, str(script), "--baseline=ddp", f"--worker-id={i}",
         "--num-workers=2", f"--ddp-master={master}", "--model=mlp",
         "--max-steps=2", "--train-limit=512", "--test-limit=64",
         "--progress=none", f"--evaluate={'true' if i == 0 else 'false'}",
         f"--summary-json={tmp_path / f'{name}-{i}.json'}"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for i in range(2)]
    for rank in ranks:
        output, _ = rank.communicate(timeout=100)
        assert rank.returncode == 0, output
    return [json.loads((tmp_path / f"{name}-{i}.json").read_text())
            for i in range(2)]


def mlp_parameters():
    """The number of trainable parameters of worker.py's MLP."""
    sys.path[:0] = [str(python_package_dir()), str(ROOT / "bench" / "python")]
    from python_worker.models import make_model
    return sum(p.numel() for p in make_model("mlp").parameters()
               if p.requires_grad)


def test_ddp_fp16_all_reduces_two_bytes_an_element(tmp_path):
    probe = subprocess.run(
        [sys.executable, "-c", "import gradwire, torch.distributed"],
        env=dict(os.environ, PYTHONPATH=str(python_package_dir())),
        capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"gradwire is not importable from {python_package_dir()}")
    ranks = run_ddp(ROOT / "bench" / "auto" / "ddp_fp16.py", tmp_path, "fp16")
    assert [r["steps"] for r in ranks] == [2, 2]
    assert all("fp16_compress_hook" in r["optimizer"] for r in ranks)
    # worker.py's DDP counts 4 bytes an element; the fp16 hook sends 2.
    assert ranks[0]["pushed_bytes"] == 2 * 2 * mlp_parameters()
    assert 0 <= ranks[0]["test_accuracy"] <= 1
