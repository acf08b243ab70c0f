"""The dead-letter file: scores a backend would not take, kept as JSON Lines so they can be replayed.

One line per score: ``{"sink": <sink name>, "error": <last error>, "failed_at": <ISO time>, "score": <Score>}``;
an evaluation cut short at shutdown leaves a ``{"not_evaluated": {...}}`` line (``not_evaluated``), which is no
score: a replay neither sends nor rejects it, and keeps it in the file.
Score ids are deterministic (uuid5 of trace, span, evaluator and version), so a replay is an idempotent
upsert; :func:`parse_dead_letters` keeps the last line per id so a file that holds a score twice (e.g.
dead-lettered, replayed, failed again) still delivers it once.

The sink worker writes through :func:`save_dead_letters`, which encodes each score on its own: one the encoder
refuses is returned (and counted dropped by the caller), its neighbours are written. A replay ends with
:func:`put_back_after_replay`, which puts what it did not deliver back without ever leaving a delivered score in
the file.

Writers append under an exclusive lock (``flock`` where the platform has it, plus a process-wide lock), and
:func:`stage_for_replay` takes the same lock to move the file aside: a process still dead-lettering while a
replay runs writes into a new file rather than into the one being replayed, so no line falls between the two.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, cast

from pydantic import ValidationError
from pydantic_core import to_jsonable_python

from evaltrace._internal import forks
from evaltrace._internal.private_files import make_private_dirs, private_opener
from evaltrace.evaluation.sinks.not_evaluated import is_not_evaluated_line, record_key
from evaltrace.schema import Score

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: the process-wide lock still orders this process's writers
    fcntl = None  # type: ignore[assignment]

STAGED_SUFFIX = ".replaying"
REJECTS_SUFFIX = ".rejects.jsonl"

_lock = threading.Lock()


def _reinit_after_fork() -> None:
    """In a forked child: a new lock (a parent's sink thread may have held this one at the fork)."""
    global _lock
    _lock = threading.Lock()


forks.call_in_child(_reinit_after_fork)


@dataclass(frozen=True)
class RejectedLine:
    """A line of a dead-letter file that holds no valid score.

    Attributes:
        line: Its 1-based line number in the file read.
        raw: The line as written (undecodable bytes replaced).
        reason: Why it was rejected.
    """

    line: int
    raw: str
    reason: str


def write_dead_letters(path: Path, sink_name: str, scores: Iterable[Score], error: str | None) -> int:
    """Append ``scores`` to the dead-letter file ``path``; return how many lines were written.

    Args:
        path: The JSONL file (its directory is created when missing).
        sink_name: Name of the sink that failed to deliver them.
        scores: The undelivered scores.
        error: The last error seen, recorded on each line.

    Returns:
        The number of scores written.

    All or nothing: a score the encoder refuses raises before anything is written. The sink worker and
    ``scores replay`` use :func:`save_dead_letters`, which saves every score it can.
    """
    failed_at = dt.datetime.now(dt.UTC).isoformat()
    lines = [_line(sink_name, error, failed_at, score) for score in scores]
    append_lines(path, lines)
    return len(lines)


@dataclass(frozen=True)
class SavedDeadLetters:
    """What :func:`save_dead_letters` did: how many scores it wrote, and those the encoder refused, with why.

    Attributes:
        written: Scores written to the file.
        refused: ``(score, reason)`` for each score that could not be encoded as a line (not written).
        first_error: The exception of the first refusal (for a log line with its traceback), if any.
    """

    written: int
    refused: tuple[tuple[Score, str], ...] = ()
    first_error: BaseException | None = None


def save_dead_letters(path: Path, sink_name: str, scores: Iterable[Score], error: str | None) -> SavedDeadLetters:
    """Append every score of ``scores`` the encoder takes, one line each; return what was written and refused.

    Unlike :func:`write_dead_letters` (all or nothing), one score whose value the JSON encoder refuses (an
    object in its metadata) does not keep its neighbours out of the file (a lone surrogate is written escaped): each
    score is encoded on its own, the encodable ones are written in one append, and the refused ones are
    returned with the reason. A disk error still raises (``OSError``): then nothing was written by this call
    that the file does not hold whole (one ``write`` of whole lines).
    """
    failed_at = dt.datetime.now(dt.UTC).isoformat()
    lines: list[str] = []
    refused: list[tuple[Score, str]] = []
    first: BaseException | None = None
    for score in scores:
        try:
            line = _line(sink_name, error, failed_at, score)
            line.encode("utf-8")  # what the file's encoder will do: refuse here, never mid-write
        except Exception as exc:  # PydanticSerializationError, TypeError, ValueError, UnicodeEncodeError
            refused.append((score, f"{type(exc).__name__}: {exc}"))
            first = first or exc
            continue
        lines.append(line)
    append_lines(path, lines)
    return SavedDeadLetters(len(lines), tuple(refused), first)


def _line(sink_name: str, error: str | None, failed_at: str, score: Score) -> str:
    record = {"sink": sink_name, "error": error, "failed_at": failed_at, "score": _score_json(score)}
    try:
        line = json.dumps(record, ensure_ascii=False, default=to_jsonable_python)
        line.encode("utf-8")
    except UnicodeEncodeError:
        # A lone surrogate, which UTF-8 cannot hold: the line is written with ASCII escapes, which every JSON
        # reader (``scores replay``) turns back into the same text; the backend sinks then send it as U+FFFD.
        return json.dumps(record, default=to_jsonable_python)
    return line


def _score_json(score: Score) -> dict[str, Any]:
    """``score`` as pydantic's JSON mode dumps it; for a lone surrogate in a nested key, the same by hand."""
    try:
        return score.model_dump(mode="json")
    except UnicodeEncodeError:  # pydantic's JSON mode writes nested keys as UTF-8: the Python dump, made finite
        return cast("dict[str, Any]", _finite(score.model_dump(mode="python")))


def _finite(value: Any) -> Any:
    """``value`` as pydantic's JSON mode writes it where ``json`` would not; the rest as it is.

    NaN and infinities become ``None``, sets lists, and keys that are not text are spelled as pydantic spells them
    (``None`` -> ``"None"``).
    """
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {
            (key if isinstance(key, str) else next(iter(to_jsonable_python({key: 0})))): _finite(item)
            for key, item in value.items()
        }
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_finite(item) for item in value]
    return value


def append_lines(path: Path, lines: list[str], *, durable: bool = False) -> None:
    """Append ``lines`` to ``path`` under the dead-letter lock; ``durable`` fsyncs before returning."""
    if not lines:
        return
    with _locked(path) as handle:
        handle.write("\n".join(lines) + "\n")
        handle.flush()
        if durable:
            os.fsync(handle.fileno())


@contextmanager
def _locked(path: Path) -> Iterator[IO[str]]:
    """Open ``path`` for appending, locked against other writers and :func:`stage_for_replay`.

    A replay may rename the file between our ``open`` and our lock; the inode check then sends the write to
    the file now at ``path`` instead of the renamed one.
    """
    make_private_dirs(path.parent)
    with _lock:
        while True:
            with open(path, "a", encoding="utf-8", opener=private_opener) as handle:
                if fcntl is not None:
                    fcntl.flock(handle.fileno(), fcntl.LOCK_EX)  # released when the handle closes
                    if not _is_file_at(handle, path):
                        continue
                yield handle
                return


def _is_file_at(handle: IO[str], path: Path) -> bool:
    try:
        return os.fstat(handle.fileno()).st_ino == os.stat(path).st_ino
    except FileNotFoundError:
        return False


def stage_for_replay(path: Path) -> Path:
    """Move ``path`` aside to ``<path>.replaying`` for a replay and return that file (it may not exist).

    When a ``.replaying`` file is already there (an earlier replay was interrupted), the lines of ``path`` are
    appended to it, byte for byte (unreadable lines too), so nothing of either is lost.
    """
    staged = path.with_name(path.name + STAGED_SUFFIX)
    if not path.exists():
        return staged
    with _locked(path):
        if not staged.exists():
            path.replace(staged)
            return staged
        content = path.read_bytes()
        if content:
            with staged.open("ab") as out:
                if staged.stat().st_size and not _ends_with_newline(staged):
                    out.write(b"\n")
                out.write(content if content.endswith(b"\n") else content + b"\n")
                out.flush()
                os.fsync(out.fileno())
        path.unlink()
    return staged


def put_back_after_replay(path: Path, staged: Path, lines: list[str]) -> None:
    """End a replay: ``lines`` (what it did not deliver) become the content of ``staged``, then go back to ``path``.

    Two steps, each atomic (a temporary file, fsynced, renamed over the target), so an error or a crash at any
    point loses nothing and repeats nothing delivered:

    1. ``staged`` is replaced by ``lines``: from here on it holds nothing the replay delivered, so a later replay
       that finds it (this one stopped before step 2) sends none of those again.
    2. under the writers' lock, ``path`` is replaced by ``lines`` followed by what writers appended to ``path``
       meanwhile (byte for byte), and ``staged`` is removed.

    When step 1 fails (a disk error), ``staged`` keeps every line it held and the error is raised: the next
    replay sends the delivered scores again, under the same ids (an upsert; the JSONL sink skips ids present).
    """
    _replace_with(staged, "".join(line + "\n" for line in lines).encode("utf-8"))
    if not lines and not path.exists():
        staged.unlink()
        return
    with _locked(path):
        appended = path.read_bytes()
        if appended and not appended.endswith(b"\n"):
            appended += b"\n"
        if not lines and not appended:
            path.unlink()  # the lock created it: nothing to keep (writers waiting see it gone and open anew)
        elif not appended:
            staged.replace(path)  # one rename: no moment where both files hold the lines
            return
        else:
            _replace_with(path, staged.read_bytes() + appended)
    staged.unlink(missing_ok=True)


def _replace_with(target: Path, content: bytes) -> None:
    """Atomically make ``content`` the content of ``target`` (owner-only, fsynced before the rename)."""
    temporary = target.with_name(target.name + ".tmp")
    with open(temporary, "wb", opener=private_opener) as out:
        out.write(content)
        out.flush()
        os.fsync(out.fileno())
    temporary.replace(target)


def score_lines(path: Path) -> dict[str, str]:
    """The line of a dead-letter file each score id was read from (the last one: as :func:`parse_dead_letters`)."""
    lines: dict[str, str] = {}
    with path.open("rb") as handle:
        for raw_bytes in handle:
            score, _ = _parse_line(raw_bytes)
            if score is not None:
                lines[score.id] = raw_bytes.decode("utf-8").rstrip("\r\n")
    return lines


def encode_or_keep(sink_name: str, scores: Iterable[Score], error: str | None, kept: dict[str, str]) -> list[str]:
    """One dead-letter line per score, with ``error``; a score the encoder refuses keeps its line from ``kept``."""
    failed_at = dt.datetime.now(dt.UTC).isoformat()
    lines: list[str] = []
    for score in scores:
        try:
            line = _line(sink_name, error, failed_at, score)
            line.encode("utf-8")
        except Exception:  # e.g. a lone surrogate its line held escaped: the line as read is still valid
            line = kept[score.id]
        lines.append(line)
    return lines


def _ends_with_newline(path: Path) -> bool:
    with path.open("rb") as handle:
        handle.seek(-1, os.SEEK_END)
        return handle.read(1) == b"\n"


def parse_dead_letters(path: Path) -> tuple[list[Score], list[RejectedLine]]:
    """Read a dead-letter file: the scores (one per id, last line wins, file order) and the lines that hold none.

    A line is rejected when it is not UTF-8, not JSON, or does not hold a valid :class:`Score` (under
    ``"score"``, or as the whole line); the reason says which. A ``not_evaluated`` record is neither (see
    :func:`not_evaluated_lines`).
    """
    by_id: dict[str, Score] = {}
    rejected: list[RejectedLine] = []
    with path.open("rb") as handle:
        for number, raw_bytes in enumerate(handle, start=1):
            raw = raw_bytes.decode("utf-8", errors="replace").rstrip("\r\n")
            if not raw.strip():
                continue
            score, reason = _parse_line(raw_bytes)
            if score is None and reason == _NOT_A_SCORE:
                continue
            if score is None:
                rejected.append(RejectedLine(number, raw, reason))
                continue
            by_id.pop(score.id, None)
            by_id[score.id] = score
    return list(by_id.values()), rejected


def not_evaluated_lines(path: Path) -> list[str]:
    """The ``not_evaluated`` records of a dead-letter file, as written, each record once (a replay keeps them)."""
    return read_not_evaluated(path)[0]


def read_not_evaluated(path: Path) -> tuple[list[str], int]:
    """The ``not_evaluated`` records of a file, as written, each record once; and how many copies were dropped.

    Copies of one record share its ``record_id`` (:func:`~evaltrace.evaluation.sinks.not_evaluated.record_key`;
    an older record without one: its identical line), and the first copy is kept: a replay killed after
    :func:`put_back_after_replay` rewrote ``path`` and before it removed ``staged`` leaves the records in both,
    and the next replay appends one to the other. Scores dedupe by id; without this, every record would be
    doubled for good. Two records of the same evaluation with different ids are two records, both kept.
    """
    kept: dict[str, str] = {}
    copies = 0
    with path.open("rb") as handle:
        for raw_bytes in handle:
            if _parse_line(raw_bytes)[1] != _NOT_A_SCORE:
                continue
            line = raw_bytes.decode("utf-8").rstrip("\r\n")
            key = record_key(json.loads(line), line)
            if key in kept:
                copies += 1
            else:
                kept[key] = line
    return list(kept.values()), copies


_NOT_A_SCORE = "a not_evaluated record"


def _parse_line(raw: bytes) -> tuple[Score | None, str]:
    try:
        record = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        return None, f"not UTF-8: {exc}"
    except json.JSONDecodeError as exc:
        return None, f"invalid JSON: {exc}"
    if not isinstance(record, dict):
        return None, f"invalid record: a JSON {type(record).__name__}, not an object"
    if is_not_evaluated_line(record):
        return None, _NOT_A_SCORE
    try:
        return Score.model_validate(record["score"] if "score" in record else record), ""
    except ValidationError as exc:
        details = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'score'}: {e['msg']}" for e in exc.errors())
        return None, f"invalid score: {details}"
    except (ValueError, TypeError) as exc:
        return None, f"invalid score: {exc}"


def read_dead_letters(path: Path) -> tuple[list[Score], int]:
    """Read a dead-letter file; return the scores (one per id, last line wins, file order) and bad-line count."""
    scores, rejected = parse_dead_letters(path)
    return scores, len(rejected)


def write_rejects(path: Path, source: Path, rejected: Iterable[RejectedLine]) -> int:
    """Append ``rejected`` lines to the rejects file ``path`` (skipping lines it already holds); return how many.

    Each line is ``{"source": <file read>, "line": n, "reason": ..., "rejected_at": <ISO time>, "raw": <line>}``:
    the raw text is kept whole, so a human can repair it and put it back in a dead-letter file.
    """
    known: set[str] = set()
    if path.exists():
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                known.add(json.loads(line)["raw"])
            except (ValueError, KeyError, TypeError):
                continue
    now = dt.datetime.now(dt.UTC).isoformat()
    lines = [
        json.dumps(
            {"source": str(source), "line": r.line, "reason": r.reason, "rejected_at": now, "raw": r.raw},
            ensure_ascii=False,
        )
        for r in rejected
        if r.raw not in known
    ]
    append_lines(path, lines, durable=True)
    return len(lines)
