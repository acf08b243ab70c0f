"""Re-judge stored traces: the loop behind ``evaltrace evaluate`` and :func:`evaltrace.evaluate_traces`.

Units (a trace, or a session) are judged a batch at a time, up to ``concurrency`` evaluations at once. Each
evaluation runs as live ones do (:func:`~evaltrace.evaluation.arun_evaluator`, with the evaluator's timeout, the
rate limits and judge budgets of :class:`~evaltrace.evaluation.limits.LimitGate`). After a batch, its results are
written to the local store and settled by the score sinks (delivered, or dead-lettered and counted
``undelivered``), then its units are added to the checkpoint: a killed backfill resumes after the last finished
batch, and what it judges again replaces the same rows.

Rate limits wait rather than skip (a backfill has time); a judge budget that runs out stops the backfill, with
what was not judged left for a later run of the same command.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from evaltrace._internal import semconv
from evaltrace._internal.daemon_pool import DaemonExecutor
from evaltrace._internal.errors import ErrorEpisode
from evaltrace.backfill.checkpoint import Checkpoint, describe_options
from evaltrace.backfill.results import result_score, result_span
from evaltrace.backfill.sources import TraceSource, session_of
from evaltrace.backfill.units import Target, Unit, session_unit, trace_unit
from evaltrace.evaluation.convert import JUDGED, result_outcome, skip_reason
from evaltrace.evaluation.evaluator import EvaluatorSpec
from evaltrace.evaluation.limits import OVER_BUDGET, RATE_LIMITED, LimitGate
from evaltrace.evaluation.runner import RunOptions, arun_evaluator, is_async_evaluator, skipped_result
from evaltrace.evaluation.skip_reasons import count_skip_reason, skip_reason_key
from evaltrace.evaluation.spend import judge_usage
from evaltrace.exceptions import EvaltraceError
from evaltrace.schema import EvaluationResult, Score

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan
    from opentelemetry.sdk.trace.export import SpanExporter

    from evaltrace.evaluation.sinks.local_store import LocalStoreSessionSink
    from evaltrace.evaluation.sinks.worker import SinkWorker

__all__ = [
    "Answer",
    "BackfillReport",
    "BackfillStoreError",
    "BatchJudge",
    "BudgetStop",
    "Judging",
    "merge_reports",
    "record_unit",
    "run_backfill",
    "units_of",
]

logger = logging.getLogger("evaltrace.backfill")
MAPPING_FAILED = "mapping_failed"
_RATE_WAIT_S = 0.05


class BackfillStoreError(EvaltraceError):
    """The local store refused the results of a batch: the backfill stops (resume once the store is fixed)."""


@dataclass
class BackfillReport:
    """What a backfill judged (or, with ``dry_run``, would judge).

    Attributes:
        traces: Traces selected.
        spans: Spans judged: the matching spans at span scope, the roots at trace scope, the turns at session scope.
        sessions: Sessions judged (session scope only).
        evaluations: Evaluations run (one per evaluator and judged span, trace or session).
        outcomes: Evaluations by outcome: ``pass``, ``fail``, ``error``, ``not_evaluated``.
        not_evaluated_by_reason: The ``not_evaluated`` outcomes by skip reason, keyed as
            ``stats()["skipped_by_reason"]`` is: evaltrace's own codes (``limits_unavailable``, ``mapping_failed``,
            ``overloaded``, ``no_answer``, ``skipped`` for none...) and an evaluator's identifier-like reasons
            (``no_reference``: ``^[a-z][a-z0-9_.-]{0,63}$``, the first 32), every other reason (free text, which
            may name what was judged) under ``other``; its counts sum to ``outcomes["not_evaluated"]``. The free
            text is on the result's evaluation span in the store (span or trace scope), redacted as the rest.
        not_evaluated_by_evaluator: The same per evaluator: ``{evaluator: {reason: count}}``, only the evaluators
            (and reasons) with a count.
        scores_rejected: Verdicts whose score the evaluator's ScoreConfig refused (each logged): not sent to the
            sinks, nor stored as a session score; a span or trace verdict is still stored on its evaluation span.
        resumed: Units (traces or sessions) skipped because a killed run had finished them already.
        without_session: Traces skipped at session scope because they carry no ``session.id``.
        stopped: Why the backfill stopped early (``over_budget``), None when it finished.
        estimated_cost_usd: ``dry_run``: an estimate of the judges' cost (None when no judge model has a price).
        judge_models: ``dry_run``: the models the evaluators' judges call.
        unpriced_models: ``dry_run``: judge models genai-prices has no price for.
        dry_run: Nothing was judged or written.
        undelivered: Scores a sink did not take: dead-lettered (to its dead-letter file) or, without one, dropped.
        scopes: The scopes judged at (``session`` for conversation-only evaluators unless one was given).
        estimated_judge_calls: ``dry_run``: the judge calls the estimate counts.
        estimated_input_tokens: ``dry_run``: the input tokens it counts (characters sent / 4).
    """

    traces: int = 0
    spans: int = 0
    sessions: int = 0
    evaluations: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)
    resumed: int = 0
    without_session: int = 0
    stopped: str | None = None
    estimated_cost_usd: float | None = None
    judge_models: list[str] = field(default_factory=list)
    unpriced_models: list[str] = field(default_factory=list)
    dry_run: bool = False
    undelivered: int = 0
    scopes: list[str] = field(default_factory=list)
    estimated_judge_calls: int = 0
    estimated_input_tokens: int = 0
    not_evaluated_by_reason: dict[str, int] = field(default_factory=dict)
    not_evaluated_by_evaluator: dict[str, dict[str, int]] = field(default_factory=dict)
    scores_rejected: int = 0

    @property
    def failed(self) -> int:
        """Evaluations whose verdict was a fail."""
        return self.outcomes.get("fail", 0)


def _count_not_evaluated(report: BackfillReport, evaluator: str, key: str | None, count: int = 1) -> None:
    """Add ``count`` evaluations of ``evaluator`` not evaluated under ``key`` to both breakdowns of ``report``.

    ``key`` is :func:`skip_reason_key` of the reason (None: ``other``), or a key of another report when merging;
    each breakdown is capped as ``stats()["skipped_by_reason"]`` is (codes, at most 32 tokens, ``other``).
    """
    count_skip_reason(report.not_evaluated_by_reason, key, count)
    count_skip_reason(report.not_evaluated_by_evaluator.setdefault(evaluator, {}), key, count)


def merge_reports(reports: Sequence[BackfillReport], scopes: Sequence[str]) -> BackfillReport:
    """One report of the passes of a backfill (one per scope) over the same selection."""
    if len(reports) == 1:
        reports[0].scopes = list(scopes)
        return reports[0]
    merged = BackfillReport(traces=max(r.traces for r in reports), dry_run=reports[0].dry_run, scopes=list(scopes))
    for r in reports:
        merged.spans += r.spans
        merged.sessions += r.sessions
        merged.evaluations += r.evaluations
        merged.resumed += r.resumed
        merged.without_session += r.without_session
        merged.undelivered += r.undelivered
        merged.scores_rejected += r.scores_rejected
        merged.estimated_judge_calls += r.estimated_judge_calls
        merged.estimated_input_tokens += r.estimated_input_tokens
        merged.stopped = merged.stopped or r.stopped
        for outcome, count in r.outcomes.items():
            merged.outcomes[outcome] = merged.outcomes.get(outcome, 0) + count
        for evaluator, reasons in r.not_evaluated_by_evaluator.items():
            for reason, count in reasons.items():
                _count_not_evaluated(merged, evaluator, reason, count)
        merged.judge_models += [m for m in r.judge_models if m not in merged.judge_models]
        merged.unpriced_models += [m for m in r.unpriced_models if m not in merged.unpriced_models]
    costs = [r.estimated_cost_usd for r in reports if r.estimated_cost_usd is not None]
    merged.estimated_cost_usd = sum(costs) if costs else None
    return merged


def units_of(
    source: TraceSource, specs: Sequence[EvaluatorSpec], scope: str, trace_ids: Sequence[str], report: BackfillReport
) -> Iterator[Unit]:
    """The units to judge, one trace (or session) at a time; sessions are gathered from their selected traces."""
    if scope != "session":
        for trace_id in trace_ids:
            yield trace_unit(trace_id, source.spans(trace_id), specs, scope)
        return
    seen: set[str] = set()
    read = 0  # selected traces read since the last unit: the progress counts them, in the unit that follows
    for trace_id in trace_ids:
        read += 1
        session = session_of(source.spans(trace_id))
        if session is None:
            report.without_session += 1
            continue
        if session in seen:
            continue
        seen.add(session)
        members = [(t, source.spans(t)) for t in source.session_trace_ids(session)]
        unit = session_unit(session, members, specs)
        unit.selected, read = read, 0
        yield unit


class BudgetStop(Exception):
    """A judge budget ran out."""


@dataclass
class _Done:
    spans: list[ReadableSpan] = field(default_factory=list)
    scores: list[Score] = field(default_factory=list)
    finished: list[str] = field(default_factory=list)


class Judging:
    """The evaluation side: where each evaluator runs, the limits, and the run options."""

    def __init__(
        self,
        specs: Sequence[EvaluatorSpec],
        gate: LimitGate,
        concurrency: int,
        timeout_s: float | None,
        fatal: tuple[type[BaseException], ...] = (),
    ) -> None:
        self.gate = gate
        self.fatal = fatal  # the gate's errors that are not the limiter failing (Ray's lost actor: retried)
        self.failing: dict[str, ErrorEpisode] = {}  # evaluator name -> its limiter's failures
        self.timeout_s = timeout_s
        self.slots = asyncio.Semaphore(concurrency)
        self.pools: dict[int, DaemonExecutor | None] = {}
        for spec in specs:
            gate.register(spec.evaluator.name, spec.limits)
            sync = not spec.inline and not is_async_evaluator(spec.evaluator)
            self.pools[id(spec)] = (
                DaemonExecutor(concurrency, thread_name_prefix="evaltrace-backfill") if sync else None
            )

    def close(self) -> None:
        """Let the sync evaluators' pools go (nothing is joined)."""
        for pool in self.pools.values():
            if pool is not None:
                pool.shutdown(wait=False, cancel_futures=True)

    async def admit(self, name: str) -> bool:
        """Wait out the rate limit; raise :class:`BudgetStop` when a budget is spent.

        Returns False when the limiter itself fails (a ``limits_clock`` that raises, a bug of ours): as live
        evaluation, only this evaluation is refused (``limits_unavailable``), never run unchecked nor the backfill
        stopped; logged once per episode.
        """
        if not self.gate.active:
            return True
        while True:
            try:
                reason = self.gate.admit(name)
            except self.fatal:
                raise
            except Exception:
                self._episode(name).failed()
                return False
            if name in self.failing:
                self.failing[name].ok()
            if reason is None:
                return True
            if reason == OVER_BUDGET:
                raise BudgetStop
            assert reason == RATE_LIMITED
            await asyncio.sleep(_RATE_WAIT_S)

    async def judge(self, target: Target, spec: EvaluatorSpec) -> EvaluationResult:
        """Judge ``target`` with ``spec`` under the limits (raise :class:`BudgetStop` when a budget is spent)."""
        if target.judged is None:
            return skipped_result(spec.evaluator, MAPPING_FAILED)
        name = spec.evaluator.name
        timeout = spec.timeout_s if spec.timeout_s is not None else self.timeout_s
        async with self.slots, contextlib.AsyncExitStack() as stack:
            # Admitted once a slot is free: a budget is overshot by at most the evaluations running at once.
            if not await self.admit(name):
                return skipped_result(spec.evaluator, semconv.SKIP_LIMITS_UNAVAILABLE)
            if self.gate.active:
                await stack.enter_async_context(self.gate.slot(name))
            result = await arun_evaluator(
                spec.evaluator,
                target.judged,  # type: ignore[arg-type]  # a Conversation at session scope: Evaluator is duck-typed
                None,
                options=RunOptions(timeout_s=timeout),
                executor=self.pools[id(spec)],
            )
        try:  # bookkeeping after the verdict: its failure never takes the verdict with it (nor the backfill)
            usage = judge_usage(result) if result.detail else None
            if usage is not None:
                self.gate.charge(name, usage.input_tokens + usage.output_tokens, usage.cost_usd)
        except self.fatal:
            raise
        except Exception:
            self._episode(name).failed()
        return result

    def _episode(self, name: str) -> ErrorEpisode:
        """The episode of evaluator ``name``'s limiter failing (admission and charge: one clock, one episode)."""
        episode = self.failing.get(name)
        if episode is None:
            what = f"checking or charging the rate limits and budgets of evaluator {name!r}"
            episode = self.failing.setdefault(name, ErrorEpisode(what))
        return episode


async def _judge_unit(
    judging: Judging, unit: Unit, scope: str, report: BackfillReport, done: _Done, source_in_store: bool
) -> None:
    """Judge every target of ``unit``; its results join ``done`` (a budget stop leaves the unit unfinished)."""

    async def one(target: Target, spec: EvaluatorSpec) -> tuple[Target, EvaluatorSpec, EvaluationResult | None]:
        try:
            return target, spec, await judging.judge(target, spec)
        except BudgetStop:
            return target, spec, None

    pairs = [(target, spec) for target in unit.targets for spec in target.specs]
    answers = await asyncio.gather(*(one(target, spec) for target, spec in pairs))
    record_unit(unit, answers, scope, report, done, source_in_store)


Answer = tuple[Target, EvaluatorSpec, EvaluationResult | None]
"""A target, an evaluator, and its result (None: a spent budget stopped it)."""


def record_unit(
    unit: Unit, answers: Sequence[Answer], scope: str, report: BackfillReport, done: _Done, source_in_store: bool
) -> None:
    """Count a judged unit's results and add their spans and scores to ``done`` (the unit too, when complete)."""
    complete = all(result is not None for _, _, result in answers)
    if any(result is not None for _, _, result in answers) and not source_in_store:
        done.spans.extend(unit.spans)  # the trace next to its results
    for target, spec, result in answers:
        if result is None:
            continue
        report.evaluations += 1
        outcome = result_outcome(result)
        report.outcomes[outcome] = report.outcomes.get(outcome, 0) + 1
        if outcome == semconv.OUTCOME_NOT_EVALUATED:  # the Ray engine's answers are counted here too
            _count_not_evaluated(report, result.evaluator, skip_reason_key(skip_reason(result)))
        span = result_span(target, scope, result)
        if span is not None:
            done.spans.append(span)
        score = result_score(target, scope, spec, result)
        if score is not None:
            done.scores.append(score)
        elif outcome in JUDGED:  # a verdict whose score its ScoreConfig refused (logged by result_score): counted
            report.scores_rejected += 1
    if complete:
        done.finished.append(unit.key)
    else:
        report.stopped = OVER_BUDGET


@dataclass
class Outputs:
    """Where results go: the store's exporter (and its session scores), the sink workers, a redaction of scores."""

    exporter: SpanExporter
    sinks: Sequence[SinkWorker] = ()
    redact: Callable[[Score], Score] | None = None
    flush_timeout_s: float = 30.0
    session_store: LocalStoreSessionSink | None = None
    """Writes session scores to the store's ``session_evals`` (live's upsert by session and evaluator)."""


def _deliver(outputs: Outputs, done: _Done, report: BackfillReport) -> None:
    """Store the batch's spans (synchronously), then hand its scores to the sinks and wait for them."""
    from opentelemetry.sdk.trace.export import SpanExportResult

    if done.spans and outputs.exporter.export(done.spans) is not SpanExportResult.SUCCESS:
        raise BackfillStoreError("the local store refused a batch of results (see the warning above)")
    scores = [outputs.redact(s) for s in done.scores] if outputs.redact is not None else done.scores
    sessions = [s for s in scores if s.session_id is not None]
    if sessions and outputs.session_store is not None:
        written = outputs.session_store.export(sessions)
        if written.error is not None:
            raise BackfillStoreError(f"the local store refused a batch of session scores: {written.error}")
    if scores:
        before = sum(w.stats.dead_lettered + w.stats.dropped for w in outputs.sinks)
        for worker in outputs.sinks:
            worker.submit(scores)
        for worker in outputs.sinks:
            if not worker.force_flush(outputs.flush_timeout_s):  # not checkpointed: a later run delivers them
                raise BackfillStoreError(
                    f"score sink {worker.sink.name!r} did not deliver a batch within {outputs.flush_timeout_s:g} s"
                )
        # Settled, but not necessarily delivered: what a sink refused is counted (and in its dead-letter file).
        report.undelivered += sum(w.stats.dead_lettered + w.stats.dropped for w in outputs.sinks) - before


class BatchJudge(Protocol):
    """Judges a batch of units elsewhere (the Ray engine); the answers of each unit, in the batch's order."""

    def __call__(self, batch: Sequence[Unit]) -> list[list[Answer]]:
        """Judge every target of every unit of ``batch``."""
        ...


async def _run_batches(
    units: Iterator[Unit],
    judging: Judging,
    scope: str,
    checkpoint: Checkpoint,
    outputs: Outputs,
    report: BackfillReport,
    batch_size: int,
    on_unit: Callable[[Unit], None] | None,
    source_in_store: bool,
    remote: BatchJudge | None = None,
) -> None:
    while report.stopped is None:
        batch: list[Unit] = []
        for unit in units:
            if unit.key in checkpoint.done:
                report.resumed += 1
                if on_unit is not None:
                    on_unit(unit)
                continue
            batch.append(unit)
            if len(batch) >= batch_size:
                break
        if not batch:
            return
        done = _Done()
        if remote is not None:
            for unit, answers in zip(batch, remote(batch), strict=True):
                record_unit(unit, answers, scope, report, done, source_in_store)
        else:
            await asyncio.gather(*(_judge_unit(judging, u, scope, report, done, source_in_store) for u in batch))
        for unit in batch:
            _count(unit, scope, report)
        _deliver(outputs, done, report)
        checkpoint.add(done.finished)
        if on_unit is not None:
            for unit in batch:
                on_unit(unit)


def _count(unit: Unit, scope: str, report: BackfillReport) -> None:
    if scope == "session":
        report.sessions += 1 if unit.targets else 0
        report.spans += unit.traces if unit.targets else 0
    else:
        report.spans += len(unit.targets)


def run_backfill(
    units: Iterator[Unit],
    specs: Sequence[EvaluatorSpec],
    *,
    scope: str,
    checkpoint: Checkpoint,
    outputs: Outputs,
    report: BackfillReport,
    gate: LimitGate,
    concurrency: int,
    timeout_s: float | None,
    source_in_store: bool,
    on_unit: Callable[[Unit], None] | None = None,
    batch_size: int | None = None,
    remote: BatchJudge | None = None,
) -> BackfillReport:
    """Judge ``units`` and deliver their results; the checkpoint is deleted once every unit is done.

    With ``remote`` (the Ray engine), each batch's units are judged by it; the results are still stored, sent
    to the sinks and checkpointed here, a batch at a time.
    """
    size = batch_size or max(64, concurrency * 8)

    async def main() -> None:
        judging = Judging(specs, gate, concurrency, timeout_s)
        try:
            await _run_batches(
                units, judging, scope, checkpoint, outputs, report, size, on_unit, source_in_store, remote
            )
        finally:
            judging.close()

    asyncio.run(main())
    if report.stopped is None:
        checkpoint.finish()
    return report


def spec_names(specs: Sequence[EvaluatorSpec]) -> list[str]:
    """``name@version`` of each evaluator (part of the checkpoint's key)."""
    return [f"{spec.evaluator.name}@{getattr(spec.evaluator, 'version', None) or ''}" for spec in specs]


def describe_specs(specs: Sequence[EvaluatorSpec]) -> str:
    """The evaluators, their options (judge model and endpoint included) and span filters, stable across runs."""
    parts: list[Any] = []
    for spec, name in zip(specs, spec_names(specs), strict=True):
        kinds = ",".join(sorted(spec.span_kinds)) if spec.span_kinds else ""
        parts.append(f"{name}[{kinds}|{spec.name_glob or ''}]{describe_options(spec.evaluator)}")
    return ";".join(parts)
