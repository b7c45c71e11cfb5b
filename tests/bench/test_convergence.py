"""bench/convergence/convergence.py without training: its argument checks,
--dry-run, and whole runs against a fake `gradwire` (testdata/fake-gradwire) that
writes a summary at once: the files it writes, the table, --resume, and a
failing run."""

import json
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench" / "convergence" / "convergence.py"
WRAPPER = ROOT / "bench" / "convergence" / "convergence.sh"
FAKE = pathlib.Path(__file__).resolve().parent / "testdata" / "fake-gradwire"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def run_bench(*args, env=None):
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, args)],
                          capture_output=True, text=True, timeout=60,
                          env=env)


@pytest.fixture
def fake_bin(tmp_path):
    """A bin directory whose `gradwire` is the fake; it appends each
    command line to calls.txt beside it."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shutil.copy(FAKE, bin_dir / "gradwire")
    return bin_dir


def calls(bin_dir):
    path = bin_dir / "calls.txt"
    return path.read_text().splitlines() if path.exists() else []


@pytest.mark.parametrize("args, message", [
    (["--seeds=x"], "argument --seeds: 'x' is not a comma-separated list"),
    (["--seeds=1,,2"], "argument --seeds"),
    (["--seeds=2,2"], "repeats a seed"),
    (["--epochs=0"], "argument --epochs: '0' is not a positive integer"),
    (["--workers=two"], "argument --workers"),
    (["--model=resnet"], "argument --model"),
    (["--only=topk1,nope"], "unknown row nope"),
    (["--optimizers=lamb"], "unknown optimizer lamb"),
    (["--jobs=2"], "unrecognized arguments: --jobs=2"),
])
def test_bad_arguments_are_rejected(tmp_path, args, message):
    result = run_bench("--dry-run", f"--out={tmp_path}", *args)
    assert result.returncode == 2, result.stdout
    assert message in result.stderr
    assert "(see convergence.py --help)" in result.stderr
    assert not (tmp_path / "convergence-runs").exists()


def test_dry_run_lists_every_run_in_order(tmp_path):
    result = run_bench("--dry-run", f"--out={tmp_path}", "--bin=/opt/gw/bin",
                       "--only=topk1,dense", "--seeds=1,2", "--epochs=1",
                       "--", "--max-steps=3")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[-1] == f"8 runs; results in {tmp_path}/convergence.*"
    commands = [line.split() for line in lines[:-1]]
    runs = tmp_path / "convergence-runs"
    assert [c[-2] for c in commands] == [
        f"--summary-json={runs}/{name}.json" for name in (
            "dense-momentum-s1", "dense-momentum-s2", "topk1-momentum-s1",
            "topk1-momentum-s2", "dense-sgd-s1", "dense-sgd-s2",
            "topk1-sgd-s1", "topk1-sgd-s2")]
    first = commands[0]
    assert first[:9] == ["/opt/gw/bin/gradwire", "local", "--shards=2",
                         "--workers=2", "--model=mlp", "--epochs=1",
                         "--seed=1", "--progress=none", "--compressor=none"]
    assert "--value-type=fp32" in first
    assert all(c[-1] == "--max-steps=3" for c in commands)
    assert not any(a.startswith("--optimizer") for a in first)
    assert not any(a.startswith("--pull") for c in commands for a in c)
    sgd = commands[-1]
    assert ["--optimizer=sgd", "--lr=0.5"] == sgd[-4:-2]
    assert "--ratio=0.01" in sgd and "--compressor=topk" in sgd


def test_cnn_sgd_rows_run_at_their_own_lr(tmp_path):
    # lr 0.5, the MLP's SGD step, diverges on the CNN even dense.
    result = run_bench("--dry-run", f"--out={tmp_path}", "--model=cnn",
                       "--only=dense", "--seeds=1", "--optimizers=sgd")
    assert result.returncode == 0, result.stderr
    command = result.stdout.splitlines()[0].split()
    assert "--model=cnn" in command
    assert ["--optimizer=sgd", "--lr=0.1"] == command[-3:-1]


def test_adam_rows_only_when_asked_for(tmp_path):
    result = run_bench("--dry-run", f"--out={tmp_path}", "--only=topk1",
                       "--seeds=1", "--optimizers=adam")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[-1].startswith("1 runs")
    assert ["--optimizer=adam", "--lr=0.001"] == lines[0].split()[-3:-1]
    default = run_bench("--dry-run", f"--out={tmp_path}", "--seeds=1")
    assert "--optimizer=adam" not in default.stdout


def test_default_plan_and_wrapper(tmp_path):
    env = dict(os.environ, BUILD="/somewhere")
    result = subprocess.run([str(WRAPPER), "--list", f"--out={tmp_path}"],
                            capture_output=True, text=True, timeout=60,
                            env=env)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    # 6 rows x 2 optimizers x 3 seeds, 10 epochs, binaries from $BUILD/bin.
    assert len(lines) == 37
    assert all(line.startswith("/somewhere/bin/gradwire local ")
               for line in lines[:-1])
    assert all("--epochs=10" in line for line in lines[:-1])
    for flags in ("--compressor=fp16", "--compressor=dgc --ratio=0.001",
                  "--compressor=qsgd --levels=256", "--compressor=onebit"):
        assert sum(flags in line for line in lines) == 6, flags


def test_missing_binary(tmp_path):
    result = run_bench(f"--out={tmp_path}", f"--bin={tmp_path}/nowhere")
    assert result.returncode == 1
    assert f"{tmp_path}/nowhere/gradwire is missing" in result.stderr


def test_whole_run_with_a_fake_gradwire(tmp_path, fake_bin):
    out = tmp_path / "out"
    result = run_bench(f"--out={out}", f"--bin={fake_bin}",
                       "--only=dense,topk1", "--seeds=1,2", "--epochs=2")
    assert result.returncode == 0, result.stderr
    assert len(calls(fake_bin)) == 8
    assert "[8/8] topk1 sgd seed 2: accuracy 0.8" in result.stdout

    data = json.loads((out / "convergence.json").read_text())
    assert (data["model"], data["epochs"], data["seeds"]) == ("mlp", 2, [1, 2])
    assert len(data["runs"]) == 8
    run = data["runs"][0]
    assert (run["row"], run["optimizer"], run["seed"]) == ("dense",
                                                           "momentum", 1)
    assert run["epoch_test_accuracy"] and run["epoch_loss"]
    assert run["summary"] == "convergence-runs/dense-momentum-s1.json"
    assert {"test_accuracy", "pushed_bytes", "pulled_bytes", "wall_seconds",
            "dense_equivalent_bytes"} <= set(run)
    rows = {(r["row"], r["optimizer"]): r for r in data["rows"]}
    assert len(rows) == 4
    # The fake: accuracy 0.8 + seed / 100 (+ 0.05 with sgd), pushed bytes
    # 400 MB dense, 4 MB Top-K; pulled 20 MB.
    topk = rows[("topk1", "sgd")]
    assert topk["accuracy_mean"] == pytest.approx(0.865)
    assert topk["accuracy_half_range"] == pytest.approx(0.005)
    assert topk["points_vs_baseline"] == pytest.approx(0.0)
    assert topk["pushed_reduction"] == pytest.approx(100)
    assert topk["total_reduction"] == pytest.approx(420 / 24)

    md = (out / "convergence.md").read_text()
    assert md.startswith("mlp, 2 epoch(s), 2 workers, 2 shards, seeds 1,2")
    assert ("| Top-K 1% + EF | sgd | 2 | 0.8650 ± 0.0050 | +0.00 | 4.0 | "
            "20.0 | 17.5× | 100.0× |") in md
    assert "| dense fp32 | momentum | 2 | 0.8150 ± 0.0050 | +0.00 |" in md
    assert md in result.stdout
    for name in ("convergence-accuracy.png", "convergence-bytes.png"):
        data = (out / name).read_bytes()
        assert data[:8] == PNG_SIGNATURE and len(data) > 10_000
    runs = out / "convergence-runs"
    assert (runs / "topk1-sgd-s2.log").read_text().startswith("fake gradwire")
    assert (runs / "topk1-sgd-s2.json").is_file()

    # --resume keeps all eight; a changed command line reruns.
    result = run_bench(f"--out={out}", f"--bin={fake_bin}",
                       "--only=dense,topk1", "--seeds=1,2", "--epochs=2",
                       "--resume")
    assert result.returncode == 0, result.stderr
    assert len(calls(fake_bin)) == 8
    assert "kept" in result.stdout
    result = run_bench(f"--out={out}", f"--bin={fake_bin}", "--only=dense",
                       "--seeds=1", "--epochs=3", "--resume")
    assert result.returncode == 0, result.stderr
    assert len(calls(fake_bin)) == 10
    # Without --resume the runs are cleared first.
    result = run_bench(f"--out={out}", f"--bin={fake_bin}", "--only=dense",
                       "--seeds=1", "--optimizers=sgd")
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in runs.iterdir()) == [
        "dense-sgd-s1.args", "dense-sgd-s1.json", "dense-sgd-s1.log"]


def test_failing_run_stops_with_its_log(tmp_path, fake_bin):
    result = run_bench(f"--out={tmp_path}", f"--bin={fake_bin}",
                       "--only=dense,topk1", "--seeds=1", "--", "--fail=topk")
    assert result.returncode == 1
    assert "[2/4] topk1 momentum seed 1 failed (exit code 3)" in result.stderr
    assert "fake gradwire: failing as asked" in result.stderr
    assert len(calls(fake_bin)) == 2
    assert not (tmp_path / "convergence.md").exists()


def test_merge_puts_earlier_runs_into_one_table(tmp_path, fake_bin):
    first, second, merged = (tmp_path / n for n in ("s1", "s2", "merged"))
    for out, seeds in ((first, "1,2"), (second, "2,3")):
        result = run_bench(f"--out={out}", f"--bin={fake_bin}",
                           "--only=dense,topk1", f"--seeds={seeds}",
                           "--optimizers=sgd", "--epochs=2")
        assert result.returncode == 0, result.stderr
    trains = len(calls(fake_bin))
    result = run_bench("--merge", first / "convergence.json",
                       second / "convergence.json", f"--out={merged}")
    assert result.returncode == 0, result.stderr
    assert len(calls(fake_bin)) == trains  # nothing trained
    # Seed 2 of each row is in both files: the second one's is kept.
    assert (f"topk1 sgd seed 2: taken from {second / 'convergence.json'}"
            in result.stderr)
    data = json.loads((merged / "convergence.json").read_text())
    assert data["seeds"] == [1, 2, 3]
    assert [(r["row"], r["seed"]) for r in data["runs"]] == [
        ("dense", 1), ("dense", 2), ("dense", 3), ("topk1", 1),
        ("topk1", 2), ("topk1", 3)]
    assert data["runs"][1]["merged_from"] == str(second / "convergence.json")
    md = (merged / "convergence.md").read_text()
    assert "seeds 1,2,3" in md and "merged from convergence.json" in md
    # The fake: accuracy 0.8 + seed / 100 + 0.05 with sgd.
    assert "| Top-K 1% + EF | sgd | 3 | 0.8700 ± 0.0100 | +0.00 |" in md
    for name in ("convergence-accuracy.png", "convergence-bytes.png"):
        assert (merged / name).read_bytes()[:8] == PNG_SIGNATURE

    # Files that disagree, or are not convergence results, are refused.
    result = run_bench(f"--out={tmp_path / 'e3'}", f"--bin={fake_bin}",
                       "--only=dense", "--seeds=1", "--epochs=3")
    assert result.returncode == 0, result.stderr
    result = run_bench("--merge", first / "convergence.json",
                       tmp_path / "e3" / "convergence.json",
                       f"--out={tmp_path / 'bad'}")
    assert result.returncode == 1
    assert "epochs 3 differs from" in result.stderr
    (tmp_path / "junk.json").write_text("[1, 2]")
    result = run_bench("--merge", tmp_path / "junk.json",
                       f"--out={tmp_path / 'bad'}")
    assert result.returncode == 1
    assert "junk.json: not a convergence.json" in result.stderr
