"""scripts/figures.py on a copy of the two READMEs and the benchmark data:
--check passes on the copy as committed and fails, naming the figure, the
file's text and the computed text, when one figure is edited; --write puts
it back. Nothing here needs a build."""

import json
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "figures.py"
DOCS = ("README.md", "docs/benchmarks/README.md")
MARKER = re.compile(r"<!-- fig:(\w+) -->(.*?)<!-- /fig -->")

sys.path.insert(0, str(ROOT / "scripts"))
from figures_provenance import _insert_first  # noqa: E402


@pytest.fixture
def copy(tmp_path):
    """The two READMEs and the data folders, where figures.py --root
    reads them."""
    for doc in DOCS:
        (tmp_path / doc).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / doc, tmp_path / doc)
    shutil.copytree(ROOT / "docs" / "benchmarks" / "data",
                    tmp_path / "docs" / "benchmarks" / "data")
    return tmp_path


def figures(root, *flags):
    return subprocess.run([sys.executable, str(SCRIPT), "--root", str(root),
                           *flags], capture_output=True, text=True,
                          timeout=60)


def edit_first_figure(path):
    """Changes the text of the first figure in PATH; returns its id, the
    text it had and the text it has now."""
    text = path.read_text(encoding="utf-8")
    match = MARKER.search(text)
    assert match, f"{path}: no figure"
    name, old = match.groups()
    new = "9" + old
    path.write_text(text[:match.start(2)] + new + text[match.end(2):],
                    encoding="utf-8")
    return name, old, new


def test_check_passes_on_the_committed_text(copy):
    result = figures(copy, "--check")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 problems" in result.stdout


@pytest.mark.parametrize("doc", DOCS)
def test_check_names_an_edited_figure(copy, doc):
    name, old, new = edit_first_figure(copy / doc)
    result = figures(copy, "--check")
    assert result.returncode == 1, result.stdout + result.stderr
    assert f"{doc}:" in result.stdout
    assert f"figure {name}: the file says '{new}', the data give " \
        f"'{old}'" in result.stdout
    # make figures puts the computed text back.
    assert figures(copy, "--write").returncode == 0
    assert figures(copy, "--check").returncode == 0


def test_check_fails_when_the_data_change(copy):
    path = copy / "docs/benchmarks/data/load-asp-since-44-new-1.json"
    document = json.loads(path.read_text())
    document["runs"][0]["errors"] = 3
    path.write_text(json.dumps(document))
    result = figures(copy, "--check")
    assert result.returncode == 1
    assert "figure load_asp_errors: the file says '0 errors', the data " \
        "give '3 errors'" in result.stdout


def test_check_fails_on_a_missing_data_file(copy):
    (copy / "docs/benchmarks/data/compress.json").unlink()
    result = figures(copy, "--check")
    assert result.returncode == 1
    assert "compress.json" in result.stderr
    assert "figure " in result.stderr


def test_check_fails_on_a_marker_that_begins_a_line_or_is_unknown(copy):
    readme = copy / "README.md"
    readme.write_text(readme.read_text(encoding="utf-8") +
                      "\n<!-- fig:resnet_gap -->2.3 points<!-- /fig -->\n"
                      "see <!-- fig:no_such -->1<!-- /fig -->\n",
                      encoding="utf-8")
    result = figures(copy, "--check")
    assert result.returncode == 1
    assert "a figure's marker begins the line" in result.stdout
    assert "figure no_such: no such figure" in result.stdout


def test_check_docs_runs_the_check():
    script = (ROOT / "scripts" / "check-docs.sh").read_text()
    assert '"$PYTHON" scripts/figures.py --check' in script


@pytest.mark.parametrize("text", [
    '{\n "a": 1,\n "b": [1, 2]\n}\n',
    '{\n  "a": {\n    "c": null\n  }\n}\n',
    '{"a": 1, "b": "x"}',
])
def test_reconstructed_provenance_leaves_the_data_as_they_were(text):
    added = _insert_first(text, "provenance", {"reconstructed": True})
    document = json.loads(added)
    assert list(document)[0] == "provenance"
    assert document == dict(provenance={"reconstructed": True},
                            **json.loads(text))
    # Only the new member was added: the rest is the same text.
    member = re.escape('"provenance": {"reconstructed": true},')
    assert re.sub(r"\n?[ \t]*" + member + " ?", "", added, count=1) == text
