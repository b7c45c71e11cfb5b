#!/usr/bin/env bash
# make lint: clang's static checks over every C++ source, then a
# clang-format check of every C++ and proto file.
#
#   scripts/lint.sh              every project source
#   scripts/lint.sh FILE.cc ...  only these sources (the format check too;
#                                paths from the repository root)
#
# 1. Configures a clang build in $LINT_BUILD (default build-lint) only for
#    its compile database, and generates the protobuf headers (nothing is
#    compiled).
# 2. One front-end pass per project source in that database, with the
#    project's warnings as errors (-Werror, which takes in -Wthread-safety:
#    every ABSL_GUARDED_BY is checked). Nothing is compiled to code.
#    - Sources outside tests/ go through clang-tidy-14, which reports the
#      compiler's warnings (clang-diagnostic-*) and, in the same pass,
#      readability-function-size: no function body over 60 lines, a lambda
#      counting in the function around it, in the source or in a project
#      header it includes. One pass instead of two keeps the lint's time.
#    - Sources in tests/ go through `clang++ -fsyntax-only`: the same
#      warnings, no size limit. The unit tests of common/, server/,
#      client/ and cli/ are left to `make test-asan`, which compiles them
#      with clang, -Werror and -Wthread-safety in its sanitizer tree (named
#      on the command line, they are checked here too).
# 3. `clang-format --dry-run --Werror` (Google style, .clang-format).
#
# Exit 0 when all are clean; 1 with the diagnostics otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."

build=${LINT_BUILD:-build-lint}
jobs=${JOBS:-$(nproc)}
python=/usr/bin/python3
max_function_lines=60
# The folders whose functions have the size limit (tests/ has none).
sized='apps|bench|cli|client|common|examples|include|python|server|worker'
# The test folders `make test-asan` compiles with the same flags.
compiled_elsewhere='tests/(cli|client|common|server)/'

mkdir -p "$build"
CC=clang CXX=clang++ cmake -S . -B "$build" -G Ninja \
  -DCMAKE_EXPORT_COMPILE_COMMANDS=ON -DGRADWIRE_CUDA=OFF \
  -DGRADWIRE_BUILD_FUZZERS=OFF >"$build/lint-configure.log" 2>&1 ||
  { cat "$build/lint-configure.log"; exit 1; }
# The generated protobuf headers that every source includes (only they:
# the checks compile nothing, so the generated .cc files are not built).
generated=()
for proto in proto/gradwire/v1/*.proto; do
  name=proto/gen/gradwire/v1/$(basename "$proto" .proto)
  generated+=("$name.pb.h" "$name.grpc.pb.h")
done
cmake --build "$build" --target "${generated[@]}" >/dev/null

commands=$(mktemp)
trap 'rm -f "$commands"' EXIT
tidy_config="{CheckOptions: [{key: readability-function-size.LineThreshold,\
 value: $max_function_lines}]}"
# One command per project source (generated code excluded).
"$python" - "$build/compile_commands.json" "$PWD" "$sized" "$tidy_config" \
  "$compiled_elsewhere" "$@" >"$commands" <<'PY'
import json, os, re, shlex, sys
database, root, sized, config, elsewhere = sys.argv[1:6]
root += "/"
only = {os.path.abspath(path) for path in sys.argv[6:]}
sized_source = re.compile(re.escape(root) + "(%s)/" % sized)
compiled_elsewhere = re.compile(re.escape(root) + elsewhere)
tidy = ["clang-tidy-14", "--quiet", "-p", os.path.dirname(database),
        "-checks=-*,readability-function-size", "-config=" + config,
        "-warnings-as-errors=*", "-header-filter=^" + sized_source.pattern,
        "--extra-arg=-Werror", "--extra-arg=-Wthread-safety"]
# clang-tidy counts on stderr the warnings it hid (system headers) and the
# errors it printed.
quiet = (" 2>&1 | { grep -Ev '^[0-9]+ (warnings?|errors?)( and [0-9]+ "
         "errors?)? generated\\.$' || true; }")
for entry in json.load(open(database)):
    source = entry["file"]
    if not source.startswith(root) or "/build" in source[len(root) - 1:]:
        continue
    if not source.endswith(".cc") or (only and source not in only):
        continue
    if not only and compiled_elsewhere.match(source):
        continue
    if sized_source.match(source):
        print("set -o pipefail; cd %s && %s%s" % (
            shlex.quote(root), " ".join(map(shlex.quote, tidy + [source])),
            quiet))
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
echo "lint: $total sources ($jobs at a time): clang-tidy-14 -Werror" \
  "-Wthread-safety, functions <= $max_function_lines lines outside tests/;" \
  "clang++ -fsyntax-only -Werror -Wthread-safety in tests/ (but" \
  "$compiled_elsewhere: make test-asan)"
failed=0
if [[ $# -gt 0 && $total -eq 0 ]]; then
  echo "lint: none of $* is in $build/compile_commands.json" >&2
  failed=1
fi
tr '\n' '\0' <"$commands" |
  xargs -0 -r -P "$jobs" -I{} bash -c '{}' || failed=1

echo "lint: clang-format --dry-run --Werror"
# Tracked and new files, as they are in the working tree.
if [[ $# -gt 0 ]]; then
  patterns=("$@")
else
  patterns=('*.cc' '*.h' '*.cu' '*.cuh' '*.proto')
fi
git ls-files --cached --others --exclude-standard -- "${patterns[@]}" |
  while read -r file; do [[ -f "$file" ]] && echo "$file"; done |
  xargs -r clang-format --dry-run --Werror || failed=1

if [[ $failed -ne 0 ]]; then
  echo "lint: FAILED" >&2
  exit 1
fi
echo "lint: clean"
