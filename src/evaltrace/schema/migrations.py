"""Migration on read of produced records (traces.jsonl, results.jsonl lines) written by older 1.x releases.

data-model.md: within 1.x changes are additive, older files keep loading, and produced files are migrated on read
when older. Adding a field with a default is not enough when the old shape *meant* something the default
contradicts: a 1.0 result had no ``status``, so it would read as ``completed`` and its ``passed: false`` as a
failure, although the evaluator had skipped the case. Each such change gets a :class:`Migration` here.

A migration is keyed by the record's ``schema_version`` (a missing one is ``"1.0"``) and, because 1.x shape
changes keep the version, by a predicate on the record's shape. Migrations of a kind run in registry order, each
at most once, and each leaves a shape its own predicate rejects, so migrating twice changes nothing.

Records are migrated in memory, each time they are read: files are never rewritten on read (traces.jsonl is
write-once, and a reader may have no write access). A run's results.jsonl is written in the current shape the
next time the run writes it (``re-evaluate``, ``run --resume``).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from evaltrace._internal.thinking import join_thinking, split_thinking
from evaltrace.schema._base import SCHEMA_VERSION

__all__ = ["MIGRATIONS", "Migration", "MigratedRecord", "RecordKind", "migrate_record"]

RecordKind = Literal["trace", "result"]
"""What a record is: a Trace (traces.jsonl) or an EvaluationResult (results.jsonl)."""

_DEFAULT_VERSION = "1.0"
# Namespace of the evaluation ids given to 1.0 results that had none: the same record always gets the same id.
_ID_NAMESPACE = uuid.UUID("6f1c2a1e-0d7b-4f55-9a43-51b1c0e7e7a1")
_SKIP_PREFIX = "skipped"


@dataclass(frozen=True)
class Migration:
    """One upgrade step of a produced record.

    Attributes:
        kind: The kind of record it upgrades.
        name: What it does, for logs and tests.
        from_version: The ``schema_version`` of the records it applies to.
        applies: Whether a record of that version has the old shape.
        upgrade: Returns the upgraded record (a new mapping; the input is not modified).
        to_version: The ``schema_version`` of the result (the same for a shape change within a version).
    """

    kind: RecordKind
    name: str
    from_version: str
    applies: Callable[[Mapping[str, Any]], bool]
    upgrade: Callable[[dict[str, Any]], dict[str, Any]]
    to_version: str = SCHEMA_VERSION


@dataclass(frozen=True)
class MigratedRecord:
    """A record after migration and the names of the migrations applied to it (empty: it was current)."""

    data: dict[str, Any]
    applied: tuple[str, ...]


def _result_without_status(record: Mapping[str, Any]) -> bool:
    return "status" not in record


def _is_skip(record: Mapping[str, Any]) -> bool:
    # 1.0 evaluators marked a skip in detail["skipped"] (the reason) and prefixed the reason with "skipped".
    detail = record.get("detail")
    if isinstance(detail, Mapping) and "skipped" in detail:
        return True
    reason = record.get("reason")
    return isinstance(reason, str) and reason.lower().startswith(_SKIP_PREFIX)


def _add_status(record: dict[str, Any]) -> dict[str, Any]:
    """1.0 result -> status: an error means the evaluation failed, a skip marker skipped, else completed."""
    if record.get("error") is not None:
        status = "failed"
    elif _is_skip(record):
        status = "skipped"
    else:
        status = "completed"
    upgraded = {**record, "status": status}
    if not upgraded.get("evaluation_id"):
        # 1.0 had no evaluation id; a stable one keeps two reads of the same file equal.
        key = "\x1f".join(str(record.get(k, "")) for k in ("run_id", "case_id", "variant_name", "evaluator"))
        upgraded["evaluation_id"] = f"eval_{uuid.uuid5(_ID_NAMESPACE, key)}"
    return upgraded


def _inline(text: Any) -> bool:
    return isinstance(text, str) and ("<think>" in text or "</think>" in text)


def _has_inline_thinking(record: Mapping[str, Any]) -> bool:
    output = record.get("output")
    if isinstance(output, Mapping) and _inline(output.get("final_answer")):
        return True
    messages = record.get("messages")
    return isinstance(messages, list) and any(
        isinstance(m, Mapping) and m.get("role") == "assistant" and _inline(m.get("content")) for m in messages
    )


def _split_message(message: Any) -> Any:
    if not (isinstance(message, Mapping) and message.get("role") == "assistant" and _inline(message.get("content"))):
        return message
    split = split_thinking(message["content"])
    return {
        **message,
        "content": split.answer or None,
        "thinking": join_thinking(message.get("thinking"), *split.thoughts),
    }


def _split_inline_thinking(record: dict[str, Any]) -> dict[str, Any]:
    """1.0 trace with ``<think>`` reasoning inside the answer text -> reasoning in the ``thinking`` fields."""
    upgraded = dict(record)
    output = record.get("output")
    if isinstance(output, Mapping) and _inline(output.get("final_answer")):
        split = split_thinking(output["final_answer"])
        thinking = join_thinking(output.get("thinking"), *split.thoughts)
        upgraded["output"] = {**output, "final_answer": split.answer or None, "thinking": thinking}
    if isinstance(record.get("messages"), list):
        upgraded["messages"] = [_split_message(m) for m in record["messages"]]
    return upgraded


MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        kind="result",
        name="1.0 result without status: status from error / skip marker / verdict",
        from_version="1.0",
        applies=_result_without_status,
        upgrade=_add_status,
    ),
    Migration(
        kind="trace",
        name="1.0 trace with inline <think> in its answer or assistant messages: moved to thinking",
        from_version="1.0",
        applies=_has_inline_thinking,
        upgrade=_split_inline_thinking,
    ),
)
"""Every migration, in the order they run."""


def migrate_record(
    kind: RecordKind, record: Mapping[str, Any], migrations: tuple[Migration, ...] = MIGRATIONS
) -> MigratedRecord:
    """Upgrade one produced record to the current shape.

    Args:
        kind: What the record is.
        record: The record as parsed from its JSON line.
        migrations: The registry (tests pass their own).

    Returns:
        The upgraded record and the names of the migrations applied, in order.
    """
    data = dict(record)
    applied: list[str] = []
    for migration in migrations:
        version = str(data.get("schema_version") or _DEFAULT_VERSION)
        if migration.kind == kind and version == migration.from_version and migration.applies(data):
            data = {**migration.upgrade(data), "schema_version": migration.to_version}
            applied.append(migration.name)
    return MigratedRecord(data, tuple(applied))
