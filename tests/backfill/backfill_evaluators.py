"""Evaluators the backfill tests import by ``module:attr`` (also from a subprocess running ``evaltrace evaluate``)."""

from __future__ import annotations

import os
import time
from typing import Any

import evaltrace
from evaltrace.schema import Trace


@evaltrace.evaluator
def logged(trace: Trace) -> bool:
    """Append the judged trace's id to ``$BACKFILL_LOG`` (one line per call), then pass."""
    path = os.environ["BACKFILL_LOG"]
    with open(path, "a", encoding="utf-8") as out:
        out.write(f"{trace.extra['trace_id']}\n")
    time.sleep(float(os.environ.get("BACKFILL_SLEEP_S", "0")))
    return True


@evaltrace.evaluator
def short_answer(trace: Trace) -> bool:
    """Pass when the final answer has fewer than 3 characters."""
    return len(trace.output.final_answer or "") < 3


@evaltrace.evaluator(name="has_answer", version="1")
def has_answer(trace: Trace) -> bool:
    """Pass when there is a final answer."""
    return bool(trace.output.final_answer)


class TurnCount:
    """A session-scope evaluator: ``evaluate`` receives a Conversation (the Evaluator protocol is duck-typed)."""

    name = "turn_count"
    version = None
    seen: list[Any] = []

    def evaluate(self, conversation: Any, case: Any) -> Any:
        from evaltrace.schema import EvaluationResult

        TurnCount.seen.append(conversation)
        turns = len(conversation.turns)
        return EvaluationResult(evaluator=self.name, passed=turns <= 3, score=float(turns), reason=f"{turns} turns")


@evaltrace.evaluator(name="costly")
def costly(trace: Trace) -> Any:
    """Pass, reporting a judge call of 100 tokens (what budgets are charged from)."""
    from evaltrace.schema import EvaluationResult

    judge = {"model": "gpt-4o-mini", "input_tokens": 90, "output_tokens": 10, "cost_usd": 0.001}
    return EvaluationResult(evaluator="costly", passed=True, detail={"judge": judge})


@evaltrace.evaluator(name="chatty")
def chatty(trace: Trace) -> Any:
    """Fail with a reason that quotes an e-mail address (what redaction must mask)."""
    from evaltrace.schema import EvaluationResult

    return EvaluationResult(evaluator="chatty", passed=False, reason="the answer leaks jane.doe@example.com")


class Exclusive:
    """Log ``start``/``end`` lines (pid, time) around a short sleep: shows whether two evaluations overlapped.

    The log path travels with the instance (pickled to Ray workers, whose environment is the cluster's).
    """

    name = "exclusive"
    version = "1"

    def __init__(self, log: str, sleep_s: float = 0.1) -> None:
        self.log = log
        self.sleep_s = sleep_s

    def evaluate(self, trace: Trace, case: Any = None) -> bool:
        with open(self.log, "a", encoding="utf-8") as out:
            out.write(f"start {os.getpid()} {time.time()!r}\n")
        time.sleep(self.sleep_s)
        with open(self.log, "a", encoding="utf-8") as out:
            out.write(f"end {os.getpid()} {time.time()!r}\n")
        return bool(trace.output.final_answer)


class Gated:
    """Log ``<trace id> <node id>`` per call, then wait until the gate file exists; pass on a short answer.

    The paths travel with the instance (pickled to Ray workers). What is in flight when a test kills a node is known,
    not a race: every call waits at the gate until the test opens it.
    """

    name = "gated"
    version = "1"

    def __init__(self, log: str, gate: str) -> None:
        self.log = log
        self.gate = gate

    def evaluate(self, trace: Trace, case: Any = None) -> bool:
        try:
            import ray

            node = ray.get_runtime_context().get_node_id() if ray.is_initialized() else "local"
        except ImportError:
            node = "local"
        with open(self.log, "a", encoding="utf-8") as out:
            out.write(f"{trace.extra['trace_id']} {node}\n")
        deadline = time.monotonic() + 300
        while not os.path.exists(self.gate) and time.monotonic() < deadline:
            time.sleep(0.02)
        return len(trace.output.final_answer or "") < 3


@evaltrace.evaluator(name="picky")
def picky(trace: Trace) -> bool:
    """Not evaluated (reason ``no reference answer``) on a short answer; pass on the others."""
    from evaltrace.evaluation.evaluator import SkipEvaluation

    if len(trace.output.final_answer or "") < 3:
        raise SkipEvaluation("no reference answer")
    return True


class LongSessions:
    """A session-scope evaluator (``EvaluatorSpec(scope="session")``): not evaluated below 3 turns, else pass."""

    name = "long_sessions"
    version = None

    def evaluate(self, conversation: Any, case: Any = None) -> bool:
        from evaltrace.evaluation.evaluator import SkipEvaluation

        if len(conversation.turns) < 3:
            raise SkipEvaluation("fewer than 3 turns")
        return True


@evaltrace.evaluator(name="noisy")
def noisy(trace: Trace) -> bool:
    """``print`` a debugging line (as any evaluator or library may), then judge as ``short_answer``."""
    print(f"noisy: judging {trace.extra['trace_id']}")
    return len(trace.output.final_answer or "") < 3


@evaltrace.evaluator(name="fd_writer")
def fd_writer(trace: Trace) -> bool:
    """Write to file descriptor 1 directly (as C code or a child process does), then pass."""
    os.write(1, f"fd_writer: judging {trace.extra['trace_id']}\n".encode())
    return True


@evaltrace.evaluator(name="one_reason_each")
def one_reason_each(trace: Trace) -> bool:
    """Not evaluated with a reason naming the trace (as many reasons as traces), except on the short answers."""
    from evaltrace.evaluation.evaluator import SkipEvaluation

    answer = trace.output.final_answer or ""
    if len(answer) < 3:
        raise SkipEvaluation("answer too short")
    raise SkipEvaluation(f"no reference for {answer!r}")


@evaltrace.evaluator(name="names_the_user")
def names_the_user(trace: Trace) -> bool:
    """Not evaluated with a message quoting an e-mail address (what redaction must mask, and no key may hold)."""
    from evaltrace.evaluation.evaluator import SkipEvaluation

    raise SkipEvaluation("no consent from jane.doe@example.com")


@evaltrace.evaluator(name="one_token_each")
def one_token_each(trace: Trace) -> bool:
    """As ``one_reason_each`` with identifier-like reasons (``too_short``, ``no_reference_<n>``): each its own key."""
    from evaltrace.evaluation.evaluator import SkipEvaluation

    answer = trace.output.final_answer or ""
    if len(answer) < 3:
        raise SkipEvaluation("too_short")
    raise SkipEvaluation(f"no_reference_{answer.split()[-1]}")


@evaltrace.evaluator(name="long_reason")
def long_reason(trace: Trace) -> bool:
    """Not evaluated with a reason of 100 000 characters (an evaluator quoting a whole document)."""
    from evaltrace.evaluation.evaluator import SkipEvaluation

    raise SkipEvaluation("x" * 100_000)
