#!/usr/bin/env bash
# make lint: clang's static checks over every C++ source, then a
# clang-format check of every C++ and proto file.
#
# 1. Configures a clang build in $LINT_BUILD (default build-lint) only for
#    its compile database, and generates the protobuf headers.
# 2. Runs `clang++ -fsyntax-only` on every project source in that
#    database, with the project's warnings as errors (-Werror, which takes
#    in -Wthread-safety: every ABSL_GUARDED_BY is checked). The analyses run
#    in clang's front end, so nothing is compiled to code.
# 3. `clang-format --dry-run --Werror` (Google style, .clang-format).
#
# Exit 0 when both are clean; 1 with the diagnostics otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."

build=${LINT_BUILD:-build-lint}
jobs=${JOBS:-$(nproc)}
python=/usr/bin/python3

mkdir -p "$build"
CC=clang CXX=clang++ cmake -S . -B "$build" -G Ninja \
  -DCMAKE_EXPORT_COMPILE_COMMANDS=ON -DGRADWIRE_CUDA=OFF \
  -DGRADWIRE_BUILD_FUZZERS=OFF >"$build/lint-configure.log" 2>&1 ||
  { cat "$build/lint-configure.log"; exit 1; }
# The generated protobuf headers that every source includes.
cmake --build "$build" --target gradwire_proto >/dev/null

commands=$(mktemp)
trap 'rm -f "$commands"' EXIT
# One syntax-only command per project source (generated code excluded).
"$python" - "$build/compile_commands.json" "$PWD" >"$commands" <<'PY'
import json, shlex, sys
database, root = sys.argv[1], sys.argv[2] + "/"
for entry in json.load(open(database)):
    source = entry["file"]
    if not source.startswith(root) or "/build" in source[len(root) - 1:]:
        continue
    if not source.endswith(".cc"):
        continue
    args = shlex.split(entry["command"])
    kept, skip = [], False
    for arg in args:
        if skip:
            skip = False
            continue
        if arg in ("-o", "-c"):
            skip = arg == "-o"
            continue
        kept.append(arg)
    kept[-1:] = ["-fsyntax-only", "-Werror", "-Wthread-safety", source]
    print("cd %s && %s" % (shlex.quote(entry["directory"]),
                           " ".join(shlex.quote(a) for a in kept)))
PY
total=$(wc -l <"$commands")
echo "lint: clang -fsyntax-only -Werror -Wthread-safety on $total sources ($jobs at a time)"
failed=0
tr '\n' '\0' <"$commands" |
  xargs -0 -P "$jobs" -I{} bash -c '{}' || failed=1

echo "lint: clang-format --dry-run --Werror"
# Tracked and new files, as they are in the working tree.
git ls-files --cached --others --exclude-standard \
  '*.cc' '*.h' '*.cu' '*.cuh' '*.proto' |
  while read -r file; do [[ -f "$file" ]] && echo "$file"; done |
  xargs clang-format --dry-run --Werror || failed=1

if [[ $failed -ne 0 ]]; then
  echo "lint: FAILED" >&2
  exit 1
fi
echo "lint: clean"
