"""The ``evaltrace`` pytest plugin (entry point ``pytest11``): the ``evaltrace_capture`` fixture and marker.

* ``evaltrace_capture``: a :class:`evaltrace.testing.TraceCapture` active for the test (setup, body and
  teardown of the fixtures that request it after it); ``.trace`` is the test's Trace.
* ``@pytest.mark.evaltrace(ToolCalled("get_weather"), NoPII())`` (or ``evaluators=[...]``): after the test
  body passes, every trace it produced is run through the evaluators; an evaluation that fails, errors or was
  not evaluated fails the test with the evaluators' reasons. A test that produced no trace fails too.

Every worker of pytest-xdist loads the plugin and captures its own tests, so it works with ``-n``.
This module is imported by every pytest run where evaltrace is installed: it imports nothing heavy up front.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from evaltrace.testing import TraceCapture

MARKER = "evaltrace"
FIXTURE = "evaltrace_capture"
_CAPTURE_KEY = pytest.StashKey["TraceCapture"]()


def pytest_configure(config: pytest.Config) -> None:
    """Register the marker, so ``--strict-markers`` accepts it."""
    config.addinivalue_line(
        "markers",
        f"{MARKER}(*evaluators, evaluators=[...]): run the traces the test produced through evaluators after "
        "the test body; fail the test unless every evaluation passes",
    )


@pytest.fixture
def evaltrace_capture(request: pytest.FixtureRequest) -> Iterator[TraceCapture]:
    """Capture the spans of this test in memory (evaltrace's provider is restored afterwards)."""
    from evaltrace.testing import capture_traces

    with capture_traces() as capture:
        request.node.stash[_CAPTURE_KEY] = capture
        yield capture


def _marker_evaluators(marker: pytest.Mark) -> list[Any]:
    """The evaluators a marker names, positionally and/or as ``evaluators=[...]``."""
    unknown = set(marker.kwargs) - {"evaluators"}
    if unknown:
        raise pytest.UsageError(f"@pytest.mark.{MARKER}: unknown argument(s) {sorted(unknown)}; use evaluators=[...]")
    evaluators = [*marker.args, *marker.kwargs.get("evaluators", ())]
    if not evaluators:
        raise pytest.UsageError(f"@pytest.mark.{MARKER} needs evaluators, e.g. @pytest.mark.{MARKER}(NoPII())")
    return evaluators


def _evaluate_capture(capture: TraceCapture, evaluators: list[Any]) -> str | None:
    """The failure message of the capture's traces under ``evaluators``; None when every evaluation passed."""
    from evaltrace.testing import evaluate, failure_message

    traces = capture.traces
    if not traces:
        return (
            f"evaltrace: not evaluated: the test produced no trace for @pytest.mark.{MARKER} to evaluate "
            "(is the code under test traced?)"
        )
    messages = [failure_message(trace, evaluate(trace, *evaluators)) for trace in traces]
    failed = [message for message in messages if message is not None]
    return "\n".join(failed) if failed else None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    """Run a marked test's body under a capture (its fixture's, if it uses one), then its evaluators."""
    marker = item.get_closest_marker(MARKER)
    if marker is None:
        return (yield)
    evaluators = _marker_evaluators(marker)
    capture = item.stash.get(_CAPTURE_KEY, None)
    if capture is None:
        from evaltrace.testing import capture_traces

        with capture_traces() as capture:
            result = yield
    else:
        result = yield
    # Reached only when the body passed: a failing body keeps its own failure, unmasked by ours.
    message = _evaluate_capture(capture, evaluators)
    if message is not None:
        pytest.fail(message, pytrace=False)
    return result
