#!/usr/bin/python3
"""The figures of README.md and docs/benchmarks/README.md, computed from the
benchmark data files they name.

  figures.py                 print every figure, its data files, and the
                             commits and machines those files record
  figures.py --write         rewrite the figures in the two files
                             (make figures)
  figures.py --check         exit 1 when a figure in the two files differs
                             from what the data give (make check-docs)
  figures.py --provenance    what each file of docs/benchmarks/data/ (and
                             data/old/) records: commit, dirty flag, date,
                             machine, command
  figures.py --reconstruct   add a "provenance" object marked
                             "reconstructed" (the commit that gave the
                             file its content, and its date) to each file
                             of docs/benchmarks/data/ that records no
                             commit
  --root DIR                 the repository to read (default: this
                             script's)

In the Markdown a figure is its text between two HTML comments, which
GitHub does not show:

    **<!-- fig:resnet_bytes_ratio -->51×<!-- /fig --> fewer bytes**

The id names an entry of figures_table.py: its data files and the function
that computes the text. The text stays on one line, and a marker never
begins a line (a line that starts with "<!--" is an HTML block to
Markdown, shown as it is). --check names the file, the line, the figure,
the text and the computed text of each difference; it also fails on a
marker that names no figure, is not closed or begins a line, and on a
figure of the table that neither file shows.

Exit codes: 0; 1 when --check finds a problem, or a data file is missing or
lacks what a figure reads (the message names the figure); 2 for a bad
command line.
"""

import argparse
import json
import os
import re
import sys

from figures_provenance import audit, commits, machines, reconstruct
from figures_table import FIGURES

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = ("README.md", os.path.join("docs", "benchmarks", "README.md"))
MARKER = re.compile(r"<!-- fig:([A-Za-z0-9_]+) -->(.*?)<!-- /fig -->")
OPENING = re.compile(r"<!-- fig:")


class FigureError(Exception):
    pass


def parse_args():
    p = argparse.ArgumentParser(
        description="The figures of README.md and docs/benchmarks/README.md, "
                    "computed from the benchmark data.")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true",
                      help="rewrite the figures in the two files")
    mode.add_argument("--check", action="store_true",
                      help="exit 1 when a figure differs from the data")
    mode.add_argument("--provenance", action="store_true",
                      help="what each data file records of its origin")
    mode.add_argument("--reconstruct", action="store_true",
                      help="add reconstructed provenance from git")
    p.add_argument("--root", default=ROOT, help="the repository to read")
    return p.parse_args()


def compute(root):
    """{figure id: text} of every figure of the table, and the JSON of the
    data files read, by path."""
    documents = {}
    texts = {}
    for name, (sources, function) in FIGURES.items():
        try:
            for path in sources:
                if path not in documents:
                    with open(os.path.join(root, path)) as f:
                        documents[path] = json.load(f)
            texts[name] = function(*(documents[p] for p in sources))
        except (OSError, ValueError, LookupError, TypeError,
                ArithmeticError) as error:
            raise FigureError(f"figure {name} ({', '.join(sources)}): "
                              f"{error!r}") from error
    return texts, documents


def markers(line):
    """(figure id, text) of each marked figure of a line of Markdown, and
    a problem with the line's markers or None."""
    found = [m.groups() for m in MARKER.finditer(line)]
    if len(OPENING.findall(line)) != len(found):
        return found, "a figure's marker is not closed on its line"
    if found and line.lstrip().startswith("<!--"):
        return found, "a figure's marker begins the line"
    return found, None


def check(root, texts):
    """One line per problem in the two files; empty when every figure is
    what the data give."""
    problems = []
    shown = set()
    for doc in DOCS:
        with open(os.path.join(root, doc), encoding="utf-8") as f:
            lines = f.read().split("\n")
        for number, line in enumerate(lines, 1):
            found, problem = markers(line)
            if problem:
                problems.append(f"{doc}:{number}: {problem}")
            for name, text in found:
                shown.add(name)
                if name not in texts:
                    problems.append(f"{doc}:{number}: figure {name}: no such "
                                    "figure in scripts/figures_table.py")
                elif text != texts[name]:
                    sources = ", ".join(FIGURES[name][0])
                    problems.append(
                        f"{doc}:{number}: figure {name}: the file says "
                        f"'{text}', the data give '{texts[name]}' "
                        f"({sources}; make figures rewrites it)")
    for name in texts:
        if name not in shown:
            problems.append(f"figure {name}: in the table, in neither "
                            f"{' nor '.join(DOCS)}")
    return problems


def write(root, texts):
    """Rewrites every known figure of the two files; returns the files
    changed."""
    changed = []
    for doc in DOCS:
        path = os.path.join(root, doc)
        with open(path, encoding="utf-8") as f:
            old = f.read()

        def computed(match):
            name = match.group(1)
            if name not in texts:
                return match.group(0)
            return f"<!-- fig:{name} -->{texts[name]}<!-- /fig -->"
        new = MARKER.sub(computed, old)
        if new != old:
            with open(path, "w", encoding="utf-8") as f:
                f.write(new)
            changed.append(doc)
    return changed


def describe(texts, documents):
    """Every figure, its text, and per data file the commits and machines
    it records."""
    lines = []
    for name, text in texts.items():
        lines.append(f"{name}: {text}")
        for path in FIGURES[name][0]:
            recorded, rebuilt, dirty = commits(documents[path])
            if recorded:
                origin = f"commit {', '.join(recorded)}" + (
                    f" ({dirty} dirty sittings)" if dirty else "")
            elif rebuilt:
                origin = (f"no commit recorded; content from {rebuilt[0]} "
                          "(reconstructed)")
            else:
                origin = "no commit recorded"
            where = (", ".join(machines(documents[path], memory=True))
                     or "machine unknown")
            lines.append(f"    {path}: {origin}; {where}")
    return "\n".join(lines)


def main():
    args = parse_args()
    root = os.path.abspath(args.root)
    if args.provenance:
        print(audit(root))
        return 0
    if args.reconstruct:
        for path in reconstruct(root):
            print(f"figures.py: reconstructed provenance added to {path}")
        return 0
    try:
        texts, documents = compute(root)
    except FigureError as error:
        print(f"figures.py: {error}", file=sys.stderr)
        return 1
    if args.check:
        problems = check(root, texts)
        for problem in problems:
            print(problem)
        print(f"figures: {len(texts)} figures, {len(problems)} problems")
        return 1 if problems else 0
    if args.write:
        for doc in write(root, texts):
            print(f"figures.py: rewrote the figures of {doc}")
        return 0
    print(describe(texts, documents))
    return 0


if __name__ == "__main__":
    sys.exit(main())
