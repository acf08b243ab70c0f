"""``JobRunner.fast_eligible`` routes every job as before its plain loop over the isolated evaluators (s17-evlane).

The check of the evaluators that hung before (``offenders.isolated``) was ``any()`` over a generator; it is a plain
loop now. The function as it was is kept here verbatim and both run over every combination of job shape,
evaluator kinds, slow marks and isolated evaluators: the same answer, and the same calls of ``is_slow`` (it expires
slow marks as it reads them) and of ``isolated``, in the same order.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

from evaltrace.evaluation._jobs import JobRunner
from evaltrace.evaluation._session_jobs import SessionJob


def _old_fast_eligible(self: Any, job: Any, is_slow: Callable[[Any], bool]) -> bool:  # verbatim, main before
    """Whether ``job`` may run on the fast lane: span-level, in process, sync evaluators none ``is_slow``."""
    if isinstance(job, SessionJob) or job.deferred or job.trace_specs or job.session_specs:
        return False
    if self.ctx.remote is not None or self.ctx.limits is not None:
        return False
    for spec in job.specs:
        evaluator = spec.evaluator
        if not self._is_sync(evaluator) or is_slow(evaluator):
            return False
    offenders = self.ctx.offenders
    if offenders is not None and any(offenders.isolated(id(spec.evaluator)) for spec in job.specs):
        return False  # it hung before: the loop runs it on threads of its own, never on the lane's
    return True


class Offenders:
    def __init__(self, keys: set[int], calls: list[Any]) -> None:
        self.keys, self.calls = keys, calls

    def isolated(self, key: int) -> bool:
        self.calls.append(("isolated", key))
        return key in self.keys


def _runner(sync: dict[int, bool], offenders: Offenders | None, remote: Any, limits: Any) -> Any:
    runner = SimpleNamespace(ctx=SimpleNamespace(remote=remote, limits=limits, offenders=offenders))
    runner._is_sync = lambda evaluator: sync[id(evaluator)]
    return runner


def test_fast_eligible_routes_and_calls_as_before() -> None:
    evaluators = [SimpleNamespace(name=f"e{n}") for n in range(3)]
    compared = eligible = 0
    for count in range(0, 4):
        for chosen in itertools.product(evaluators, repeat=count):
            specs = [SimpleNamespace(evaluator=e) for e in chosen]
            for sync_bits, slow_bits, isolated_bits, shape, ctx_kind in itertools.product(
                range(8), range(8), range(8), range(4), range(3)
            ):
                if count == 0 and (sync_bits or slow_bits or isolated_bits):
                    continue
                job = SimpleNamespace(
                    specs=specs,
                    deferred=shape == 1,
                    trace_specs=["t"] if shape == 2 else [],
                    session_specs=["s"] if shape == 3 else [],
                )
                sync = {id(e): bool(sync_bits >> n & 1) for n, e in enumerate(evaluators)}
                slow = {id(e) for n, e in enumerate(evaluators) if slow_bits >> n & 1}
                isolated = {id(e) for n, e in enumerate(evaluators) if isolated_bits >> n & 1}
                answers = []
                for function in (_old_fast_eligible, JobRunner.fast_eligible):
                    calls: list[Any] = []
                    offenders = None if ctx_kind == 2 else Offenders(isolated, calls)
                    runner = _runner(sync, offenders, "remote" if ctx_kind == 1 and shape == 0 else None, None)

                    def is_slow(evaluator: Any, calls: list[Any] = calls, slow: set[int] = slow) -> bool:
                        calls.append(("is_slow", id(evaluator)))
                        return id(evaluator) in slow

                    answers.append((function(runner, job, is_slow), calls))
                assert answers[0] == answers[1]
                compared += 1
                eligible += answers[1][0]
    assert compared > 10_000 and 0 < eligible < compared
