"""The checkpoint of a backfill: which traces (or sessions) are done, so a killed backfill resumes where it stopped.

One file per selection and set of evaluators, ``<store>/backfill/<key>.done``: a line per finished trace id (or
session id), appended only once that unit's results are in the store and handed to the score sinks, and synced
to disk. A run of the same command skips what the file lists; a run that finishes deletes it, so running the
command again re-judges everything (the results upsert: their ids are deterministic). What was in flight when
the process died is judged again on resume and replaces the same rows, never adds to them.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from pathlib import Path

from evaltrace._internal.private_files import make_private_dirs, private_opener

__all__ = ["Checkpoint", "checkpoint_key"]


def checkpoint_key(*parts: str) -> str:
    """A short stable hash of what identifies a backfill (its selection, scope and evaluators)."""
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:24]


class Checkpoint:
    """The done units of one backfill, read at start and appended to as units finish.

    Args:
        path: The checkpoint file (created on the first append).
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.done: set[str] = set()
        if path.exists():
            # A line cut short by a kill mid-write has no newline: it is not counted as done.
            text = path.read_text(encoding="utf-8", errors="replace")
            complete = text if text.endswith("\n") else text.rsplit("\n", 1)[0] if "\n" in text else ""
            self.done = {line for line in complete.split("\n") if line}

    def add(self, units: Iterable[str]) -> None:
        """Record ``units`` as done, durably (written and synced before this returns)."""
        new = [u for u in units if u not in self.done]
        if not new:
            return
        make_private_dirs(self.path.parent)
        with open(self.path, "a", encoding="utf-8", opener=private_opener) as out:
            out.write("".join(f"{u}\n" for u in new))
            out.flush()
            os.fsync(out.fileno())
        self.done.update(new)

    def finish(self) -> None:
        """The backfill completed: forget it (a later run of the same command judges everything again)."""
        try:
            self.path.unlink()
        except FileNotFoundError:
            pass
