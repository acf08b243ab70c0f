"""The dead-letter file: scores a backend would not take, kept as JSON Lines so they can be replayed.

One line per score: ``{"sink": <sink name>, "error": <last error>, "failed_at": <ISO time>, "score": <Score>}``.
Score ids are deterministic (uuid5 of trace, span, evaluator and version), so a replay is an idempotent
upsert; :func:`read_dead_letters` keeps the last line per id so a file that holds a score twice (e.g. dead-lettered,
replayed, failed again) still delivers it once.
"""

from __future__ import annotations

import datetime as dt
import json
import threading
from collections.abc import Iterable
from pathlib import Path

from evaltrace.schema import Score

_lock = threading.Lock()


def write_dead_letters(path: Path, sink_name: str, scores: Iterable[Score], error: str | None) -> int:
    """Append ``scores`` to the dead-letter file ``path``; return how many lines were written.

    Args:
        path: The JSONL file (its directory is created when missing).
        sink_name: Name of the sink that failed to deliver them.
        scores: The undelivered scores.
        error: The last error seen, recorded on each line.

    Returns:
        The number of scores written.
    """
    failed_at = dt.datetime.now(dt.UTC).isoformat()
    lines = [
        json.dumps(
            {"sink": sink_name, "error": error, "failed_at": failed_at, "score": score.model_dump(mode="json")},
            ensure_ascii=False,
        )
        for score in scores
    ]
    if not lines:
        return 0
    path.parent.mkdir(parents=True, exist_ok=True)
    # One lock for every writer in the process: two sinks may share a file, and lines must not interleave.
    with _lock, path.open("a", encoding="utf-8") as handle:
        handle.write("\n".join(lines) + "\n")
    return len(lines)


def read_dead_letters(path: Path) -> tuple[list[Score], int]:
    """Read a dead-letter file; return the scores (one per id, last line wins, file order) and bad-line count."""
    by_id: dict[str, Score] = {}
    bad = 0
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            if not line.strip():
                continue
            try:
                record = json.loads(line)
                score = Score.model_validate(record["score"] if "score" in record else record)
            except (ValueError, KeyError, TypeError):
                bad += 1
                continue
            by_id.pop(score.id, None)
            by_id[score.id] = score
    return list(by_id.values()), bad


def rewrite_dead_letters(path: Path, sink_name: str, remaining: Iterable[Score], error: str | None) -> None:
    """Replace ``path`` with the scores still undelivered (atomically, through a temporary file)."""
    remaining = list(remaining)
    if not remaining:
        path.unlink(missing_ok=True)
        return
    tmp = path.with_name(path.name + ".tmp")
    tmp.unlink(missing_ok=True)
    write_dead_letters(tmp, sink_name, remaining, error)
    tmp.replace(path)
