"""Agent trajectory evaluators: tool sequence, tool loops, step budget and tool error rate.

Offline tests build Trace objects; the live test runs a decorated agent with real ``@evaltrace.tool`` spans
through ``evaltrace.configure`` and the evaluation processor, and reads the scores its sink wrote.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import evaltrace
from evaltrace._internal import settings, tracing
from evaltrace.evaluation import EvaluatorSpec, JsonlScoreSink
from evaltrace.evaluators import (
    CATALOGUE,
    StepBudget,
    ToolErrorRate,
    ToolLoop,
    ToolSequence,
    count_model_calls,
    find_cycles,
)
from evaltrace.runner.errors import RunConfigError
from evaltrace.runner.evaluator_entries import build_evaluators
from evaltrace.schema import ToolCall, ToolResult, Trace, TraceMessage, TraceMetrics

from .factories import T0, build_case, build_trace

Calls = list[tuple[str, dict[str, Any]]]


def calls_trace(calls: Calls, results: list[dict[str, Any] | str] | None = None, **kwargs: Any) -> Trace:
    trace = build_trace("answer", tools=calls, **kwargs)
    if results is not None:
        trace.tool_results = [ToolResult(name=f"t{i}", content=c) for i, c in enumerate(results)]
    return trace


SEARCH_PARIS = ("search", {"query": "Paris hotels", "limit": 5})
BOOK = ("book", {"hotel": "H1", "nights": 2})
WEATHER = ("weather", {"city": "Paris"})

# (mode, expected, calls, passed, score, reason fragment)
SEQUENCE_CASES: list[tuple[str, list[Any], Calls, bool, float, str]] = [
    ("exact", ["search", "book"], [SEARCH_PARIS, BOOK], True, 1.0, "tool calls match (exact)"),
    ("exact", ["search", "book"], [SEARCH_PARIS, BOOK, WEATHER], False, 2 / 3, "extra call weather at step 3"),
    ("exact", ["search", "book", "weather"], [SEARCH_PARIS, BOOK], False, 2 / 3, "missing call weather at step 3"),
    ("exact", ["search", "book"], [BOOK, SEARCH_PARIS], False, 0.5, "out of order at step 1: expected search"),
    ("exact", ["search", "pay"], [SEARCH_PARIS, BOOK], False, 0.5, "unexpected call at step 2: expected pay, got book"),
    ("in_order", ["search", "book"], [SEARCH_PARIS, WEATHER, BOOK], True, 1.0, "match (in_order)"),
    ("in_order", ["search", "book"], [BOOK, SEARCH_PARIS], False, 0.5, "out of order: book was called at step 1"),
    ("in_order", ["search", "search"], [SEARCH_PARIS, BOOK], False, 0.5, "missing call search"),
    ("in_order", ["search", "pay"], [SEARCH_PARIS, BOOK], False, 0.5, "missing call pay"),
    ("any_order", ["book", "search"], [SEARCH_PARIS, BOOK], True, 1.0, "match (any_order)"),
    ("any_order", ["book", "search"], [SEARCH_PARIS, BOOK, WEATHER], False, 2 / 3, "extra call weather at step 3"),
    ("any_order", ["book", "pay"], [SEARCH_PARIS, BOOK], False, 0.5, "missing call pay"),
    ("subset", ["weather", "search"], [SEARCH_PARIS, BOOK, WEATHER], True, 1.0, "match (subset)"),
    ("subset", ["weather", "pay"], [SEARCH_PARIS, WEATHER], False, 0.5, "missing call pay"),
]


@pytest.mark.parametrize(("mode", "expected", "calls", "passed", "score", "reason"), SEQUENCE_CASES)
def test_tool_sequence_modes(
    mode: str, expected: list[Any], calls: Calls, passed: bool, score: float, reason: str
) -> None:
    result = ToolSequence(expected, mode=mode).evaluate(calls_trace(calls))  # type: ignore[arg-type]
    assert (result.passed, result.status) == (passed, "completed")
    assert result.score == pytest.approx(score)
    assert reason in result.reason
    assert result.detail["actual"] == [name for name, _ in calls]


# (expected step, call arguments, passed, reason fragment)
ARGUMENT_CASES: list[tuple[dict[str, Any], dict[str, Any], bool, str]] = [
    ({"name": "search", "args": {"query": "Paris hotels"}}, SEARCH_PARIS[1], True, "match"),
    ({"name": "search", "args": {"limit": 5}}, SEARCH_PARIS[1], True, "match"),
    ({"name": "search", "args": {"query": {"regex": "^paris"}}}, SEARCH_PARIS[1], False, "expected regex '^paris'"),
    ({"name": "search", "args": {"query": {"regex": "(?i)^paris"}}}, SEARCH_PARIS[1], True, "match"),
    ({"name": "search", "args": {"limit": {"regex": "^[0-9]$"}}}, SEARCH_PARIS[1], True, "match"),
    ({"name": "search", "args": {"page": {"any": True}}}, SEARCH_PARIS[1], False, "got nothing"),
    ({"name": "search", "args": {"limit": {"any": True}}}, SEARCH_PARIS[1], True, "match"),
    ({"name": "search", "args": {"query": "Rome"}}, SEARCH_PARIS[1], False, "argument 'query' of search"),
    ({"name": "search", "args": {"f": {"equals": {"any": True}}}}, {"f": {"any": True}}, True, "match"),
]


@pytest.mark.parametrize(("step", "arguments", "passed", "reason"), ARGUMENT_CASES)
@pytest.mark.parametrize("mode", ["exact", "in_order", "any_order", "subset"])
def test_tool_sequence_argument_matchers(
    mode: str, step: dict[str, Any], arguments: dict[str, Any], passed: bool, reason: str
) -> None:
    result = ToolSequence([step], mode=mode).evaluate(calls_trace([("search", arguments)]))  # type: ignore[arg-type]
    assert result.passed is passed
    assert reason in result.reason
    if not passed:
        assert "wrong argument" in result.reason


def test_tool_sequence_shared_args_and_overlapping_matchers() -> None:
    calls: Calls = [("search", {"query": "Paris"}), ("search", {"query": "Rome"})]
    shared = ToolSequence(
        ["search", "search"], mode="any_order", args={"search": {"query": {"regex": "^(Paris|Rome)$"}}}
    )
    assert shared.evaluate(calls_trace(calls)).passed
    # A greedy assignment would give Paris to the first (any-query) step and fail the second.
    overlapping = [{"name": "search"}, {"name": "search", "args": {"query": "Paris"}}]
    assert ToolSequence(overlapping, mode="subset").evaluate(calls_trace(calls)).passed
    strict = ToolSequence(["search"], mode="in_order", args={"search": {"query": "Lyon"}})
    result = strict.evaluate(calls_trace(calls))
    assert not result.passed and 'expected "Lyon", got "Paris"' in result.reason


def test_tool_sequence_reads_the_case() -> None:
    trace = calls_trace([SEARCH_PARIS, BOOK])
    assert ToolSequence(mode="subset").evaluate(trace, build_case(must_call_tools=["book"])).passed
    sequence = [{"name": "book", "args": {"nights": 3}}]
    result = ToolSequence(mode="subset").evaluate(trace, build_case(metadata={"expected_tool_sequence": sequence}))
    assert not result.passed and "'nights'" in result.reason
    skipped = ToolSequence().evaluate(trace, build_case())
    assert skipped.status == "skipped" and "no expected tools" in skipped.reason


@pytest.mark.parametrize(
    "evaluator",
    [ToolSequence(["search"]), ToolLoop(), ToolErrorRate(), ToolSequence(mode="exact")],
    ids=["sequence", "loop", "error_rate", "sequence_from_case"],
)
def test_no_tool_evidence_is_not_evaluated(evaluator: Any) -> None:
    trace = build_trace("I answered without tools")
    result = evaluator.evaluate(trace, build_case(must_call_tools=["search"]))
    assert (result.status, result.passed, result.score) == ("skipped", False, None)
    assert result.reason.startswith("skipped: no evidence")


@pytest.mark.parametrize(
    ("kwargs", "problem"),
    [
        ({"expected": ["a"], "mode": "strict"}, "mode must be one of"),
        ({"expected": []}, "expected is empty"),
        ({"expected": [{"name": "a", "args": {"q": {"regex": "("}}}]}, "argument matcher a.q: bad regex"),
        ({"expected": [{"name": "a", "args": {"q": {"any": "yes"}}}]}, "write {any: true}"),
        ({"expected": [{"tool": "a"}]}, "expected[0] must be a tool name"),
        ({"expected": "search"}, "must be a list"),
        ({"expected": ["a"], "args": {"a": ["q"]}}, "args of expected tool 'a' must be a mapping"),
    ],
)
def test_tool_sequence_rejects_bad_config(kwargs: dict[str, Any], problem: str) -> None:
    with pytest.raises(ValueError, match=problem.replace("(", r"\(").replace("{", r"\{").replace("[", r"\[")):
        ToolSequence(**kwargs)


A, B, C = ("a", {"x": 1}), ("b", {}), ("c", {})

# (calls, kwargs, passed, reason fragment)
LOOP_CASES: list[tuple[Calls, dict[str, Any], bool, str]] = [
    ([A, B, C], {}, True, "no tool loop in 3 calls"),
    ([A, B, A], {}, True, "no tool loop"),
    ([A, A, A], {}, False, 'a({"x": 1}) called 3 times (more than 2)'),
    ([A, A, A], {"max_repeats": 3}, True, "no tool loop"),
    ([A, ("a", {"x": 2}), ("a", {"x": 3})], {}, True, "no tool loop"),
    ([A, ("a", {"x": 2}), ("a", {"x": 3})], {"match_arguments": False}, False, "a called 3 times"),
    ([A, B, A, B, A, B], {"max_repeats": 5}, False, "cycle a → b repeated 3 times from step 1"),
    ([C, A, B, C, A, B, C, A, B], {"max_repeats": 5}, False, "cycle c → a → b repeated 3 times from step 1"),
    ([A, B, A, B], {"max_repeats": 5}, True, "no tool loop"),
    ([A, B, A, B], {"max_repeats": 5, "min_cycle_repeats": 2}, False, "cycle a → b repeated 2 times"),
]


@pytest.mark.parametrize(("calls", "kwargs", "passed", "reason"), LOOP_CASES)
def test_tool_loop(calls: Calls, kwargs: dict[str, Any], passed: bool, reason: str) -> None:
    result = ToolLoop(**kwargs).evaluate(calls_trace(calls))
    assert result.passed is passed
    assert reason in result.reason
    assert (result.score == 1.0) is passed


def test_find_cycles_reports_each_region_once() -> None:
    keys = list("xababababy")
    cycles = find_cycles(keys, max_period=4, min_repeats=3)
    assert [(c.start, c.period, c.repeats) for c in cycles] == [(1, 2, 4)]
    assert find_cycles(list("aaaaaa"), max_period=3, min_repeats=2) == []


def test_tool_loop_excess_score() -> None:
    result = ToolLoop().evaluate(calls_trace([A] * 5 + [B]))
    assert result.detail["excess_calls"] == 3 and result.score == pytest.approx(0.5)


ERROR = {"error": "boom"}

# (results, kwargs, passed, score)
ERROR_CASES: list[tuple[list[dict[str, Any] | str], dict[str, Any], bool, float]] = [
    (["ok", {"rows": 2}], {}, True, 0.0),
    ([ERROR, "ok", "ok", "ok"], {}, True, 0.25),
    ([ERROR, "ok"], {}, False, 0.5),
    ([ERROR, "ok", "ok", "ok"], {"threshold": 0.0}, False, 0.25),
    ([{"isError": True, "content": []}, {"status": "FAILED"}, {"is_error": True}, {"error": None}], {}, False, 0.75),
    (["Error: timeout", "fine"], {}, True, 0.0),
    (["Error: timeout", "fine"], {"error_pattern": "^Error:"}, False, 0.5),
]


@pytest.mark.parametrize(("results", "kwargs", "passed", "score"), ERROR_CASES)
def test_tool_error_rate(
    results: list[dict[str, Any] | str], kwargs: dict[str, Any], passed: bool, score: float
) -> None:
    result = ToolErrorRate(**kwargs).evaluate(calls_trace([A], results))
    assert (result.passed, result.score) == (passed, pytest.approx(score))
    assert result.detail["direction"] == "lower"


def test_tool_error_rate_without_results_is_not_evaluated() -> None:
    result = ToolErrorRate().evaluate(calls_trace([A], []))
    assert result.status == "skipped" and "recorded no results" in result.reason
    with pytest.raises(ValueError, match="not a valid regex"):
        ToolErrorRate(error_pattern="(")
    with pytest.raises(ValueError, match=r"threshold must be in \[0, 1\]"):
        ToolErrorRate(threshold=2)


def _conversation() -> list[TraceMessage]:
    def model_call(name: str, call_id: str | None) -> TraceMessage:
        return TraceMessage(role="assistant", tool_call=ToolCall(id=call_id, name=name))

    return [
        TraceMessage(role="user", content="trip to Paris"),
        model_call("search", "call_1"),  # one model response asking for two tools
        model_call("weather", "call_2"),
        TraceMessage(role="tool", name="search", tool_call_id="call_1", content="H1"),
        TraceMessage(role="tool", name="weather", tool_call_id="call_2", content="sunny"),
        model_call("audit", None),  # a tool the application ran itself: no model call
        TraceMessage(role="tool", name="audit", content="ok"),
        TraceMessage(role="assistant", content="Book H1."),
    ]


def _agent_trace(latency_ms: int = 1500, **metrics: Any) -> Trace:
    return Trace(
        run_id="run",
        case_id="c1",
        variant_name="v1",
        started_at=T0,
        finished_at=T0 + dt.timedelta(milliseconds=latency_ms),
        messages=_conversation(),
        metrics=TraceMetrics(**metrics),
    )


def test_count_model_calls() -> None:
    assert count_model_calls(_agent_trace()) == 2
    assert count_model_calls(_agent_trace(custom={"model_calls": 7})) == 7
    assert count_model_calls(build_trace("x")) is None


# (limits, passed, over-limit figures)
BUDGET_CASES: list[tuple[dict[str, Any], bool, list[str]]] = [
    ({"max_model_calls": 2, "max_tool_calls": 3, "max_tokens": 500, "max_wall_ms": 2000}, True, []),
    ({"max_model_calls": 1}, False, ["model_calls"]),
    ({"max_tool_calls": 2}, False, ["tool_calls"]),
    ({"max_tokens": 399}, False, ["tokens"]),
    ({"max_wall_ms": 1000, "max_tool_calls": 0}, False, ["tool_calls", "wall_ms"]),
]


@pytest.mark.parametrize(("limits", "passed", "over"), BUDGET_CASES)
def test_step_budget(limits: dict[str, Any], passed: bool, over: list[str]) -> None:
    result = StepBudget(**limits).evaluate(_agent_trace(token_input=300, token_output=100))
    assert result.passed is passed
    assert result.detail["over_limit"] == over
    if "max_tool_calls" in limits:
        assert result.detail["measured"]["tool_calls"] == 3.0  # the application's own tool call counts too


def test_step_budget_edges() -> None:
    assert StepBudget(max_tool_calls=0).evaluate(build_trace("no tools")).passed  # zero of zero is within
    skipped = StepBudget(max_tokens=10).evaluate(build_trace("no usage"))
    assert skipped.status == "skipped"
    with pytest.raises(ValueError, match="at least one limit"):
        StepBudget()
    with pytest.raises(ValueError, match="max_tool_calls"):
        StepBudget(max_tool_calls=-1)


def test_catalogue_and_eval_yaml_entries(tmp_path: Path) -> None:
    for name in ("tool_sequence", "tool_loop", "step_budget", "tool_error_rate"):
        assert CATALOGUE[name].name == name
    path = tmp_path / "eval.yaml"
    entries = [
        {
            "name": "booking_flow",
            "type": "tool_sequence",
            "expected": ["search", {"name": "book", "args": {"nights": {"any": True}}}],
            "mode": "exact",
        },
        {"type": "step_budget", "max_tool_calls": 2},
    ]
    built = build_evaluators(entries, path)
    assert [b.name for b in built] == ["booking_flow", "step_budget"]
    result = built[0].evaluator.evaluate(calls_trace([SEARCH_PARIS, BOOK]))
    assert result.passed and result.evaluator == "booking_flow"
    bad = [{"type": "tool_sequence", "expected": [{"name": "a", "args": {"q": {"regex": "["}}}]}]
    with pytest.raises(RunConfigError, match="bad regex"):
        build_evaluators(bad, path)


# --- live: the real SDK, decorated tools, the evaluation processor --------------------------------------------


@pytest.fixture
def reset_configuration() -> Iterator[None]:
    saved = settings.current
    yield
    from evaltrace import config

    handle = config.current_handle()
    if handle is not None:
        handle.shutdown()
    tracing.set_tracer_provider(None)
    settings.replace(saved)


@evaltrace.tool
def search_hotels(city: str, limit: int = 3) -> list[str]:
    return [f"{city}-{i}" for i in range(limit)]


@evaltrace.tool
def book_hotel(hotel: str) -> str:
    if hotel.endswith("-0"):
        raise RuntimeError("hotel full")
    return f"booked {hotel}"


@evaltrace.agent
def travel_agent(city: str, looping: bool = False) -> str:
    hotels = search_hotels(city)
    if looping:  # the agent keeps re-running the same search
        for _ in range(3):
            search_hotels(city)
    for hotel in hotels:
        try:
            return book_hotel(hotel)
        except RuntimeError:
            continue
    return "nothing booked"


@evaltrace.agent
def small_talk(text: str) -> str:
    return f"you said {text}"


def test_live_trajectory_evaluators(tmp_path: Path, reset_configuration: None) -> None:
    trajectory = [
        ToolSequence(
            ["search_hotels", "book_hotel", "book_hotel"],
            mode="exact",
            args={"book_hotel": {"hotel": {"regex": "^Paris-"}}},
        ),
        ToolLoop(),
        StepBudget(max_tool_calls=3, max_wall_ms=60_000),
        ToolErrorRate(threshold=0.5),
    ]
    exporter = InMemorySpanExporter()
    handle = evaltrace.configure(
        service_name="trajectory",
        exporters=[exporter],
        local_store=False,
        batch=False,
        evaluators=[EvaluatorSpec(e, trace_level=True) for e in trajectory],
        sinks=[JsonlScoreSink(tmp_path / "scores.jsonl")],
        # Quiet period 0: the verdicts ride on the enriched root, where this test reads them.
        evaluation_options={"dead_letter_dir": None, "sink_schedule_delay_s": 0.01, "trace_quiet_period_s": 0},
    )
    sink_file = tmp_path / "scores.jsonl"

    def scores_of(run: Callable[[], str]) -> dict[str, dict[str, Any]]:
        """Run one agent call (one trace) and return the scores it added, by evaluator name."""
        before = len(sink_file.read_text().splitlines()) if sink_file.exists() else 0
        run()
        assert handle.force_flush(10_000)
        lines = sink_file.read_text().splitlines()[before:] if sink_file.exists() else []
        return {score["name"]: score for score in map(json.loads, lines)}

    paris = scores_of(lambda: travel_agent("Paris"))
    assert {name: score["metadata"]["passed"] for name, score in paris.items()} == dict.fromkeys(
        ("tool_sequence", "tool_loop", "step_budget", "tool_error_rate"), True
    )
    assert paris["tool_error_rate"]["comment"] == "1 of 3 tool results are errors (book_hotel)"  # the full hotel

    rome = scores_of(lambda: travel_agent("Rome", looping=True))
    assert rome["tool_sequence"]["comment"] == (
        "exact: unexpected call at step 2: expected book_hotel(hotel=regex '^Paris-'), got search_hotels"
    )
    # Each of the four identical searches is a call of its own, not folded into one.
    assert rome["tool_loop"]["comment"] == 'tool loop: search_hotels({"city": "Rome"}) called 4 times (more than 2)'
    assert rome["step_budget"]["comment"] == "over budget: tool_calls 6 > 3"
    assert not any(rome[name]["metadata"]["passed"] for name in ("tool_sequence", "tool_loop", "step_budget"))

    # No tool spans: the tool evaluators record "not evaluated" (no score, never a fail); the budget still applies.
    talk = scores_of(lambda: small_talk("hi"))
    assert sorted(talk) == ["step_budget"] and talk["step_budget"]["metadata"]["passed"] is True
    root = next(s for s in exporter.get_finished_spans() if s.name == "invoke_agent small_talk")
    attributes = dict(root.attributes or {})
    assert attributes["evaltrace.eval.not_evaluated"] == ("tool_sequence", "tool_loop", "tool_error_rate")
    assert attributes["evaltrace.eval.failed"] is False
    for name in ("tool_sequence", "tool_loop", "tool_error_rate"):
        assert attributes[f"evaltrace.eval.{name}.outcome"] == "not_evaluated"
        assert str(attributes[f"evaltrace.eval.{name}.skip_reason"]).startswith("skipped: no evidence")
