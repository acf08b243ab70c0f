"""Local stores of synthetic traces for the backfill tests, written through the store's own bulk writer."""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.trace import set_span_in_context

from evaltrace.exporters import LocalStoreExporter
from evaltrace.exporters.store_db import DB_NAME

if TYPE_CHECKING:
    from evaltrace.backfill import BackfillReport


def agent_spans(count: int, sessions: int = 0, resource: dict[str, str] | None = None) -> list[ReadableSpan]:
    """``count`` traces of an agent span (question, answer) with a tool span under it.

    With ``sessions``, trace ``i`` belongs to session ``s{i % sessions}``.
    """
    tracer = TracerProvider(resource=Resource({"service.name": "svc", **(resource or {})})).get_tracer("backfill-test")
    spans: list[ReadableSpan] = []
    for index in range(count):
        attributes = {
            "evaltrace.span.kind": "agent",
            "gen_ai.agent.name": "helper",
            "input.value": f"question {index}",
            "output.value": "ok" if index % 2 else f"answer {index}",
        }
        if sessions:
            attributes["session.id"] = f"s{index % sessions}"
        root = tracer.start_span("invoke_agent helper", attributes=attributes)
        tool = tracer.start_span(
            "execute_tool lookup",
            context=set_span_in_context(root),
            attributes={"evaltrace.span.kind": "tool", "gen_ai.tool.name": "lookup"},
        )
        tool.end()
        root.end()
        spans += [s for s in (tool, root) if isinstance(s, ReadableSpan)]
    return spans


def build_store(directory: Path, count: int, sessions: int = 0) -> None:
    """Write ``count`` traces to a local store in one batch (the writer's bulk statements)."""
    exporter = LocalStoreExporter(directory, writer="thread", max_age_s=0, max_bytes=0)
    exporter.export(agent_spans(count, sessions))
    exporter.shutdown()


def evaluation_spans(store: Path) -> list[tuple[object, ...]]:
    """Each stored evaluation span's (evaluator, label, explanation, status): a refusal never reads as an error."""
    with sqlite3.connect(store / DB_NAME) as conn:
        rows = [
            (json.loads(data)["attributes"], status) for data, status in conn.execute("SELECT data, status FROM spans")
        ]
    keys = ("gen_ai.evaluation.name", "gen_ai.evaluation.score.label", "gen_ai.evaluation.explanation")
    return sorted(
        (*(attributes.get(key) for key in keys), status)
        for attributes, status in rows
        if attributes.get("evaltrace.span.kind") == "evaluation"
    )


def stored_reasons(store: Path) -> dict[str, dict[str, int]]:
    """``{evaluator: {reason: count}}`` of the not-evaluated results the store holds (their evaluation spans)."""
    counts: Counter[tuple[str, str]] = Counter()
    for name, label, explanation, _ in evaluation_spans(store):
        if label == "not_evaluated":
            counts[(str(name), str(explanation))] += 1
    by_evaluator: dict[str, dict[str, int]] = {}
    for (name, reason), count in counts.items():
        by_evaluator.setdefault(name, {})[reason] = count
    return by_evaluator


def stored_reason_keys(store: Path) -> dict[str, dict[str, int]]:
    """:func:`stored_reasons` keyed as a report keys them (codes and tokens; free text under ``other``)."""
    from evaltrace.evaluation.skip_reasons import count_skip_reason, skip_reason_key

    keyed: dict[str, dict[str, int]] = {}
    for name, reasons in stored_reasons(store).items():
        for reason, count in reasons.items():
            count_skip_reason(keyed.setdefault(name, {}), skip_reason_key(reason), count)
    return keyed


def assert_consistent(report: BackfillReport) -> None:
    """Both breakdowns sum to the ``not_evaluated`` outcome, and the total one is the per-evaluator one summed."""
    total = report.outcomes.get("not_evaluated", 0)
    assert sum(report.not_evaluated_by_reason.values()) == total
    assert sum(sum(r.values()) for r in report.not_evaluated_by_evaluator.values()) == total
    summed: Counter[str] = Counter()
    for reasons in report.not_evaluated_by_evaluator.values():
        summed.update(reasons)
    assert dict(summed) == report.not_evaluated_by_reason
