"""A record of an evaluation that was never run (cut short at shutdown), for files where scores are looked for.

A failed or skipped evaluation produces no score (a 0 would read as a verdict), so a trace whose evaluation the
shutdown deadline cut short would look, in a score file, as if nobody ever meant to evaluate it. Such an
evaluation leaves one JSON line instead, never a score: ``{"not_evaluated": {"trace_id", "observation_id",
"span_id", "evaluator", "evaluator_version", "reason", "at", "record_id"}}``. The JSONL sink writes it into its
file, other sinks into their dead-letter file; ``evaltrace scores replay`` never sends one (it keeps it in the file).

``record_id`` is random, drawn once per record: two records of the same evaluation of the same span (two runs cut
short in the same microsecond, say) stay two, while copies of one record (a dead-letter file replayed twice, or a
record written to both a sink's file and its dead-letter file) share it and are kept once. Records written before
it existed have none; a replay keeps one of each identical line of those.
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from dataclasses import asdict, dataclass, field
from typing import Any

NOT_EVALUATED_KEY = "not_evaluated"


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat()


def _new_record_id() -> str:
    return uuid.uuid4().hex


@dataclass(frozen=True)
class NotEvaluated:
    """One evaluation that was not run, and why.

    Attributes:
        trace_id: 32-hex trace id.
        observation_id: 16-hex span id its score would have targeted; None for a trace-level evaluator.
        span_id: 16-hex id of the evaluated span.
        evaluator: Evaluator name.
        evaluator_version: Evaluator version, if it has one.
        reason: The skip reason code (``shutdown``).
        at: ISO 8601 UTC time it was recorded.
        record_id: Random id of this record (32 hex digits): its copies share it, no other record does.
    """

    trace_id: str
    observation_id: str | None
    span_id: str
    evaluator: str
    evaluator_version: str | None
    reason: str
    at: str = field(default_factory=_now)
    record_id: str = field(default_factory=_new_record_id)

    def to_line(self) -> str:
        """The record as one JSON line (no newline)."""
        return json.dumps({NOT_EVALUATED_KEY: asdict(self)}, ensure_ascii=False)


class NotEvaluatedPartlyWritten(OSError):
    """A sink's ``record_not_evaluated`` wrote the first ``written`` records whole, then failed (from ``cause``).

    The sink worker then dead-letters only the records after them, so no record is in two files.

    Args:
        written: How many of the records, from the first, are in the sink's file, each on a whole line.
        cause: The error that stopped the write.
    """

    def __init__(self, written: int, cause: BaseException) -> None:
        super().__init__(f"{written} record(s) written, then {type(cause).__name__}: {cause}")
        self.written = written


def is_not_evaluated_line(record: Any) -> bool:
    """Whether a decoded JSON line is a :class:`NotEvaluated` record (not a score, not a bad line)."""
    return isinstance(record, dict) and isinstance(record.get(NOT_EVALUATED_KEY), dict) and "score" not in record


def record_key(record: Any, line: str) -> str:
    """What copies of one not-evaluated record share: its ``record_id``, else (an older record) its whole line.

    Args:
        record: The decoded line (:func:`is_not_evaluated_line` holds).
        line: The line as written.
    """
    record_id = record[NOT_EVALUATED_KEY].get("record_id")
    if isinstance(record_id, str) and record_id:
        return "id:" + record_id
    return "line:" + line
