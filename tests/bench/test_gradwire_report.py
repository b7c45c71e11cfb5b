"""scripts/gradwire_report.py on hand-written summaries (testdata/): the
table's numbers, both PNG files, and the errors (a malformed file, a file
that is not a summary, a missing matplotlib, bad command lines)."""

import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "gradwire_report.py"
DATA = pathlib.Path(__file__).resolve().parent / "testdata"
sys.path.insert(0, str(ROOT / "scripts"))

import gradwire_report as report  # noqa: E402

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def run_report(*args, env=None):
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, args)],
                          capture_output=True, text=True, timeout=60,
                          env=env)


def table_rows(text):
    """{setting: [cells...]} of the Markdown table in `text`."""
    rows = {}
    for line in text.splitlines():
        if line.startswith("| ") and not line.startswith("| setting"):
            cells = [c.strip() for c in line.strip("|").split("|")]
            rows[cells[0]] = cells[1:]
    return rows


def check_png(path):
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE, path
    assert len(data) > 10_000, f"{path}: {len(data)} bytes"
    width = int.from_bytes(data[16:20], "big")
    height = int.from_bytes(data[20:24], "big")
    assert width >= 400 and height >= 300, (width, height)


@pytest.fixture
def standard_run(tmp_path):
    """dense, topk (two seeds under one label) and a summary without
    test_accuracy."""
    result = run_report("--out", tmp_path, DATA / "dense.json",
                        f"--label=topk={DATA / 'topk-s1.json'}", "--label",
                        f"topk={DATA / 'topk-s2.json'}",
                        DATA / "no-accuracy.json")
    assert result.returncode == 0, result.stderr
    return result, tmp_path


def test_table_numbers(standard_run):
    result, out = standard_run
    rows = table_rows(result.stdout)
    assert list(rows) == ["dense", "topk", "no-accuracy"]
    # runs, accuracy, points, pushed MB, pulled MB, push+pull, pushed, wall
    assert rows["dense"] == ["1", "0.8500", "+0.00", "400.0", "100.0",
                             "1.0×", "1.0×", "100"]
    # (0.86 + 0.83) / 2 ± (0.86 - 0.83) / 2; 500 MB / 24 MB; 400 / 4.
    assert rows["topk"] == ["2", "0.8450 ± 0.0150", "-0.50", "4.0", "20.0",
                            "20.8×", "100.0×", "100"]
    assert rows["no-accuracy"] == ["1", "—", "—", "2.0", "10.0", "41.7×",
                                   "200.0×", "50"]
    assert "| setting | runs | test accuracy | vs dense (points) |" in \
        result.stdout
    assert "mean ± half the range" in result.stdout
    assert (out / "report.md").read_text() in result.stdout


def test_both_plots(standard_run):
    _, out = standard_run
    check_png(out / "report-accuracy.png")
    check_png(out / "report-bytes.png")


def test_prefix_and_baseline(tmp_path):
    result = run_report("--out", tmp_path, "--prefix=cmp",
                        "--baseline=topk-s1", DATA / "topk-s1.json",
                        DATA / "topk-s2.json", DATA / "dense.json")
    assert result.returncode == 0, result.stderr
    rows = table_rows(result.stdout)
    assert rows["topk-s2"][1:3] == ["0.8300", "-3.00"]
    assert rows["dense"][1:3] == ["0.8500", "-1.00"]
    assert rows["dense"][5:7] == ["0.048×", "0.01×"]
    for name in ("cmp.md", "cmp-accuracy.png", "cmp-bytes.png"):
        assert (tmp_path / name).is_file()


def test_without_a_baseline_pushed_bytes_against_dense_equivalent(tmp_path):
    result = run_report("--out", tmp_path, DATA / "topk-s1.json")
    assert result.returncode == 0, result.stderr
    rows = table_rows(result.stdout)
    assert rows["topk-s1"] == ["1", "0.8600", "—", "4.0", "20.0", "—",
                               "100.0×†", "90"]
    assert "† against the summaries' dense_equivalent_bytes" in result.stdout


def test_malformed_file_is_named(tmp_path):
    malformed = DATA / "malformed.json"
    result = run_report("--out", tmp_path, DATA / "dense.json", malformed)
    assert result.returncode == 1
    assert f"{malformed}: not JSON" in result.stderr
    assert not (tmp_path / "report-accuracy.png").exists()


def test_not_a_summary(tmp_path):
    other = tmp_path / "other.json"
    other.write_text('{"accuracy": 0.9}\n')
    result = run_report("--out", tmp_path, other)
    assert result.returncode == 1
    assert f'{other}: no number "pushed_bytes"' in result.stderr
    listed = tmp_path / "list.json"
    listed.write_text("[1, 2]\n")
    result = run_report("--out", tmp_path, listed)
    assert result.returncode == 1
    assert f"{listed}: not a JSON object" in result.stderr


def test_missing_file(tmp_path):
    missing = tmp_path / "missing.json"
    result = run_report("--out", tmp_path, missing)
    assert result.returncode == 1
    assert f"{missing}: cannot read it" in result.stderr


@pytest.mark.parametrize("args, message", [
    ([], "no summary files given"),
    (["--label=topk"], "--label=topk: expected NAME=FILE"),
    (["--baseline=nope", DATA / "dense.json"], "--baseline: no label 'nope'"),
    (["--bogus", DATA / "dense.json"], "unrecognized arguments: --bogus"),
])
def test_usage_errors(tmp_path, args, message):
    result = run_report("--out", tmp_path, *args)
    assert result.returncode == 2
    assert message in result.stderr
    assert "(see gradwire_report.py --help)" in result.stderr


def test_missing_matplotlib_names_the_package(tmp_path):
    fake = tmp_path / "fake" / "matplotlib"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('hidden')\n")
    env = dict(os.environ, PYTHONPATH=str(fake.parent))
    result = run_report("--out", tmp_path, DATA / "dense.json", env=env)
    assert result.returncode == 1
    assert "matplotlib is missing" in result.stderr
    assert "python3-matplotlib" in result.stderr


def summary(accuracy, pushed, pulled=100, compressor="topk"):
    return {"test_accuracy": accuracy, "pushed_bytes": pushed,
            "pulled_bytes": pulled, "dense_equivalent_bytes": 1000,
            "wall_seconds": 1.0, "compressor": compressor,
            "epoch_test_accuracy": [accuracy]}


def test_rows_compare_within_their_group():
    runs = [
        report.Run("dense", summary(0.80, 1000, compressor="none"),
                   group="momentum"),
        report.Run("topk", summary(0.82, 10), group="momentum"),
        report.Run("dense", summary(0.70, 1000, compressor="none"),
                   group="sgd"),
        report.Run("topk", summary(0.74, 10), group="sgd"),
        report.Run("topk", summary(0.76, 10), group="sgd"),
    ]
    assert report.default_baseline(runs) == "dense"
    rows = report.make_rows(runs, "dense")
    assert [(r.group, r.label, len(r.runs)) for r in rows] == [
        ("momentum", "dense", 1), ("momentum", "topk", 1),
        ("sgd", "dense", 1), ("sgd", "topk", 2)]
    assert rows[1].points_vs_baseline == pytest.approx(2.0)
    assert rows[3].points_vs_baseline == pytest.approx(5.0)
    assert rows[3].accuracy_half_range == pytest.approx(0.01)
    assert rows[3].total_reduction == pytest.approx(1100 / 110)
    assert rows[3].pushed_reduction == pytest.approx(100)
    lines = report.markdown_table(rows, "dense fp32", "optimizer")
    assert lines[2].startswith("| setting | optimizer | runs |")
    assert "| topk | sgd | 2 | 0.7500 ± 0.0100 | +5.00 |" in "\n".join(lines)


def test_start_up_lines_follow_the_table():
    with_startup = summary(0.80, 1000)
    with_startup.update({"startup_sent_bytes": 13_000_000,
                         "startup_received_bytes": 40_000,
                         "startup_seconds": 2.5})
    other = dict(with_startup, startup_sent_bytes=1_000_000,
                 startup_seconds=0.5)
    runs = [report.Run("one-copy", with_startup),
            report.Run("one-copy", other),
            report.Run("older", summary(0.80, 1000))]
    lines = report.markdown_table(report.make_rows(runs))
    assert lines[-3:] == [
        "Start-up before step 0 (Init and the first pull; means):", "",
        "- one-copy: 7.00 MB sent, 0.04 MB received, 1.5 s"]
    # Summaries without start-up figures add nothing.
    plain = report.markdown_table(report.make_rows(runs[2:]))
    assert not any("Start-up" in line for line in plain)
