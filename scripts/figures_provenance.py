"""What each benchmark data file records of where it came from.

A data file of docs/benchmarks/data/ may record, anywhere in its JSON, the
commit that was measured ("commit"), whether the tree was dirty ("dirty"),
the date ("date"), the machine ("machine" or "host": an object with "cpu",
"cores" or "hardware_threads", "memory_mb") and the command ("command").
bench/models/models.py writes them at the top and in each run's "sitting",
bench/large/large.py in each sitting's "provenance", bench/auto/auto.sh at
the top (no commit), the C++ benchmarks a "host" without date, commit or
command; the oldest files record nothing.

A "provenance" object with "reconstructed": true is not a record of the
measurement: reconstruct() writes it from git into a file that records no
commit, with the commit that gave the file its content and that commit's
date. The build measured is that commit's or an earlier one, possibly a
dirty tree; the machine, the dirty flag and the command stay unknown
(null).

figures.py --provenance prints audit(); figures.py --reconstruct runs
reconstruct().
"""

import json
import os
import re
import subprocess

FIELDS = ("commit", "dirty", "date", "machine", "command")
DATA = os.path.join("docs", "benchmarks", "data")
OLD = os.path.join(DATA, "old")


def cpu_name(cpu):
    """'Intel(R) Xeon(R) Processor' -> 'Intel Xeon'."""
    name = re.sub(r"\((R|TM)\)|\bProcessor\b|\bCPU\b", " ", cpu)
    return " ".join(name.split())


def _walk(node):
    """Every object in a JSON document, outermost first."""
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from _walk(value)
    elif isinstance(node, list):
        for value in node:
            yield from _walk(value)


def _machine(found):
    """(cpu, cores, memory_mb) of a "machine" or "host" object; None for
    what it does not say."""
    return (found.get("cpu"), found.get("cores",
                                        found.get("hardware_threads")),
            found.get("memory_mb"))


def recorded(document):
    """{"recorded": {field: [values]}, "reconstructed": {field: [values]}}
    over every object of a data file; machines as (cpu, cores, memory_mb)
    tuples."""
    result = {kind: {field: [] for field in FIELDS}
              for kind in ("recorded", "reconstructed")}
    for node in _walk(document):
        kind = ("reconstructed" if node.get("reconstructed") is True
                else "recorded")
        for field in ("commit", "dirty", "date", "command"):
            value = node.get(field)
            if value is not None and not isinstance(value, (dict, list)):
                result[kind][field].append(value)
        for key in ("machine", "host"):
            found = node.get(key)
            if isinstance(found, dict) and "cpu" in found:
                result[kind]["machine"].append(_machine(found))
    return result


def machines(document, memory=False):
    """The distinct machines a data file records, as 'N-core CPU' (with
    ', M GiB' where MEMORY and recorded), sorted."""
    names = set()
    for cpu, cores, megabytes in recorded(document)["recorded"]["machine"]:
        name = f"{cores}-core {cpu_name(cpu)}" if cores else cpu_name(cpu)
        if memory and megabytes:
            name += f", {megabytes / 1024:.0f} GiB"
        names.add(name)
    return sorted(names)


def commits(document):
    """(recorded commits, reconstructed commits), each distinct, in the
    order met and abbreviated to 8 characters, and how many distinct
    sittings (commit and date) were measured from a dirty tree."""
    seen = {"recorded": {}, "reconstructed": {}}
    dirty = set()
    for node in _walk(document):
        commit = node.get("commit")
        if not isinstance(commit, str):
            continue
        kind = ("reconstructed" if node.get("reconstructed") is True
                else "recorded")
        seen[kind][commit[:8]] = True
        if node.get("dirty") is True:
            dirty.add((commit, node.get("date")))
    return list(seen["recorded"]), list(seen["reconstructed"]), len(dirty)


def _status(found, field):
    if found["recorded"][field]:
        if field != "machine":
            return "yes"
        complete = all(cores and memory for _, cores, memory
                       in found["recorded"]["machine"])
        return "yes" if complete else "cpu"
    return "rec" if found["reconstructed"][field] else "no"


def data_files(root, folder):
    path = os.path.join(root, folder)
    if not os.path.isdir(path):
        return []
    return sorted(os.path.join(folder, name) for name in os.listdir(path)
                  if name.endswith(".json"))


def audit(root):
    """The table figures.py --provenance prints: one line per data file of
    docs/benchmarks/data/ and data/old/, and a count per folder."""
    legend = ("yes: recorded; cpu: the CPU and cores, not the memory; "
              "rec: reconstructed from git (not a record); no: absent")
    lines = [legend, ""]
    header = f"{'file':<58} " + " ".join(f"{f:<8}" for f in FIELDS)
    for folder in (DATA, OLD):
        files = data_files(root, folder)
        if not files:
            continue
        lines += [f"{folder}/ ({len(files)} files)", header]
        with_commit = 0
        for path in files:
            with open(os.path.join(root, path)) as f:
                found = recorded(json.load(f))
            with_commit += bool(found["recorded"]["commit"])
            lines.append(f"{os.path.basename(path):<58} " + " ".join(
                f"{_status(found, field):<8}" for field in FIELDS))
        lines += [f"{with_commit} of {len(files)} record the commit "
                  "they measured", ""]
    return "\n".join(lines)


def _introduced(root, path):
    """(commit, ISO date) of the commit that gave PATH its content: the
    newest that added, changed or copied it, past commits that only moved
    it. (The commit that first added a file can be older than its data: a
    later run may have rewritten it.)"""
    out = subprocess.run(
        ["git", "-C", root, "log", "--follow", "--name-status",
         "--format=commit %H %cI", "--", path],
        capture_output=True, text=True, check=True).stdout
    commit = None
    for line in out.splitlines():
        if line.startswith("commit "):
            commit = line.split()[1:3]
        elif line.strip() and commit and line.split()[0] != "R100":
            return tuple(commit)
    raise SystemExit(f"figures.py: {path}: not in git's history")


def _insert_first(text, key, value):
    """TEXT (a JSON object) with "KEY": VALUE as its first member, the
    rest of the text unchanged, in the indentation the file uses."""
    start = text.index("{") + 1
    member = f"{json.dumps(key)}: {json.dumps(value)},"
    match = re.match(r"\n([ \t]*)", text[start:])
    if match:
        return text[:start] + "\n" + match.group(1) + member + text[start:]
    return text[:start] + member + " " + text[start:].lstrip()


def reconstruct(root):
    """Adds a reconstructed "provenance" object to every file of
    docs/benchmarks/data/ (not old/) that records no commit and has none
    yet. Returns the paths changed."""
    changed = []
    for path in data_files(root, DATA):
        full = os.path.join(root, path)
        with open(full) as f:
            text = f.read()
        document = json.loads(text)
        found = recorded(document)
        if not isinstance(document, dict) or "provenance" in document \
                or found["recorded"]["commit"]:
            continue
        commit, date = _introduced(root, path)
        provenance = {
            "reconstructed": True, "commit": commit, "date": date,
            "dirty": None, "machine": None, "command": None,
            "how": "not recorded by the run: the commit that gave this "
                   "file its content (the newest that added, changed or "
                   "copied it, past moves; git log --follow) and its date; "
                   "the build measured is that commit's or an earlier one; "
                   "machine, dirty flag and command unknown"}
        new = _insert_first(text, "provenance", provenance)
        if json.loads(new) != dict(provenance=provenance, **document):
            raise SystemExit(f"figures.py: {path}: could not add the "
                             "provenance without changing the data")
        with open(full, "w") as f:
            f.write(new)
        changed.append(path)
    return changed
