"""`gradwire report` end to end through the CLI binary ($GRADWIRE_CLI_BIN,
else build/bin/gradwire): help, a report from hand-written summaries
(tests/bench/testdata), its errors, and where it finds
scripts/gradwire_report.py (cli/report_command.h)."""

import os
import pathlib
import shutil
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "bench" / "testdata"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def cli_binary():
    path = os.environ.get("GRADWIRE_CLI_BIN",
                          str(ROOT / "build" / "bin" / "gradwire"))
    if not os.access(path, os.X_OK):
        pytest.fail(f"gradwire not found at {path} (build first, or set "
                    "GRADWIRE_CLI_BIN)")
    return path


def gradwire(*args, binary=None, env=None, cwd=None):
    return subprocess.run([binary or cli_binary(), *map(str, args)],
                          capture_output=True, text=True, timeout=60,
                          env=env, cwd=cwd)


def test_help():
    result = gradwire("report", "--help")
    assert result.returncode == 0
    assert result.stdout.startswith("gradwire report:")
    for text in ("--label=NAME=FILE", "--out=DIR", "--baseline=LABEL",
                 "NAME-accuracy.png", "$GRADWIRE_PYTHON",
                 "python3-matplotlib"):
        assert text in result.stdout, text
    usage = gradwire("--help")
    assert usage.returncode == 0
    assert "gradwire report [--out=DIR]" in usage.stdout


def test_report_from_summaries(tmp_path):
    result = gradwire("report", f"--out={tmp_path}",
                      f"--label=topk={DATA / 'topk-s1.json'}",
                      f"--label=topk={DATA / 'topk-s2.json'}",
                      DATA / "dense.json", DATA / "no-accuracy.json")
    assert result.returncode == 0, result.stderr
    assert ("| topk | 2 | 0.8450 ± 0.0150 | -0.50 | 4.0 | 20.0 | 20.8× | "
            "100.0× | 100 |") in result.stdout
    assert "| dense | 1 | 0.8500 | +0.00 |" in result.stdout
    assert "| no-accuracy | 1 | — | — | 2.0 | 10.0 |" in result.stdout
    assert (tmp_path / "report.md").is_file()
    for name in ("report-accuracy.png", "report-bytes.png"):
        data = (tmp_path / name).read_bytes()
        assert data[:8] == PNG_SIGNATURE and len(data) > 10_000, name


def test_malformed_summary(tmp_path):
    malformed = DATA / "malformed.json"
    result = gradwire("report", f"--out={tmp_path}", DATA / "dense.json",
                      malformed)
    assert result.returncode == 1
    assert f"gradwire report: {malformed}: not JSON" in result.stderr


def test_usage_error():
    result = gradwire("report")
    assert result.returncode == 2
    assert result.stderr == ("gradwire report: no summary files given (see "
                             "gradwire report --help)\n")


def test_missing_interpreter(tmp_path):
    env = dict(os.environ, GRADWIRE_PYTHON=str(tmp_path / "no-python3"))
    result = gradwire("report", DATA / "dense.json", env=env)
    assert result.returncode == 1
    assert "gradwire report: no Python interpreter" in result.stderr
    assert "no-python3" in result.stderr
    assert "python3-matplotlib" in result.stderr


def test_missing_matplotlib(tmp_path):
    fake = tmp_path / "fake" / "matplotlib"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('hidden')\n")
    env = dict(os.environ, PYTHONPATH=str(fake.parent))
    result = gradwire("report", f"--out={tmp_path}", DATA / "dense.json",
                      env=env)
    assert result.returncode == 1
    assert "gradwire report: matplotlib is missing" in result.stderr
    assert "python3-matplotlib" in result.stderr


STUB = "import sys\nprint('stub {}', *sys.argv[1:])\n"


def copy_binary(bin_dir):
    bin_dir.mkdir(parents=True)
    return shutil.copy(cli_binary(), bin_dir / "gradwire")


def test_script_search_order(tmp_path):
    # 1. PREFIX/share/gradwire/ beside PREFIX/bin/.
    installed = copy_binary(tmp_path / "prefix" / "bin")
    share = tmp_path / "prefix" / "share" / "gradwire"
    share.mkdir(parents=True)
    (share / "gradwire_report.py").write_text(STUB.format("share"))
    result = gradwire("report", "x.json", binary=installed)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "stub share x.json\n"
    # 2. SOURCE/scripts/ for SOURCE/build/bin/gradwire.
    in_tree = copy_binary(tmp_path / "src" / "build" / "bin")
    scripts = tmp_path / "src" / "scripts"
    scripts.mkdir()
    (scripts / "gradwire_report.py").write_text(STUB.format("tree"))
    result = gradwire("report", "y.json", binary=in_tree)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "stub tree y.json\n"
    # 3. The source tree it was built from: the real script.
    elsewhere = copy_binary(tmp_path / "elsewhere" / "bin")
    result = gradwire("report", f"--out={tmp_path}", DATA / "dense.json",
                      binary=elsewhere)
    assert result.returncode == 0, result.stderr
    assert "| dense | 1 | 0.8500 |" in result.stdout
