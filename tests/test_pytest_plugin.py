"""The pytest plugin as a user runs it: pytest in a subprocess (plugin loaded from its entry point), with and
without pytest-xdist, on a test file using the fixture, ``assert_evaluation`` and the marker."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

CONFTEST = """
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from evaltrace._internal import tracing

# The application's own provider, as configure() would install it: the plugin must put it back after each test.
USER_EXPORTER = InMemorySpanExporter()
USER_PROVIDER = TracerProvider()
USER_PROVIDER.add_span_processor(SimpleSpanProcessor(USER_EXPORTER))
tracing.set_tracer_provider(USER_PROVIDER)
"""

TEST_FILE = """
import pytest

import evaltrace
from evaltrace._internal import tracing
from evaltrace.evaluators import NoPII, ToolCalled
from evaltrace.testing import EvaluationAssertionError, assert_evaluation, capture_traces

import conftest


@evaltrace.tool
def get_weather(city: str) -> str:
    return f"sunny in {city}"


@evaltrace.agent
def answer(question: str, leak: bool = False) -> str:
    weather = get_weather("Paris")
    return f"{weather}; mail bob@example.com" if leak else weather


@evaltrace.evaluator
def judge_down(trace):
    raise RuntimeError("judge unreachable")


def test_fixture_pass(evaltrace_capture):
    answer("weather?")
    results = assert_evaluation(evaltrace_capture.trace, ToolCalled("get_weather"), NoPII())
    assert [r.evaluator for r in results] == ["tool_called", "pii_leakage"]


def test_fixture_fail(evaltrace_capture):
    answer("weather?", leak=True)
    assert_evaluation(evaltrace_capture.trace, ToolCalled("get_weather", "get_forecast"), NoPII())


def test_fixture_error(evaltrace_capture):
    answer("weather?")
    assert_evaluation(evaltrace_capture, NoPII(), judge_down)


def test_fixture_not_evaluated(evaltrace_capture):
    answer("weather?")
    assert_evaluation(evaltrace_capture.trace, ToolCalled())


def test_fixture_isolated(evaltrace_capture):
    answer("one")
    answer("two")
    assert len(evaltrace_capture.traces) == 2
    assert [s.name for s in evaltrace_capture.spans].count("execute_tool get_weather") == 2


def test_error_carries_results():
    with capture_traces() as capture:
        answer("weather?", leak=True)
    with pytest.raises(EvaluationAssertionError) as info:
        assert_evaluation(capture.trace, ToolCalled("get_weather"), NoPII())
    assert [r.passed for r in info.value.results] == [True, False]


@pytest.mark.evaltrace(ToolCalled("get_weather"), NoPII())
def test_marker_pass():
    answer("weather?")


@pytest.mark.evaltrace(evaluators=[NoPII()])
def test_marker_fail():
    answer("weather?", leak=True)


@pytest.mark.evaltrace(NoPII())
def test_marker_with_fixture(evaltrace_capture):
    answer("weather?")
    assert len(evaltrace_capture.traces) == 1


@pytest.mark.evaltrace(NoPII())
def test_marker_no_trace():
    pass


@pytest.mark.evaltrace(NoPII())
def test_marker_body_fails_first():
    answer("weather?", leak=True)
    assert False, "the body's own failure"


def test_user_provider_untouched():
    # Runs last without -n: every capture before it restored the application's provider, which saw no span.
    assert tracing.get_tracer_provider() is conftest.USER_PROVIDER
    assert conftest.USER_EXPORTER.get_finished_spans() == ()
"""

PASSED = 6
FAILED = 6


@pytest.fixture
def suite(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_agent=TEST_FILE)
    return pytester


def _check(result: pytest.RunResult) -> None:
    result.assert_outcomes(passed=PASSED, failed=FAILED)
    out = result.stdout.str()
    # assert_evaluation: one line per evaluation that did not pass, with its outcome and reason.
    assert "evaltrace: 2 of 2 evaluations did not pass on trace" in out
    assert "FAIL tool_called (score 0.50): missing tool calls: get_forecast" in out
    assert "FAIL pii_leakage (score 0.00): found 1 email" in out
    # An errored or skipped evaluation is neither a pass nor a fail: its own message.
    assert "ERROR judge_down: evaluator failed: RuntimeError: judge unreachable" in out
    assert "NOT EVALUATED tool_called: skipped: no required tools configured" in out
    # The marker: the test fails with the evaluators' reasons, or because there was nothing to evaluate.
    assert "evaltrace: 1 of 1 evaluations did not pass on trace" in out
    assert "evaltrace: not evaluated: the test produced no trace" in out
    assert "the body's own failure" in out
    for name in ("test_fixture_fail", "test_fixture_error", "test_fixture_not_evaluated"):
        assert f"FAILED test_agent.py::{name}" in out
    for name in ("test_marker_fail", "test_marker_no_trace", "test_marker_body_fails_first"):
        assert f"FAILED test_agent.py::{name}" in out


def test_plugin_outcomes_and_messages(suite: pytest.Pytester) -> None:
    result = suite.runpytest_subprocess("-p", "no:cacheprovider", "-rf", "--strict-markers", timeout=120)
    _check(result)


def test_plugin_under_xdist(suite: pytest.Pytester) -> None:
    result = suite.runpytest_subprocess("-p", "no:cacheprovider", "-rf", "-n", "2", timeout=180)
    _check(result)
    assert "2 workers" in result.stdout.str()


def test_marker_without_evaluators_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.evaltrace(evaluator=[])
        def test_x():
            pass
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", timeout=120)
    assert "unknown argument(s) ['evaluator']; use evaluators=[...]" in result.stdout.str() + result.stderr.str()
