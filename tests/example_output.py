"""What an example prints must be true: a path it says it wrote is a file there (the store, not a folder)."""

from __future__ import annotations

import re
from pathlib import Path

_WRITTEN = re.compile(r"written to (\S+?)[.:,]?(?:\s|$)")


def assert_written_paths_exist(stdout: str, cwd: Path) -> None:
    """Every ``written to PATH`` in ``stdout`` names a file that exists, relative to ``cwd``; one at least."""
    paths = _WRITTEN.findall(stdout)
    assert paths, f"no 'written to PATH' in:\n{stdout}"
    for path in paths:
        assert (cwd / path).is_file(), f"the example printed {path!r}, which is not a file in {cwd}"
