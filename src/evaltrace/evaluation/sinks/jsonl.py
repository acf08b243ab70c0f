"""JSONL score sink: one ``Score`` per line, appended to a local file (the offline and test backend).

An evaluation the shutdown deadline cut short leaves a ``{"not_evaluated": {...}}`` line instead (see
``not_evaluated``): never a score, so readers of scores skip it.
"""

from __future__ import annotations

import os
import stat
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from evaltrace._internal import forks
from evaltrace._internal.private_files import make_private_dirs, private_opener
from evaltrace.evaluation.sinks.base import SinkResult
from evaltrace.evaluation.sinks.not_evaluated import NotEvaluated, NotEvaluatedPartlyWritten
from evaltrace.schema import Score

_PREAD = getattr(os, "pread", None)  # not on Windows: a torn last line is then not detected


def _is_regular_or_missing(path: Path) -> bool:
    """Whether ``path`` is a regular file (following links) or does not exist yet (a new file is regular)."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except FileNotFoundError:
        return True
    except OSError:
        return False  # open() reports it


def read_score_ids(path: Path) -> set[str]:
    """Return the ids of the scores already in the JSONL file ``path`` (empty when it does not exist)."""
    if not path.exists():
        return set()
    ids: set[str] = set()
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                try:
                    ids.add(Score.model_validate_json(line).id)
                except ValueError:
                    continue
    return ids


class JsonlScoreSink:
    """Append scores to a JSON Lines file.

    A file is not an upsert store, so a score re-sent after a write error may appear twice; readers should
    keep the last line per ``id`` (``evaltrace scores replay --sink jsonl`` skips ids already present).

    Args:
        path: The file (created ``0600``); its directory is created (``0700``) when missing.
    """

    name = "jsonl"

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        forks.reinit_after_fork(self)

    def _reinit_after_fork(self) -> None:
        """In a forked child: a new lock (the parent's sink thread may have held this one at the fork)."""
        self._lock = threading.Lock()

    def export(self, batch: Sequence[Score]) -> SinkResult:
        """Append the batch; a disk error marks the whole batch as failed (retryable)."""
        text = "".join(score.model_dump_json() + "\n" for score in batch)
        try:
            make_private_dirs(self.path.parent)
            with self._lock:
                handle, _, lead = self._open_end()
                with handle:
                    handle.write(lead + text)
        except OSError as exc:
            return SinkResult(failed=tuple(batch), error=f"{type(exc).__name__}: {exc}")
        return SinkResult.success()

    def record_not_evaluated(self, records: Sequence[NotEvaluated]) -> None:
        """Append one ``{"not_evaluated": ...}`` line per evaluation never run.

        Raises:
            NotEvaluatedPartlyWritten: The write failed after the first ``written`` records reached the file whole
                (read back from where this write began): the caller writes only the others elsewhere.
            OSError: The file could not be opened (nothing was written).
        """
        lines = [record.to_line() + "\n" for record in records]
        make_private_dirs(self.path.parent)
        with self._lock:
            handle, start, lead = self._open_end()
            try:
                with handle:
                    handle.write(lead + "".join(lines))
            except Exception as exc:
                raise NotEvaluatedPartlyWritten(self._written_since(start, lines), exc) from exc

    def _open_end(self) -> tuple[TextIO, int | None, str]:
        """Open the file to append: the handle, the offset the first line will start at, and what goes first.

        A write that failed part way (a full disk, a file-size limit) can leave a torn last line. Appending to it
        would glue the next line to the fragment and make it unreadable: a line that was written and yet lost. So
        a regular file whose last byte is not a line break gets one first (the fragment stays, as an unreadable
        line). Only a regular file is checked, and only where ``os.pread`` exists (POSIX): a named pipe or a
        terminal (``/dev/stdout``) is opened to append only, as before, and cannot be read back; the offset is
        then ``None`` (see :meth:`_written_since`). A check that fails counts the last line as ended.
        """
        if not _is_regular_or_missing(self.path):  # a pipe or a terminal: "a+" would need it seekable
            return open(self.path, "a", encoding="utf-8", opener=private_opener), None, ""  # the caller closes it
        try:
            handle = open(self.path, "a+", encoding="utf-8", opener=private_opener)  # the caller closes it
        except PermissionError:
            # A file we may append to but not read (an append-only log, mode 0200): written as before the check,
            # unchecked and not read back (an offset of None, as for a pipe).
            return open(self.path, "a", encoding="utf-8", opener=private_opener), None, ""
        try:
            status = os.fstat(handle.fileno())
        except BaseException:
            handle.close()
            raise
        if not stat.S_ISREG(status.st_mode):
            return handle, None, ""
        size = status.st_size
        try:
            torn = size > 0 and _PREAD is not None and _PREAD(handle.fileno(), 1, size - 1) != b"\n"
        except (OSError, ValueError):
            torn = False  # cannot tell: append as before (a torn line would glue, as without the check)
        return handle, size + torn, "\n" if torn else ""

    def _written_since(self, start: int | None, lines: list[str]) -> int:
        """How many of ``lines``, from the first, the file holds whole from byte ``start`` (0 when unreadable).

        A line cut exactly before its final line break is complete JSON that readers take, so it counts as written
        (the torn-line check ends it before the next append). A file that is not regular (``start`` is ``None``:
        a pipe) cannot be read back: 0, so every record of the failed write also goes to the dead-letter file
        (at least once there, never lost).
        """
        if start is None:
            return 0
        try:
            with open(self.path, "rb") as handle:
                handle.seek(start)
                landed = handle.read().splitlines(keepends=True)
        except OSError:
            return 0  # cannot tell: none counted written here, so all go to the dead-letter file (at least once)
        written = 0
        for mine, theirs in zip(lines, landed, strict=False):
            whole = mine.encode("utf-8")
            # A line cut exactly before its "\n" counts as written only where the torn-line check will end it
            # before the next append (os.pread); elsewhere that append would glue onto it and make it unreadable.
            if theirs != whole and (_PREAD is None or theirs != whole[:-1]):  # cut short of its JSON: not written
                break
            written += 1
            if theirs != whole:  # cut exactly before its line break: the last that landed
                break
        return written

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        """Writes are not buffered past ``export``; always True."""
        return True

    def shutdown(self) -> None:
        """Nothing to release."""
