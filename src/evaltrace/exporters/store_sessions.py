"""Sessions in the local store: their session-scope scores (table ``session_evals``) and summaries from ``traces``.

``session_evals`` holds one row per (session, evaluator): the latest revision of its verdict (a re-judgement
replaces the row; an older revision arriving late never overwrites a newer one). The table is created with
``CREATE TABLE IF NOT EXISTS`` by whoever writes first, so stores made by earlier versions gain it on their first
session score and read as "no session scores" until then; the store version does not change.

A session's summary (turns, first and last time, tokens, cost, user) is computed from the ``traces`` summaries
through their ``(session_id, start_time)`` index: no span is read to list sessions. A session's user is the user
of its earliest trace (by start time, then trace id) that carries one (each trace's own user follows
``store_summary``'s rule): the user who opened the conversation, not the largest value of any turn.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from evaltrace.exporters.store_db import SESSION_SCHEMA, write_transaction

if TYPE_CHECKING:  # not at run time: ``traces list`` reads the store without loading the schema models
    from evaltrace.schema import Score

__all__ = [
    "SESSION_SCHEMA",
    "SessionScoreRow",
    "SessionSummary",
    "ensure_session_table",
    "find_sessions",
    "session_scores",
    "session_trace_ids",
    "write_session_scores",
]

_UPSERT = """
INSERT INTO session_evals (session_id, evaluator, score_id, revision, outcome, value, label, comment, judged_at, data)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (session_id, evaluator) DO UPDATE SET
    score_id = excluded.score_id, revision = excluded.revision, outcome = excluded.outcome, value = excluded.value,
    label = excluded.label, comment = excluded.comment, judged_at = excluded.judged_at, data = excluded.data
WHERE excluded.revision >= session_evals.revision
"""


def ensure_session_table(conn: sqlite3.Connection) -> None:
    """Create ``session_evals`` when the store lacks it (a store of an earlier version)."""
    conn.executescript(SESSION_SCHEMA)


def _has_table(conn: sqlite3.Connection) -> bool:
    row = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'session_evals'").fetchone()
    return row is not None


def _outcome(score: Score) -> str | None:
    passed = (score.metadata or {}).get("passed")
    if isinstance(passed, bool):
        return "pass" if passed else "fail"
    return None


def _row(score: Score) -> tuple[Any, ...]:
    metadata = score.metadata or {}
    revision = metadata.get("revision")
    return (
        score.session_id,
        score.name,
        score.id,
        revision if isinstance(revision, int) else 1,
        _outcome(score),
        score.value,
        score.string_value if score.data_type != "NUMERIC" else metadata.get("label"),
        score.comment,
        score.timestamp.isoformat(),
        score.model_dump_json(),
    )


def write_session_scores(conn: sqlite3.Connection, scores: Sequence[Score]) -> int:
    """Upsert the session scores among ``scores`` in one write transaction; return how many were written."""
    rows = [_row(score) for score in scores if score.session_id is not None]
    if not rows:
        return 0

    def work(db: sqlite3.Connection) -> int:
        db.executemany(_UPSERT, rows)
        return len(rows)

    return write_transaction(conn, work)


@dataclass(frozen=True)
class SessionScoreRow:
    """One evaluator's latest verdict on a session."""

    evaluator: str
    revision: int
    outcome: str | None
    value: float | None
    label: str | None
    comment: str | None
    judged_at: str
    score_id: str

    def to_json(self) -> dict[str, Any]:
        """The stable object ``sessions show --json`` prints for this score."""
        return {
            "evaluator": self.evaluator,
            "revision": self.revision,
            "outcome": self.outcome,
            "value": self.value,
            "label": self.label,
            "comment": self.comment,
            "judged_at": self.judged_at,
            "score_id": self.score_id,
        }


@dataclass(frozen=True)
class SessionSummary:
    """One line of ``evaltrace sessions list``."""

    session_id: str
    user_id: str | None
    """The user of the session's earliest trace (by start time, then trace id) that carries one."""
    turns: int
    first_time: int
    last_time: int
    input_tokens: int
    output_tokens: int
    cost_usd: float
    errors: int
    scores: list[SessionScoreRow] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """The stable object ``evaltrace sessions list --json`` prints for this session."""
        return {
            "session_id": self.session_id,
            "user_id": self.user_id,
            "turns": self.turns,
            "first_time_ns": self.first_time,
            "last_time_ns": self.last_time,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cost_usd": self.cost_usd,
            "errors": self.errors,
            "scores": [score.to_json() for score in self.scores],
        }


# The page of sessions is chosen first (the inner query, one pass over the ``traces_session`` index), then each
# listed session's user is looked up through the same index: the correlated subquery runs once per listed session,
# not once per session of the store. A session's user is its earliest trace's (by start time, then trace id) among
# those carrying one: the turn that opened the conversation, whatever the later turns' users sort as.
_SUMMARY = """
SELECT page.session_id,
       (SELECT t.user_id FROM traces AS t
        WHERE t.session_id = page.session_id AND t.user_id IS NOT NULL
        ORDER BY t.start_time, t.trace_id LIMIT 1),
       page.turns, page.first_time, page.last_time, page.input_tokens, page.output_tokens, page.cost, page.errors
FROM (
    SELECT session_id, count(*) AS turns, min(start_time) AS first_time,
           max(start_time + duration_ns) AS last_time, sum(input_tokens) AS input_tokens,
           sum(output_tokens) AS output_tokens, sum(cost) AS cost, sum(error) AS errors,
           max(start_time) AS latest
    FROM traces WHERE session_id IS NOT NULL {where}
    GROUP BY session_id ORDER BY latest DESC LIMIT ?
) AS page
ORDER BY page.latest DESC
"""


def find_sessions(conn: sqlite3.Connection, limit: int = 20, session_id: str | None = None) -> list[SessionSummary]:
    """Summaries of the stored sessions, most recently active first, with their latest session scores."""
    where, params = ("AND session_id = ?", [session_id]) if session_id is not None else ("", [])
    rows = conn.execute(_SUMMARY.format(where=where), [*params, limit]).fetchall()
    return [
        SessionSummary(
            session_id=row[0],
            user_id=row[1],
            turns=int(row[2]),
            first_time=int(row[3]),
            last_time=int(row[4]),
            input_tokens=int(row[5] or 0),
            output_tokens=int(row[6] or 0),
            cost_usd=float(row[7] or 0.0),
            errors=int(row[8] or 0),
            scores=session_scores(conn, row[0]),
        )
        for row in rows
    ]


def session_scores(conn: sqlite3.Connection, session_id: str) -> list[SessionScoreRow]:
    """The latest verdict of each session-scope evaluator on ``session_id`` (none in a store without the table)."""
    if not _has_table(conn):
        return []
    rows = conn.execute(
        "SELECT evaluator, revision, outcome, value, label, comment, judged_at, score_id FROM session_evals "
        "WHERE session_id = ? ORDER BY evaluator",
        (session_id,),
    ).fetchall()
    return [SessionScoreRow(*row) for row in rows]


def session_trace_ids(conn: sqlite3.Connection, session_id: str, limit: int = 1000) -> list[str]:
    """The ids of the session's traces, oldest first (its turns in order)."""
    rows = conn.execute(
        "SELECT trace_id FROM traces WHERE session_id = ? ORDER BY start_time, trace_id LIMIT ?",
        (session_id, limit),
    ).fetchall()
    return [str(row[0]) for row in rows]


def score_data(raw: str) -> dict[str, Any]:
    """The stored score JSON (``session_evals.data``) as a dict; {} when unreadable."""
    try:
        value = json.loads(raw)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}
