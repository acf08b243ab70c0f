#!/usr/bin/env bash
# Tests read nothing outside the repository: prove it on a copy of the committed tree with nothing beside it.
#
#   bash scripts/check_clean_clone.sh [pytest arguments]
#
# 1. No test, script, benchmark or CI file names a path outside the repository: `../shared` (the sibling folder
#    the recorded fixtures once came from) or a `Path(__file__)` climbing above the repository root
#    (`parents[N]`, `.parent.parent...`).
# 2. The tests that read files of the repository (recorded fixtures, examples, docs, snapshots) pass from
#    `git archive HEAD` unpacked in a fresh temp dir, where no `../shared` exists, with the installed evaltrace.
#    Only committed files are checked: CI runs on a fresh clone, where that is everything.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
python=${PYTHON:-python}

echo "--- clean clone: no path outside the repository in tests/, scripts/, benchmarks/, .ci/" >&2
if grep -rnI -- '\.\./shared' tests scripts benchmarks .ci pyproject.toml | grep -v '^scripts/check_clean_clone.sh:'; then
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

echo "--- clean clone: the file-reading tests from git archive HEAD, nothing beside it" >&2
workdir=$(mktemp -d)
trap 'rm -rf "$workdir"' EXIT
mkdir "$workdir/clone"
git archive HEAD | tar -x -C "$workdir/clone"
test ! -e "$workdir/shared"
# Every test module that opens a file of the repository: fixtures, examples, docs, snapshots.
mapfile -t tests < <(cd "$workdir/clone" && grep -rlE 'Path\(__file__\)|CASSETTE|tests_paths|anthropic_replay|provider_bodies' \
  tests --include='test_*.py' | grep -v '^tests/e2e_llm/' | sort)
echo "${#tests[@]} test modules" >&2
(cd "$workdir/clone" && env -u EVALTRACE_CASSETTE_DIR "$python" -m pytest -p no:cacheprovider "${tests[@]}" "$@")
