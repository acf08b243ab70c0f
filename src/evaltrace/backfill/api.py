"""``evaltrace.evaluate_traces``: run evaluators over traces that already exist, without running the application."""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evaltrace.backfill.checkpoint import Checkpoint, checkpoint_key
from evaltrace.backfill.engine import (
    BackfillReport,
    Outputs,
    describe_specs,
    merge_reports,
    run_backfill,
    units_of,
)
from evaltrace.backfill.sources import OtlpJsonSource, StoreSource, TraceSource
from evaltrace.backfill.units import SCOPES, Unit
from evaltrace.evaluation.evaluator import Evaluator, EvaluatorSpec
from evaltrace.evaluation.limits import Clock, LimitGate, Limits
from evaltrace.evaluation.options import option_value_problem
from evaltrace.exceptions import ConfigError
from evaltrace.exporters.store_options import DEFAULT_DIRECTORY
from evaltrace.exporters.store_query import TraceFilter
from evaltrace.exporters.store_reader import LocalTraceStore
from evaltrace.schema import Score

if TYPE_CHECKING:
    from opentelemetry.sdk.trace.export import SpanExporter

    from evaltrace.runner.ray_engine import RayEngine

__all__ = ["evaluate_traces"]

DEFAULT_CONCURRENCY = 8
DEFAULT_TIMEOUT_S = 60.0


def _specs(
    evaluators: Sequence[Evaluator | EvaluatorSpec], span_kinds: Collection[str] | None, span_name: str | None
) -> list[EvaluatorSpec]:
    specs: list[EvaluatorSpec] = []
    for item in evaluators:
        if isinstance(item, EvaluatorSpec):
            if item.span_kinds is None and item.name_glob is None and (span_kinds or span_name):
                item = dataclasses.replace(item, span_kinds=span_kinds, name_glob=span_name)
            specs.append(item)
        elif callable(getattr(item, "evaluate", None)):
            specs.append(EvaluatorSpec(item, span_kinds=span_kinds, name_glob=span_name))
        else:
            raise ConfigError("evaluators", f"{item!r} is not an evaluator (it has no evaluate(trace, case) method)")
    names = [spec.evaluator.name for spec in specs]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ConfigError("evaluators", f"two evaluators share the name {duplicates[0]!r}; give each its own name")
    return specs


def _scoped(specs: list[EvaluatorSpec], scope: str | None) -> list[tuple[str, list[EvaluatorSpec]]]:
    """The scope each evaluator is run at, grouped (span, trace, then session).

    Raises:
        ConfigError: ``scope`` is one an evaluator cannot take (a conversation-only evaluator, or an
            ``EvaluatorSpec(scope="session")``, below session scope; an evaluator declaring it judges traces only
            at session scope).
    """
    groups: dict[str, list[EvaluatorSpec]] = {}
    for spec in specs:
        subjects = getattr(spec.evaluator, "subjects", None)  # duck-typed evaluators may not say what they judge
        conversation_only = subjects is not None and "trace" not in subjects
        session = spec.scope == "session" or conversation_only
        name = spec.evaluator.name
        if scope is not None and session and scope != "session":
            raise ConfigError(
                "scope",
                f"evaluator {name!r} judges a session's conversation only; it cannot take scope {scope!r} "
                "(use scope 'session', or give no scope)",
            )
        if scope == "session" and subjects is not None and "conversation" not in subjects:
            raise ConfigError("scope", f"evaluator {name!r} judges one trace only; it cannot take scope 'session'")
        chosen = scope or ("session" if session else "trace")
        groups.setdefault(chosen, []).append(spec)
    return [(s, groups[s]) for s in SCOPES if s in groups]


def _shifted(
    on_progress: Callable[[int, int], None] | None, index: int, passes: int
) -> Callable[[int, int], None] | None:
    """Progress of pass ``index`` of ``passes`` (one per scope) as one count over all of them."""
    if on_progress is None or passes == 1:
        return on_progress
    report = on_progress
    return lambda done, total: report(index * total + done, passes * total)


def _configured() -> Any:
    """The evaluation processor ``configure()`` built, if any."""
    from evaltrace.config import current_handle

    handle = current_handle()
    return None if handle is None else handle.evaluation_processor


def _default_limits() -> Limits | None:
    """What live evaluation uses: ``configure()``'s limits, else the ``OTEL_INSTRUMENTATION_GENAI_EVAL*`` variables."""
    processor = _configured()
    if processor is not None:
        limits: Limits | None = processor.options.limits
        return limits
    from evaltrace._internal import evals_env

    options = evals_env.apply_to_options(evals_env.read_evaluation_environment(), None)
    return Limits.coerce(options.get("limits"), "limits")


def _outputs(store: Path, sinks: Sequence[Any] | None) -> tuple[Outputs, list[Any]]:
    """The store's exporter and the sink workers; the workers this call started (to shut down) second."""
    from evaltrace.evaluation.sinks.local_store import LocalStoreSessionSink
    from evaltrace.evaluation.sinks.worker import SinkWorker
    from evaltrace.exporters.local_store import LocalStoreExporter
    from evaltrace.exporters.redaction import RedactingSpanExporter, redact_score

    # Written in this process, one transaction per batch, before the checkpoint moves; retention is left to
    # the application's own writes (a pass here could delete traces this backfill is reading).
    exporter: SpanExporter = LocalStoreExporter(store, max_age_s=0, max_bytes=0, writer="thread")
    processor = _configured()
    redactor = processor.options.redactor if processor is not None else None
    redact: Callable[[Score], Score] | None = (lambda s: redact_score(s, redactor)) if redactor else None
    if redactor is not None:  # what leaves for the store is redacted as the live store's spans are
        exporter = RedactingSpanExporter(exporter, redactor)
    session_store = LocalStoreSessionSink(store)  # session scores belong to no span: live's session_evals rows
    if sinks is None:
        workers = processor.sink_workers if processor is not None else []
        return Outputs(exporter, workers, redact, session_store=session_store), []
    started = [SinkWorker(sink) for sink in sinks]
    return Outputs(exporter, started, redact, session_store=session_store), started


_PHOENIX_FILTERS = ("since_ns", "session_id", "attributes")


def _phoenix_source(url: str, project: str | None, where: TraceFilter | None, trace_ids: Sequence[str]) -> TraceSource:
    from evaltrace.backfill.phoenix_source import PhoenixSource

    if not project:
        raise ConfigError("project", "reading from Phoenix needs the project's name (--project NAME)")
    where = where or TraceFilter()
    unsupported = [
        name for name, value in vars(where).items() if name not in _PHOENIX_FILTERS and value not in (None, False)
    ]
    if unsupported:
        raise ConfigError("phoenix", f"Phoenix traces are selected by since, session and trace ids only, not by "
                          f"{', '.join(unsupported)}")  # fmt: skip
    return PhoenixSource(
        url,
        project,
        since_ns=where.since_ns,
        trace_ids=trace_ids,
        session_id=where.session_id,
        attributes=where.attributes,
    )


def _source(
    store: LocalTraceStore,
    where: TraceFilter | None,
    trace_ids: Sequence[str],
    otlp_json: Sequence[str | Path],
    phoenix: str | None,
    project: str | None,
) -> TraceSource:
    if otlp_json and phoenix:
        raise ConfigError("otlp_json", "read traces from files or from Phoenix, not both")
    if phoenix:
        return _phoenix_source(phoenix, project, where, trace_ids)
    if otlp_json:
        if where is not None or trace_ids:
            raise ConfigError("otlp_json", "filters and trace ids select from the local store, not from files")
        return OtlpJsonSource(otlp_json)
    return StoreSource(store, where or TraceFilter(), tuple(trace_ids))


def evaluate_traces(
    evaluators: Sequence[Evaluator | EvaluatorSpec],
    *,
    store: str | Path = DEFAULT_DIRECTORY,
    where: TraceFilter | None = None,
    trace_ids: Sequence[str] = (),
    otlp_json: Sequence[str | Path] = (),
    phoenix: str | None = None,
    project: str | None = None,
    scope: str | None = None,
    span_kinds: Collection[str] | None = None,
    span_name: str | None = None,
    sinks: Sequence[Any] | None = None,
    concurrency: int = DEFAULT_CONCURRENCY,
    limits: Limits | Mapping[str, Any] | None = None,
    timeout_s: float | None = DEFAULT_TIMEOUT_S,
    resume: bool = True,
    dry_run: bool = False,
    on_progress: Callable[[int, int], None] | None = None,
    selection_key: str | None = None,
    engine: str = "local",
    address: str | None = None,
    limits_clock: Clock = time.monotonic,
) -> BackfillReport:
    """Run ``evaluators`` over stored traces and record the results as live evaluation would.

    Results go into the local store next to their trace (an ``evaluation {name}`` span per result; for traces
    read from files, the trace's spans too) and, as scores, to the sinks. Score and span ids are deterministic,
    so judging the same traces again replaces the earlier results instead of adding to them. A backfill that
    is killed resumes where it stopped when run again with the same arguments (``resume``).

    Example::

        evaltrace.evaluate_traces([NoPII()], where=TraceFilter(service="support-bot", failed_evals=True))

    Args:
        evaluators: Evaluators (anything with ``evaluate(trace, case)``) or ``EvaluatorSpec`` objects. At session
            scope, ``evaluate`` receives a :class:`~evaltrace.schema.Conversation` instead of a Trace.
        store: The local store read (unless ``otlp_json`` is given) and written.
        where: Which stored traces (the filters of ``evaltrace traces list``); None: all.
        trace_ids: Only these stored traces (full ids or unique prefixes).
        otlp_json: Read the traces from these OTLP/JSON files (``evaltrace traces export``) instead of the store.
        phoenix: Read the traces from this Phoenix server's REST API instead (``project`` names the project;
            ``where`` may then select by ``since_ns``, ``session_id`` and ``attributes`` only).
        project: The Phoenix project.
        scope: ``"span"`` (each span the evaluator's filters match, with its subtree), ``"trace"`` (each
            trace, from its root) or ``"session"`` (the traces sharing a ``session.id``, as one Conversation).
            None (the default): each evaluator's own: ``"session"`` for one that judges a conversation only
            (its ``subjects`` lack ``"trace"``: the session judges, turn count) or an
            ``EvaluatorSpec(scope="session")``, ``"trace"`` for the rest (both kinds given: a pass of each).
            A scope an evaluator cannot take (``"span"`` for a session judge) is a ConfigError, before anything
            is judged.
        span_kinds: At span scope, only spans of these kinds (``llm``, ``tool``, ``agent``, ...).
        span_name: At span scope, only spans whose name matches this ``fnmatch`` pattern.
        sinks: Score sinks; None: those ``configure()`` set up (Langfuse, Phoenix, JSONL), if any.
        concurrency: Evaluations running at once.
        limits: Rate limit and judge budgets over all evaluators; None: ``configure()``'s, else the
            ``OTEL_INSTRUMENTATION_GENAI_EVALUATION_RATE_LIMIT_RPS`` / ``..._EVALS_MAX_USD_PER_*`` variables.
            A rate limit is waited out; a spent budget stops the backfill (run it again later to resume).
        timeout_s: Per-evaluation timeout (an ``EvaluatorSpec.timeout_s`` wins).
        resume: Skip what a killed run of the same backfill finished; False starts over.
        dry_run: Judge nothing, write nothing: count what would be judged and estimate the judges' cost.
        on_progress: Called with (selected traces done, selected traces in all) as traces (or sessions) finish;
            a session counts the selected traces read to find it, so the count ends at the total.
        selection_key: What identifies the selection across runs (the CLI passes its flags as written);
            default: ``where``, ``trace_ids`` and the files.
        engine: ``"local"`` (this process) or ``"ray"``: each trace (session) is judged as a Ray task on a
            cluster, under rate limits, concurrency slots and budgets held by one actor for the whole cluster
            (``pip install 'evaltrace[ray]'``; see docs/scale.md).
        address: The Ray cluster (``auto``, ``ray://HOST:PORT``); None: a local one on 127.0.0.1 for the call.
        limits_clock: Monotonic seconds used by the rate limits and budget windows (injectable for tests), as
            live evaluation's option. A clock that raises refuses only the evaluation being checked
            (``limits_unavailable``). With ``engine="ray"`` it is pickled to the cluster's limits actor.

    Returns:
        What was judged: counts by outcome, and whether a budget stopped it.

    Raises:
        ConfigError: A bad scope, concurrency or evaluator, or a file that is not OTLP/JSON.
        StoreError: The local store cannot be read.
        BackfillStoreError: The local store refused the results (what was done is kept; run again to resume).
    """
    if scope is not None and scope not in SCOPES:
        raise ConfigError("scope", f"expected one of {', '.join(SCOPES)}, got {scope!r}")
    if concurrency < 1:
        raise ConfigError("concurrency", f"expected a whole number >= 1, got {concurrency!r}")
    if engine not in ("local", "ray"):
        raise ConfigError("engine", f"expected 'local' or 'ray', got {engine!r}")
    if address is not None and engine != "ray":
        raise ConfigError("address", "names a Ray cluster: give it with engine='ray'")
    problem = option_value_problem({"limits_clock": limits_clock})  # live evaluation's check of the option
    if problem is not None:
        raise ConfigError(*problem)
    specs = _specs(evaluators, span_kinds, span_name)
    if not specs:
        raise ConfigError("evaluators", "no evaluator given")
    groups = _scoped(specs, scope)
    store_path = Path(store)
    reader = LocalTraceStore(store_path)
    source = _source(reader, where, trace_ids, otlp_json, phoenix, project)
    ray_engine = None
    if engine == "ray":
        from evaltrace.runner.ray_engine import RayEngine

        ray_engine = RayEngine(address=address)
    try:
        reports: list[BackfillReport] = []
        for index, (group_scope, group) in enumerate(groups):
            progress = _shifted(on_progress, index, len(groups))
            reports.append(_evaluate(source, reader, group, store_path, group_scope, sinks, concurrency, limits,
                                     timeout_s, resume, dry_run, progress, selection_key,
                                     ray_engine, limits_clock))  # fmt: skip
            if reports[-1].stopped is not None:  # a spent budget stops the whole backfill
                break
        return merge_reports(reports, [s for s, _ in groups[: len(reports)]])
    finally:
        close = getattr(source, "close", None)
        if close is not None:
            close()
        reader.close()


def _evaluate(
    source: TraceSource,
    reader: LocalTraceStore,
    specs: list[EvaluatorSpec],
    store_path: Path,
    scope: str,
    sinks: Sequence[Any] | None,
    concurrency: int,
    limits: Limits | Mapping[str, Any] | None,
    timeout_s: float | None,
    resume: bool,
    dry_run: bool,
    on_progress: Callable[[int, int], None] | None,
    selection_key: str | None,
    ray_engine: RayEngine | None = None,
    limits_clock: Clock = time.monotonic,
) -> BackfillReport:
    selected = source.trace_ids()
    report = BackfillReport(traces=len(selected), dry_run=dry_run)
    if selection_key is not None and hasattr(source, "key"):
        source.key = selection_key
    if dry_run:
        from evaltrace.backfill.estimate import estimate

        estimate(units_of(source, specs, scope, selected, report), specs, scope, report)
        return report
    key = checkpoint_key(source.describe(), scope, describe_specs(specs))
    checkpoint = Checkpoint(store_path / "backfill" / f"{key}.done")
    if not resume:
        checkpoint.finish()
        checkpoint = Checkpoint(checkpoint.path)
    todo = selected
    if scope != "session" and checkpoint.done:  # finished traces are not even read again (sessions: once gathered)
        todo = [t for t in selected if t not in checkpoint.done]
        report.resumed = len(selected) - len(todo)
    units = units_of(source, specs, scope, todo, report)
    global_limits = Limits.coerce(limits, "limits") if limits is not None else _default_limits()
    gate = LimitGate(global_limits, limits_clock)
    outputs, started = _outputs(store_path, sinks)
    progress = _progress(on_progress, len(todo))
    try:
        remote: Any = contextlib.nullcontext(None)
        if ray_engine is not None:
            from evaltrace.backfill.ray_judging import RayBatchJudge

            remote = RayBatchJudge(ray_engine, specs, global_limits, concurrency, timeout_s, limits_clock)
        with remote as judge:
            report = run_backfill(
                units,
                specs,
                scope=scope,
                checkpoint=checkpoint,
                outputs=outputs,
                report=report,
                gate=gate,
                concurrency=concurrency,
                timeout_s=timeout_s,
                source_in_store=source.in_store,
                on_unit=progress,
                remote=judge,
            )
        if on_progress is not None and report.stopped is None:
            on_progress(len(todo), len(todo))  # selected traces after the last session (none, or no session.id)
        return report
    finally:
        for worker in started:
            worker.shutdown(outputs.flush_timeout_s)
        outputs.exporter.shutdown()
        if outputs.session_store is not None:
            outputs.session_store.shutdown()


def _progress(on_progress: Callable[[int, int], None] | None, total: int) -> Callable[[Unit], None] | None:
    """Report progress in selected traces (a session counts the selected traces it accounts for)."""
    if on_progress is None:
        return None
    done = [0]

    def advance(unit: Unit) -> None:
        done[0] = min(total, done[0] + unit.selected)
        on_progress(done[0], total)

    return advance
