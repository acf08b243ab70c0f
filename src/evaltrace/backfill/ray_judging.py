"""``evaluate --engine ray``: a backfill's units judged as Ray tasks, under limits held by one actor for the cluster.

A unit is a trace (sharded by trace id) or, at session scope, a session (by session id).

The driver reads the units and, a batch at a time, sends each to the cluster as one task, keeping at most
``concurrency`` tasks in flight (so ``concurrency`` bounds the evaluations running at once cluster-wide: a task
judges its unit's evaluations one after another). A task answers its unit's results; the driver stores them,
hands the scores to the sinks and moves the checkpoint, as the local backfill does: a killed driver resumes after
the last finished batch, and a task Ray retries (its node was lost) yields one answer, written once (the score and
span ids are deterministic, so a unit judged again replaces its rows rather than adding to them).

Rate limits, per-evaluator ``max_concurrent`` and the token/USD budgets live in :class:`GateState`, a Ray actor
every task asks before each evaluation and charges after it: the limits hold across the cluster, not per
process. A concurrency slot is a lease that expires after the evaluation's timeout (plus a margin), so a slot
held by a task on a lost node is not lost with it. The actor lives on the driver's node (which the backfill cannot
lose anyway), never on a worker node that may go.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time
import traceback
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, cast

from evaltrace._internal.errors import logger
from evaltrace.backfill.engine import Answer, BudgetStop, Judging
from evaltrace.backfill.units import Target, Unit
from evaltrace.evaluation.evaluator import EvaluatorSpec
from evaltrace.evaluation.limits import Clock, LimitGate, Limits
from evaltrace.runner.ray_engine import RayEngine, RayEngineError, as_finished, connected, error_cause, use_driver_paths
from evaltrace.schema import EvaluationResult

__all__ = ["GateState", "LimitsUnavailable", "RayBatchJudge"]

_LEASE_MARGIN_S = 30.0
_LEASE_UNBOUNDED_S = 3600.0
_SLOT_WAIT_S = 0.05
_GLOBAL = ""


def _limiter_of(name: str) -> str:
    """What fails when evaluator ``name``'s limiter on the actor raises (the local engine's words, and where)."""
    return f"checking or charging the rate limits and budgets of evaluator {name!r} on the cluster's limits actor"


def _reads_clock(limits: Limits | None) -> bool:
    """Whether ``limits`` has a rate limit or a budget window (a concurrency cap alone reads no clock)."""
    if limits is None:
        return False
    windows = (limits.max_tokens_per_hour, limits.max_tokens_per_day, limits.max_usd_per_hour, limits.max_usd_per_day)
    return limits.evaluations_per_second is not None or any(w is not None for w in windows)


class LimitsUnavailable(RuntimeError):
    """The cluster's limits actor could not set up the limits an evaluator is under (the admission is refused)."""


class GateState:
    """The limits of a backfill for the whole cluster (the body of a Ray actor; one call at a time).

    Args:
        global_limits: Limits over every evaluator.
        per_evaluator: Each evaluator's own limits.
        clock: The backfill's ``limits_clock``, pickled (None: ``time.monotonic``); unpickled once ``sys_path``
            is set, since it may be the project's own (Ray unpickles an actor's arguments before).
        sys_path: The driver's ``sys.path``.
    """

    def __init__(
        self,
        global_limits: Limits | None,
        per_evaluator: dict[str, Limits | None],
        clock: bytes | None = None,
        sys_path: Sequence[str] = (),
    ) -> None:
        self._caps: dict[str, int] = {}
        if global_limits is not None and global_limits.max_concurrent is not None:
            self._caps[_GLOBAL] = global_limits.max_concurrent
        for name, limits in per_evaluator.items():
            if limits is not None and limits.max_concurrent is not None:
                self._caps[name] = limits.max_concurrent
        # Those a failed set-up refuses: under a rate limit or budget (the clock's readers), as on the local engine,
        # where a concurrency cap alone never reads the clock.
        self._limited = {
            name for name, limits in per_evaluator.items() if _reads_clock(limits) or _reads_clock(global_limits)
        }
        self._unavailable: Exception | None = None
        # The limiter's failures, logged once per evaluator per episode by the driver (as on the local engine);
        # each task still refuses each failed admission (limits_unavailable), so every occurrence is counted.
        self._failing: dict[str, int] = {}
        self._log_lines: list[tuple[int, str]] = []
        try:
            limits_clock: Clock = time.monotonic
            if clock is not None:
                import ray

                use_driver_paths(list(sys_path))
                limits_clock = ray.cloudpickle.loads(clock)
            # Only the rate limits and budget windows read it: a concurrency lease is Ray's bookkeeping (a lost
            # task's slots come back), kept on the real clock.
            self._gate = LimitGate(global_limits, limits_clock)
            for name, limits in per_evaluator.items():
                self._gate.register(name, limits)
        except Exception as exc:
            # The limits cannot be set up on the cluster (a clock whose module only the driver has): the actor
            # still starts, else every task would be retried into a RayEngineError. Each admission of an evaluator
            # under a limit is refused as a failing limiter (limits_unavailable), as on the local engine; the
            # evaluators without one judge as usual.
            self._unavailable = exc
            self._gate = LimitGate(None)
            self._log(logging.ERROR, "setting up the backfill's limits on the cluster's limits actor", exc)
        self._leases: dict[int, tuple[list[str], float]] = {}
        self._ids = itertools.count(1)

    def _log(self, level: int, what: str, exc: BaseException | None = None) -> None:
        """Keep a log line for the driver, which logs it (the actor's own log stays in Ray's session files)."""
        if exc is not None:
            trace = "".join(traceback.format_exception(exc)).rstrip()
            self._log_lines.append((level, f"evaltrace internal error while {what}\n{trace}"))
        else:
            self._log_lines.append((level, f"evaltrace: {what}"))

    def _failed(self, name: str, exc: BaseException) -> None:
        """One failure of evaluator ``name``'s limiter: the first of an episode is logged (as the local engine's)."""
        self._failing[name] = self._failing.get(name, 0) + 1
        if self._failing[name] == 1:
            what = f"{_limiter_of(name)} (logged once until it works again; every occurrence is counted)"
            self._log(logging.ERROR, what, exc)

    def _ok(self, name: str) -> None:
        """Evaluator ``name``'s limiter answered: an episode of failures ends with one INFO line."""
        count = self._failing.pop(name, 0)
        if count:
            self._log(logging.INFO, f"{_limiter_of(name)} works again after {count} internal error(s)")

    def log_lines(self) -> list[tuple[int, str]]:
        """The log lines kept since the last call, for the driver to log: ``(level, message)``."""
        lines, self._log_lines = self._log_lines, []
        return lines

    def admit(self, name: str) -> str | None:
        """None when ``name`` may run now (a rate token is taken), else ``rate_limited`` or ``over_budget``.

        Raises:
            LimitsUnavailable: ``name`` is under a limit that could not be set up on the cluster.
        """
        try:
            if self._unavailable is not None and name in self._limited:
                problem = f"{type(self._unavailable).__name__}: {self._unavailable}"
                raise LimitsUnavailable(
                    f"the limits of evaluator {name!r} could not be set up on the cluster: {problem}"
                ) from self._unavailable
            reason = self._gate.admit(name)
        except Exception as exc:
            self._failed(name, exc)
            raise
        self._ok(name)
        return reason

    def charge(self, name: str, tokens: int, usd: float | None) -> None:
        """Charge a judge's spend to ``name`` and to the global budget."""
        try:
            self._gate.charge(name, tokens, usd)
        except Exception as exc:
            self._failed(name, exc)
            raise

    def acquire(self, name: str, ttl_s: float) -> int | None:
        """A lease on a slot of ``name`` and a global one (expiring after ``ttl_s``), or None when one is full."""
        now = time.monotonic()
        self._leases = {k: v for k, v in self._leases.items() if v[1] > now}  # a lost task's slots come back
        scopes = [scope for scope in (name, _GLOBAL) if scope in self._caps]
        held = [scope for names, _ in self._leases.values() for scope in names]
        if any(held.count(scope) >= self._caps[scope] for scope in scopes):
            return None
        lease = next(self._ids)
        self._leases[lease] = (scopes, now + ttl_s)
        return lease

    def release(self, lease: int) -> None:
        """Give a lease's slots back."""
        self._leases.pop(lease, None)


class ClusterGate(LimitGate):
    """A :class:`LimitGate` whose state is the cluster's :class:`GateState` actor (used inside the tasks)."""

    def __init__(self, actor: Any, active: bool, lease_s: float) -> None:
        super().__init__(None)
        self._actor = actor
        self._active = active
        self._lease_s = lease_s

    def register(self, name: str, limits: Limits | None) -> None:
        """Registered on the actor when it was made."""

    @property
    def active(self) -> bool:
        """True when any limit is set."""
        return self._active

    def admit(self, name: str) -> str | None:
        """Ask the actor."""
        import ray

        reason: str | None = ray.get(self._actor.admit.remote(name))
        return reason

    def charge(self, name: str, tokens: int, usd: float | None) -> None:
        """Charge on the actor (before the next admission is asked for)."""
        import ray

        ray.get(self._actor.charge.remote(name, tokens, usd))

    @contextlib.asynccontextmanager
    async def slot(self, name: str) -> AsyncIterator[None]:
        """Hold a lease on the evaluator's (and the global) concurrency slot while the evaluation runs."""
        import ray

        while True:
            lease = await self._actor.acquire.remote(name, self._lease_s)
            if lease is not None:
                break
            await asyncio.sleep(_SLOT_WAIT_S)
        try:
            yield
        finally:
            ray.get(self._actor.release.remote(lease))


@dataclass(frozen=True)
class _Batch:
    """What every task of a backfill needs (put in the object store once).

    The evaluators travel pickled inside it: unpickled only once the driver's ``sys.path`` is set on the worker,
    since they are the project's classes and functions (Ray would unpickle a task's arguments before).
    """

    specs: bytes
    timeout_s: float | None
    sys_path: list[str]


_specs: dict[bytes, list[EvaluatorSpec]] = {}
"""The unpickled evaluators, once per worker process and backfill (by the digest of their pickle)."""


def _unpickled(job: _Batch) -> list[EvaluatorSpec]:
    import hashlib

    import ray

    key = hashlib.sha256(job.specs).digest()
    if key not in _specs:
        _specs[key] = ray.cloudpickle.loads(job.specs)
    return _specs[key]


def judge_unit(
    job: _Batch, gate: Any, active: bool, targets: list[tuple[Any, list[int]]]
) -> list[EvaluationResult | None]:
    """One unit on a Ray worker: each (target, evaluator) result in order; None once a budget is spent."""
    use_driver_paths(job.sys_path)
    specs = _unpickled(job)
    timeouts = [s.timeout_s for s in specs if s.timeout_s is not None] + [job.timeout_s or 0.0]
    lease_s = (max(timeouts) + _LEASE_MARGIN_S) if max(timeouts) > 0 else _LEASE_UNBOUNDED_S

    async def run() -> list[EvaluationResult | None]:
        import ray

        # A lost limits actor is not the limiter failing: the task is retried elsewhere (see RayBatchJudge).
        fatal = (ray.exceptions.RayActorError,)
        judging = Judging(specs, ClusterGate(gate, active, lease_s), 1, job.timeout_s, fatal)
        answers: list[EvaluationResult | None] = []
        try:
            for judged, indices in targets:
                for index in indices:
                    spec = specs[index]
                    target = Target(span=cast(Any, None), judged=judged, specs=[spec])
                    try:
                        answers.append(await judging.judge(target, spec))
                    except BudgetStop:
                        answers.append(None)
        finally:
            judging.close()
        return answers

    return asyncio.run(run())


class RayBatchJudge:
    """Judges each batch's units as Ray tasks (a :class:`~evaltrace.backfill.engine.BatchJudge`).

    Use as a context manager: it connects to the cluster and makes the limits actor for the backfill.

    Args:
        engine: Where the cluster is.
        specs: The evaluators.
        global_limits: Limits over all evaluators.
        concurrency: Units (hence evaluations) in flight at once, cluster-wide.
        timeout_s: Per-evaluation timeout.
        limits_clock: Monotonic seconds of the rate limits and budget windows (sent to the limits actor).
    """

    def __init__(
        self,
        engine: RayEngine,
        specs: Sequence[EvaluatorSpec],
        global_limits: Limits | None,
        concurrency: int,
        timeout_s: float | None,
        limits_clock: Clock = time.monotonic,
    ) -> None:
        self._engine = engine
        self._specs = list(specs)
        self._limits = global_limits
        self._concurrency = concurrency
        self._timeout_s = timeout_s
        self._clock = limits_clock
        self._stack = contextlib.ExitStack()
        self._ray: Any = None
        self._gate: Any = None
        self._job: Any = None
        self._active = global_limits is not None or any(s.limits is not None for s in specs)

    def __enter__(self) -> RayBatchJudge:
        from evaltrace.runner.resume import current_sys_path

        ray = self._stack.enter_context(connected(self._engine.address))
        self._ray = ray
        per_evaluator = {s.evaluator.name: s.limits for s in self._specs}
        # On the driver's node: a lost worker node must not take the cluster's limits (and the backfill) with it.
        # Hard affinity: a soft one fell back to the worker node under load (seen at load 20), and died with it.
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        here = NodeAffinitySchedulingStrategy(node_id=ray.get_runtime_context().get_node_id(), soft=False)
        sys_path = current_sys_path()
        clock = None if self._clock is time.monotonic else ray.cloudpickle.dumps(self._clock)
        actor = ray.remote(num_cpus=0, scheduling_strategy=here)(GateState)
        self._gate = actor.remote(self._limits, per_evaluator, clock, sys_path)
        self._job = ray.put(_Batch(ray.cloudpickle.dumps(self._specs), self._timeout_s, sys_path))
        return self

    def __exit__(self, *exc: object) -> None:
        if self._gate is not None:
            self._ray.kill(self._gate)
        self._stack.close()

    def _relay_log(self) -> None:
        """Log here what the limits actor kept for the driver (its limiter's failures, once per episode)."""
        try:
            lines: list[tuple[int, str]] = self._ray.get(self._gate.log_lines.remote())
        except self._ray.exceptions.RayError:  # a lost actor: the tasks that needed it say so
            return
        for level, message in lines:
            logger.log(level, message)

    def __call__(self, batch: Sequence[Unit]) -> list[list[Answer]]:
        """Judge ``batch``'s units on the cluster; each unit's answers, in the batch's order."""
        ray = self._ray
        # A task's own errors are answers, never retried, except one reaching the limits actor: a task on a node
        # that is dying can see the actor as unavailable (its raylet went first) and report that before Ray sees
        # the node die. Judged again elsewhere, its unit's answer is still written once.
        task = ray.remote(judge_unit).options(
            max_retries=self._engine.max_retries,
            retry_exceptions=[ray.exceptions.RayActorError],
            scheduling_strategy="SPREAD",
        )
        index = {id(spec): i for i, spec in enumerate(self._specs)}
        answers: dict[int, list[EvaluationResult | None]] = {}

        def submitted() -> Iterator[tuple[Any, int]]:
            for position, unit in enumerate(batch):
                targets = [(t.judged, [index[id(s)] for s in t.specs]) for t in unit.targets]
                yield task.remote(self._job, self._gate, self._active, targets), position

        try:
            for position, ref in as_finished(ray, submitted(), self._concurrency):
                try:
                    answers[position] = ray.get(ref)
                except ray.exceptions.RayError as exc:
                    raise RayEngineError(
                        f"unit {batch[position].key!r} failed on the Ray cluster after its retries:"
                        f" {type(exc).__name__}: {error_cause(exc)} (finished batches are checkpointed: run the"
                        " same command again)"
                    ) from exc
        finally:
            self._relay_log()
        out: list[list[Answer]] = []
        for position, unit in enumerate(batch):
            pairs = [(target, spec) for target in unit.targets for spec in target.specs]
            out.append([(t, s, r) for (t, s), r in zip(pairs, answers[position], strict=True)])
        return out
