#!/usr/bin/env bash
# Tests read nothing outside the repository: check the paths they name, then make a copy of the repository with
# nothing beside it for the test run (.ci/run runs `python -m pytest` there).
#
#   clean=$(bash scripts/check_clean_clone.sh)   # fails on a path outside; prints a temp dir: the copy is $clean/repo
#   (cd "$clean/repo" && python -m pytest); rm -rf "$clean"
#
# 1. No test, script, benchmark or CI file names a path outside the repository: `../shared` (the sibling folder
#    the recorded fixtures once came from) or a `Path(__file__)` climbing above the repository root
#    (`parents[N]`, `.parent.parent...`).
# 2. The copy holds what a fresh clone holds (tracked files; untracked ones not ignored too, so that a local run
#    sees new files), in a fresh temp dir where no `../shared` exists. The tests run against the installed
#    evaltrace, so a test that opened a file outside the repository fails there.
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python}

if grep -rnI -- '\.\./shared' tests scripts benchmarks .ci pyproject.toml | grep -v '^scripts/check_clean_clone.sh:' >&2; then
  echo "error: the lines above name ../shared, outside the repository; copy what they read into tests/fixtures/" >&2
  exit 1
fi
"$python" - tests scripts benchmarks <<'EOF'
import re, sys
from pathlib import Path

# Path(__file__) followed by .parents[N] or by N + 1 x .parent: N folders up from the file's folder.
CLIMB = re.compile(r"Path\(__file__\)(?:\.resolve\(\))?(\.parents\[(\d+)\]|(?:\.parent\b)+)")
bad = []
for top in sys.argv[1:]:
    for path in sorted(Path(top).rglob("*.py")):
        depth = len(path.parts) - 1  # folders between the repository root and the file
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            for match in CLIMB.finditer(line):
                up = int(match.group(2)) if match.group(2) else match.group(1).count(".parent") - 1
                if up > depth:
                    bad.append(f"{path}:{number}: climbs {up} folders from a file {depth} deep: {line.strip()}")
if bad:
    print("\n".join(bad), file=sys.stderr)
    sys.exit("error: the lines above reach outside the repository")
EOF

workdir=$(mktemp -d)
mkdir "$workdir/repo"
git ls-files -z --cached --others --exclude-standard \
  | tar --null --files-from=- --ignore-failed-read -c -f - 2>/dev/null | tar -x -C "$workdir/repo"
test -f "$workdir/repo/pyproject.toml" && test ! -e "$workdir/shared"
echo "$workdir"
