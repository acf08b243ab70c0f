"""A late result's OpenInference carrier span (kind EVALUATOR, one link, ``evaluations.*``) in a real Phoenix.

What Phoenix 20.26.1 does with it, read from its source and checked here over OTLP alone (no score sink): it
stores the carrier as an ``EVALUATOR`` span under its parent, with the feedback attributes as span attributes, and
does **not** turn it into an annotation of the linked span (``phoenix.trace.otel.decode_otlp_span`` never reads
``links``, and OTLP ingestion enqueues spans only, never annotations). The annotation on the target comes from
evaltrace's Phoenix score sink (``configure(phoenix=...)``), the second half of the test.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from phoenix_helpers import Phoenix, poll

import evaltrace
from evaltrace.evaluation import EvaluatorSpec, evaluator
from evaltrace.schema import Trace

release = threading.Event()


@evaluator(name="late_check", threshold=0.5)
def late_check(trace: Trace) -> float:
    release.wait(10)
    return 0.75


@evaltrace.agent(name="carrier-app")
def answer(question: str) -> str:
    return f"answer to {question}"


def _run(handle: Any) -> None:
    release.clear()
    assert answer("q").startswith("answer")
    time.sleep(0.5)  # past the 0.05 s hold deadline: the result is late whenever it comes from here on
    release.set()
    assert handle.force_flush(30_000)


def _by_name(spans: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {span["name"]: span for span in spans}


OPTIONS = {"hold_timeout_s": 0.05, "dead_letter_dir": None, "emit_log_events": False, "sink_schedule_delay_s": 0.05}


def test_phoenix_stores_the_carrier_as_an_evaluator_span_and_the_sink_annotates_the_target(
    phoenix: Phoenix, project: str
) -> None:
    spec = EvaluatorSpec(late_check, span_kinds={"agent"})
    # Over OTLP only: no score sink, so only the carrier span can tell Phoenix about the result.
    handle = evaltrace.configure(
        "it-carrier", otlp_endpoint=phoenix.url, local_store=False, evaluators=[spec], evaluation_options=OPTIONS
    )
    _run(handle)
    spans = poll(lambda: (found := phoenix.spans(project)) and len(found) >= 2 and _by_name(found))
    target, carrier = spans["invoke_agent carrier-app"], spans["evaluation late_check"]
    assert carrier["span_kind"] == "EVALUATOR"
    assert carrier["parent_id"] == target["context"]["span_id"]
    attributes = carrier["attributes"]
    assert attributes["evaluations.0.evaluation.name"] == "late_check"
    assert attributes["evaluations.0.evaluation.score"] == 0.75
    assert attributes["evaluations.0.evaluation.label"] == "pass"
    # Phoenix 20.26.1 makes no annotation of it: the target has none (checked after the carrier was stored).
    assert phoenix.span_annotations(project, target["context"]["span_id"]) == []
    handle.shutdown()

    # With the Phoenix score sink, the same result is an annotation of its target span.
    handle = evaltrace.configure(
        "it-carrier", phoenix=phoenix.url, local_store=False, evaluators=[spec], evaluation_options=OPTIONS
    )
    _run(handle)
    target_ids = poll(
        lambda: [
            s["context"]["span_id"]
            for s in phoenix.spans(project)
            if s["name"] == "invoke_agent carrier-app" and s["context"]["span_id"] != target["context"]["span_id"]
        ]
    )
    (annotation,) = poll(lambda: phoenix.span_annotations(project, target_ids[0]))
    assert annotation["name"] == "late_check"
    assert annotation["result"]["score"] == 0.75 and annotation["result"]["label"] == "pass"
