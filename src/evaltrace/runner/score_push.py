"""Scores of an offline run, pushed to the score sinks of eval.yaml's ``sinks:`` (and ``--sink``).

A finished run becomes scores on three kinds of target (scores-data-model: a score references exactly one):

* each judged result (status ``completed``) on the trace of its case, by its OTel trace id: the same id
  (:func:`~evaltrace.schema.score_id`) live evaluation of that trace would give, so backends upsert;
* a session-scope result (a simulated-user conversation, ``metadata.scope == "session"``) on its session;
* each variant is a dataset run, ``<run_id>/<variant>``: one score per evaluator, its pass rate over judged
  results, and a ``pass_rate`` score for the variant's cases. Where nothing was judged there is no score (a 0
  would read as a real verdict in dashboards).

Errored and skipped evaluations give no score. Delivery goes through :class:`SinkWorker` (batches, retries with
backoff); what a sink does not take by the deadline is written to ``<run>/dead-letter/<sink>.jsonl`` for
``evaltrace scores replay``, and reported as a failed output (the CLI exits 3), never losing the run.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from evaltrace.evaluation.sinks.base import ScoreSink
from evaltrace.exceptions import ConfigError
from evaltrace.schema import EvaluationResult, RunSummary, Score, Trace, dataset_run_score_id

__all__ = ["DEAD_LETTER_DIR", "SINK_SPEC_FORMS", "check_sink_spec", "push_scores", "run_scores"]

DEAD_LETTER_DIR = "dead-letter"
"""Folder of a run directory holding the scores a sink did not take."""

SINK_SPEC_FORMS = "jsonl:PATH, langfuse, phoenix or phoenix:URL"

VARIANT_SCORE = "pass_rate"
"""Name of a dataset run's own score: its cases' pass rate (the evaluators' scores carry their names)."""

_DEADLINE_S = 30.0
"""Longest wait per sink for its scores to be delivered; the rest is dead-lettered (the run is never held)."""


def check_sink_spec(spec: Any) -> str:
    """Return ``spec`` if it is a sink spec (``jsonl:PATH``, ``langfuse``, ``phoenix[:URL]``).

    Raises:
        ValueError: It is not, with the forms that are.
    """
    if isinstance(spec, str):
        kind, sep, arg = spec.partition(":")
        if (kind == "jsonl" and arg) or (kind == "langfuse" and not sep) or kind == "phoenix":
            return spec
    raise ValueError(f"unknown score sink {spec!r}; expected one of: {SINK_SPEC_FORMS}")


def run_scores(summary: RunSummary, traces: Sequence[Trace], results: Sequence[EvaluationResult]) -> list[Score]:
    """The scores of a finished run: per judged result (trace or session), then per variant (dataset run)."""
    from evaltrace.evaluation._session_jobs import session_result_to_score
    from evaltrace.evaluation.convert import result_to_score

    trace_ids = {(t.case_id, t.variant_name): t.extra.get("trace_id") for t in traces}
    scores: list[Score] = []
    for result in results:
        if result.status != "completed":
            continue
        where = {"run_id": summary.run_id, "case_id": result.case_id, "variant": result.variant_name}
        metadata = result.metadata or {}
        session = metadata.get("session_id")
        trace_id = trace_ids.get((result.case_id, result.variant_name))
        score: Score | None = None
        if metadata.get("scope") == "session" and isinstance(session, str) and session:
            score = session_result_to_score(result, session, 0)
        elif isinstance(trace_id, str) and trace_id:
            score = result_to_score(result, trace_id, None)
        if score is not None:
            scores.append(score.model_copy(update={"metadata": {**(score.metadata or {}), **where}}))
    return scores + _dataset_run_scores(summary)


def _dataset_run_scores(summary: RunSummary) -> list[Score]:
    scores: list[Score] = []
    for variant in summary.variants:
        dataset_run = f"{summary.run_id}/{variant.name}"
        figures: list[tuple[str, float | None, int | None, int | None, float | None]] = [
            (VARIANT_SCORE, variant.pass_rate, variant.cases_passed, variant.cases_failed, None)
        ]
        for rollup in summary.by_evaluator:
            cell = rollup.by_variant.get(variant.name)
            if cell is not None:
                figures.append((rollup.evaluator, cell.pass_rate, cell.passed, cell.failed, cell.avg_score))
        for name, rate, passed, failed, avg in figures:
            if rate is None:
                continue  # nothing judged: no figure, rather than a 0 that reads as "all failed"
            metadata: dict[str, Any] = {"run_id": summary.run_id, "variant": variant.name, "passed": passed}
            metadata["failed"] = failed
            if avg is not None:
                metadata["avg_score"] = avg
            scores.append(
                Score(
                    id=dataset_run_score_id(dataset_run, name),
                    name=name,
                    value=rate,
                    dataset_run_id=dataset_run,
                    comment=f"pass rate over judged cases of {variant.name} in run {summary.run_id}",
                    source="EVAL",
                    timestamp=summary.finished_at,
                    metadata={k: v for k, v in metadata.items() if v is not None},
                )
            )
    return scores


def _sinks(specs: Sequence[str | ScoreSink]) -> list[ScoreSink]:
    from evaltrace.worker.loading import build_sinks

    named = [s for s in specs if isinstance(s, str)]
    built = iter(build_sinks([check_sink_spec(s) for s in named]))
    return [next(built) if isinstance(s, str) else s for s in specs]


def push_scores(
    specs: Sequence[str | ScoreSink], scores: Sequence[Score], run_path: Path
) -> tuple[list[str], list[str]]:
    """Deliver ``scores`` to every sink; a sink that fails does not stop the others.

    Args:
        specs: Sink specs (``jsonl:PATH``, ``langfuse``, ``phoenix[:URL]``) or sink objects.
        scores: The scores.
        run_path: The run directory; undelivered scores go to its ``dead-letter/`` folder.

    Returns:
        (one line per sink that took every score, one message per sink that did not, naming it, how many
        scores it missed, where they are kept and the command that delivers them).
    """
    from evaltrace.evaluation.sinks.worker import RetryPolicy, SinkWorker

    delivered: list[str] = []
    failed: list[str] = []
    try:
        sinks = _sinks(specs)
    except (ConfigError, ValueError) as exc:
        return [], [f"score sinks: {exc}"]
    for index, sink in enumerate(sinks):
        suffix = f"-{index}" if sum(s.name == sink.name for s in sinks[:index]) else ""
        dead = run_path / DEAD_LETTER_DIR / f"{sink.name}{suffix}.jsonl"
        # Short backoffs: the user waits for the command; what is still refused is kept for a replay.
        worker = SinkWorker(
            sink,
            schedule_delay_s=0.05,
            retry=RetryPolicy(max_retries=3, initial_backoff_s=0.2, max_backoff_s=2.0, max_retry_after_s=10.0),
            dead_letter_path=dead,
        )
        worker.submit(scores)
        worker.shutdown(_DEADLINE_S)
        missed = len(scores) - worker.stats.successes
        if not missed:
            delivered.append(f"score sink {sink.name} ({len(scores)} scores)")
            continue
        kept = f"kept in {dead}" if worker.stats.dead_lettered else "lost (no dead-letter file could be written)"
        failed.append(
            f"score sink {sink.name}: {missed} of {len(scores)} score(s) not delivered, {kept};"
            f" deliver them with `evaltrace scores replay {dead} --sink {sink.name}`"
        )
    return delivered, failed
