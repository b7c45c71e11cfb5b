#!/usr/bin/python3
"""Where a training process' resident memory is at its peak: runs a script
as __main__ (as `python3 SCRIPT` would) while a thread reads
/proc/self/smaps every --every seconds, and keeps the reading whose total
resident set was the largest, split by what the memory maps:

    rss_parts.py --out=parts-{rank}.json SCRIPT [SCRIPT FLAGS]

Parts: "heap" (malloc's main arena), "anonymous" (other unnamed private
memory: malloc's other arenas, large allocations, thread stacks, torch's
tensors above the mmap threshold), "stacks", and file-backed mappings
grouped by file: torch's libraries, gradwire's module, gRPC/protobuf/
Abseil, Python and its extensions, other libraries. {rank} in --out is
replaced by RANK. Used to attribute the difference between a DDP
process' peak and a gradwire worker's (docs/python.md, worker memory).
Exit code: the script's; 2 for a bad command line.
"""

import json
import os
import re
import runpy
import sys
import threading

GROUPS = (
    ("gradwire", re.compile(r"gradwire")),
    ("torch libraries", re.compile(r"/(libtorch|libc10|libcaffe2|libgloo|"
                                   r"libdnnl|libmkl|libopenblas|libblas|"
                                   r"liblapack|libgomp|libsleef|"
                                   r"libprotobuf-lite)")),
    ("grpc, protobuf, abseil", re.compile(r"/(libgrpc|libgpr|libprotobuf|"
                                          r"libabsl|libupb|libaddress_sorting|"
                                          r"libre2|libcares|libssl|"
                                          r"libcrypto)")),
    ("python and extensions", re.compile(r"(python3|\.cpython-|/dist-packages/"
                                         r"|/lib-dynload/)")),
)


def group_of(name):
    """The part a mapping's resident pages count in."""
    if name == "[heap]":
        return "heap"
    if name.startswith("[stack"):
        return "stacks"
    if not name or name.startswith("["):
        return "anonymous"
    for group, pattern in GROUPS:
        if pattern.search(name):
            return group
    return "other files"


def read_parts():
    """{part: resident kB} of this process now."""
    parts = {}
    name = ""
    with open("/proc/self/smaps") as smaps:
        for line in smaps:
            fields = line.split()
            if not fields:
                continue
            if not fields[0].endswith(":") or "-" in fields[0]:
                # A mapping's header: address perms offset dev inode [name]
                name = fields[5] if len(fields) > 5 else ""
            elif fields[0] == "Rss:":
                part = group_of(name)
                parts[part] = parts.get(part, 0) + int(fields[1])
    return parts


class PeakKeeper:
    """Reads the parts every `every` seconds; keeps the largest total."""

    def __init__(self, every):
        self.every = every
        self.peak = {}
        self.readings = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.wait(self.every):
            self.sample()

    def sample(self):
        parts = read_parts()
        self.readings += 1
        if sum(parts.values()) > sum(self.peak.values()):
            self.peak = parts

    def start(self):
        self._thread.start()

    def stop(self):
        self._stop.set()
        self._thread.join()
        self.sample()


def main(argv):
    out, every = None, 0.25
    while argv and argv[0].startswith("--"):
        key, _, value = argv.pop(0).partition("=")
        if key == "--out":
            out = value
        elif key == "--every":
            every = float(value)
        else:
            print(f"rss_parts.py: unknown flag {key}\n{__doc__}",
                  file=sys.stderr)
            return 2
    if not out or not argv:
        print(__doc__, file=sys.stderr)
        return 2
    keeper = PeakKeeper(every)
    keeper.start()
    sys.argv = argv
    sys.path.insert(0, os.path.dirname(os.path.abspath(argv[0])))
    code = 0
    try:
        runpy.run_path(argv[0], run_name="__main__")
    except SystemExit as exit_:
        # sys.exit() and sys.exit(None) are success, a message failure.
        code = exit_.code if isinstance(exit_.code, int) else (
            0 if exit_.code is None else 1)
        if code and not isinstance(exit_.code, int):
            print(exit_.code, file=sys.stderr)
    keeper.stop()
    peak = {part: round(kb / 1024, 1)
            for part, kb in sorted(keeper.peak.items())}
    with open(out.replace("{rank}", os.environ.get("RANK", "0")), "w") as f:
        json.dump({"script": argv, "readings": keeper.readings,
                   "peak_total_mb": round(sum(peak.values()), 1),
                   "peak_parts_mb": peak}, f, indent=1)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
