"""The checkpoint of a backfill: which traces (or sessions) are done, so a killed backfill resumes where it stopped.

One file per selection and set of evaluators (with their options), ``<store>/backfill/<key>.done``: a line per
finished trace id (or session id), appended only once that unit's results are in the store and settled by every
score sink (delivered, or dead-lettered and counted), and synced to disk. A run of the same command skips what the file lists; a run that finishes deletes it, so running the
command again re-judges everything (the results upsert: their ids are deterministic). What was in flight when
the process died is judged again on resume and replaces the same rows, never adds to them.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from pathlib import Path

from evaltrace._internal.private_files import make_private_dirs, private_opener

__all__ = ["Checkpoint", "checkpoint_key", "describe_options"]

_SCALARS = (str, int, float, bool, type(None))
_DEPTH = 4


def checkpoint_key(*parts: str) -> str:
    """A short stable hash of what identifies a backfill (its selection, scope and evaluators)."""
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:24]


def describe_options(evaluator: object) -> str:
    """A stable description of ``evaluator``'s configuration: its class and options, its judge's model and endpoint.

    Part of the checkpoint key, so a backfill with other options (``max_words=100`` after ``200``) or another judge
    model never resumes the checkpoint of the first: its units were judged differently. Built from the instance's
    attributes: plain values as written, a judge as its model and ``base_url``, any other object as its class
    (never a memory address, which changes from run to run).
    """
    return f"{type(evaluator).__module__}.{type(evaluator).__qualname__}{_describe(vars_of(evaluator), 0)}"


def vars_of(item: object) -> dict[str, object]:
    """The public and private attributes of ``item`` (none for objects without ``__dict__``)."""
    try:
        return dict(vars(item))
    except TypeError:
        return {}


def _describe(value: object, depth: int) -> str:
    if isinstance(value, _SCALARS):
        return repr(value)
    if depth >= _DEPTH:
        return type(value).__qualname__
    if isinstance(value, dict):
        items = sorted((str(k), _describe(v, depth + 1)) for k, v in value.items())
        return "{" + ",".join(f"{k}={v}" for k, v in items) + "}"
    if isinstance(value, list | tuple):
        return "[" + ",".join(_describe(v, depth + 1) for v in value) + "]"
    if isinstance(value, set | frozenset):
        return "{" + ",".join(sorted(_describe(v, depth + 1) for v in value)) + "}"
    model = getattr(value, "model", None)
    if isinstance(model, str):  # a judge (or embedder): which model, at which endpoint
        base_url = getattr(getattr(value, "client", None), "base_url", None)
        return f"{type(value).__qualname__}(model={model!r},base_url={str(base_url) if base_url else ''!r})"
    if callable(value):  # a wrapped function evaluator: its name, not its address
        return f"{getattr(value, '__module__', '')}.{getattr(value, '__qualname__', type(value).__qualname__)}"
    return type(value).__qualname__


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
