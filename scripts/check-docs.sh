#!/usr/bin/env bash
# Checks the documentation (make check-docs; CI runs it):
#  1. every relative link in every tracked *.md file resolves: the file or
#     folder exists, and a `#anchor` names a heading of the Markdown file it
#     points into (GitHub's slugs: lower case, punctuation dropped, spaces
#     as hyphens, -1, -2, ... for repeated headings);
#  2. every figure of README.md and docs/benchmarks/README.md is what
#     scripts/figures.py computes from the data files it names (one line
#     per difference: file, line, figure, the text and the computed text;
#     make figures rewrites them);
#  3. the generated settings reference is current: the CTest test whose
#     name holds "settings_reference" runs in $BUILD (default build/) when
#     that build has it; otherwise the check says so and skips it.
# Exit 0 when everything holds, 1 with one line per problem otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD=${BUILD:-build}
PYTHON=${PYTHON:-/usr/bin/python3}

echo "check-docs: links in tracked Markdown files"
mapfile -d '' docs < <(git ls-files -z --cached -- '*.md')
"$PYTHON" - "${docs[@]}" <<'EOF'
import os
import re
import sys
import unicodedata

FENCE = re.compile(r"^\s*(```|~~~)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
INLINE_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE_DEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s.*)?$")
HTML_ATTR = re.compile(r"""(?:href|src)\s*=\s*["']([^"']+)["']""")
CODE_SPAN = re.compile(r"(`+)(.+?)\1")
EXTERNAL = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def slug(text):
    """GitHub's anchor for a heading's text."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)  # links: their text
    text = re.sub(r"<[^>]+>", "", text)                      # inline HTML
    text = text.replace("`", "").lower()
    kept = []
    for ch in text:
        if ch in " -_" or ch.isalnum() or unicodedata.category(ch).startswith("M"):
            kept.append(ch)
    return "".join(kept).replace(" ", "-")


def lines_outside_code(path):
    """(line number, text) of every line outside fenced code blocks."""
    fenced = None
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            match = FENCE.match(line)
            if match:
                if fenced is None:
                    fenced = match.group(1)
                elif fenced == match.group(1):
                    fenced = None
                continue
            if fenced is None:
                yield number, line.rstrip("\n")


anchor_cache = {}


def anchors(path):
    if path not in anchor_cache:
        seen = {}
        result = set()
        for _, line in lines_outside_code(path):
            match = HEADING.match(line)
            if not match:
                continue
            base = slug(match.group(2))
            count = seen.get(base, 0)
            seen[base] = count + 1
            result.add(base if count == 0 else f"{base}-{count}")
        # Explicit anchors: <a name="x"> or <a id="x">.
        with open(path, encoding="utf-8") as f:
            result.update(re.findall(r"""<a\s+(?:name|id)=["']([^"']+)["']""", f.read()))
        anchor_cache[path] = result
    return anchor_cache[path]


def targets(line):
    # Code spans are not links: blank them out first.
    line = CODE_SPAN.sub(lambda m: " " * len(m.group(0)), line)
    for regex in (INLINE_LINK, HTML_ATTR):
        for match in regex.finditer(line):
            yield match.group(1)
    match = REFERENCE_DEF.match(line)
    if match:
        yield match.group(1)


files = sys.argv[1:]
problems = []
checked = 0
for doc in files:
    if not os.path.isfile(doc):
        continue  # Deleted in the working tree.
    for number, line in lines_outside_code(doc):
        for target in targets(line):
            if not target or EXTERNAL.match(target) or target.startswith("//"):
                continue
            checked += 1
            path_part, _, anchor = target.partition("#")
            if path_part:
                resolved = os.path.normpath(
                    os.path.join(os.path.dirname(doc), path_part))
                if resolved.startswith(".."):
                    problems.append(f"{doc}:{number}: {target}: outside the repository")
                    continue
                if not os.path.exists(resolved):
                    problems.append(f"{doc}:{number}: {target}: no such file")
                    continue
            else:
                resolved = doc
            if anchor and resolved.endswith(".md") and os.path.isfile(resolved):
                if anchor not in anchors(resolved):
                    problems.append(
                        f"{doc}:{number}: {target}: no heading with the anchor "
                        f"#{anchor} in {resolved}")

for problem in problems:
    print(problem)
print(f"check-docs: {len(files)} files, {checked} relative links, "
      f"{len(problems)} broken")
sys.exit(1 if problems else 0)
EOF

echo "check-docs: the figures of README.md and docs/benchmarks/README.md"
"$PYTHON" scripts/figures.py --check

echo "check-docs: the generated settings reference"
if [ ! -f "$BUILD/CTestTestfile.cmake" ]; then
  echo "check-docs: skipped: no CMake build in $BUILD/ (run make build first)"
  exit 0
fi
tests=$(ctest --test-dir "$BUILD" -N -R settings_reference | sed -n 's/^Total Tests: //p')
if [ "${tests:-0}" -eq 0 ]; then
  echo "check-docs: skipped: $BUILD/ has no CTest test named *settings_reference*"
  exit 0
fi
ctest --test-dir "$BUILD" -R settings_reference --output-on-failure
