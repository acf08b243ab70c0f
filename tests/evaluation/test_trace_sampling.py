"""Deterministic evaluation sampling (issue 15): by a hash of the trace id, the same in every process and
for every evaluator of a sample group, nested across rates; never a per-evaluator coin toss."""

from __future__ import annotations

import subprocess
import sys

import pytest

from evaltrace.evaluation import EvaluatorSpec, evaluator
from evaltrace.evaluation.trace_sampling import trace_fraction

from .conftest import MakePipeline

IDS = [(0x5F3A_0000_0000_0000_0000_0000_0000_0000 + i * 0x9E37_79B9_7F4A_7C15) % (1 << 128) for i in range(4000)]


def _sampled(rate: float, group: str = "") -> set[int]:
    return {t for t in IDS if trace_fraction(t, group) < rate}


def test_fraction_is_uniform_nested_and_salted_by_group() -> None:
    tenth, third = _sampled(0.1), _sampled(0.3)
    assert abs(len(tenth) / len(IDS) - 0.1) < 0.02 and abs(len(third) / len(IDS) - 0.3) < 0.03
    assert tenth < third  # a trace in the 10% sample is in the 30% sample
    other = _sampled(0.3, "judges")
    assert abs(len(other) / len(IDS) - 0.3) < 0.03
    # Another group draws an independent sample: its overlap with the default group's is about 0.3 x 0.3.
    assert abs(len(third & other) / len(IDS) - 0.09) < 0.03
    # Ids whose high bits are all zero (generators that fill only the low 56 bits) still spread.
    low = [i * 0x1F1F_1F1F for i in range(1, 2001)]
    assert abs(sum(trace_fraction(t) < 0.5 for t in low) / len(low) - 0.5) < 0.05


def test_every_process_draws_the_same_sample() -> None:
    """Worker replicas and the in-process processor agree: no per-process salt (Python's hash() has one)."""
    script = (
        "from evaltrace.evaluation.trace_sampling import trace_fraction\n"
        f"ids = {IDS[:500]!r}\n"
        "print(sorted(t for t in ids if trace_fraction(t, 'g') < 0.25))"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == str(sorted(t for t in IDS[:500] if trace_fraction(t, "g") < 0.25))


def test_evaluators_of_a_group_judge_the_same_traces_and_all_their_spans(make_pipeline: MakePipeline) -> None:
    first = EvaluatorSpec(evaluator(name="first")(lambda t: True), sample_rate=0.3)
    second = EvaluatorSpec(evaluator(name="second")(lambda t: True), sample_rate=0.3)
    apart = EvaluatorSpec(evaluator(name="apart")(lambda t: True), sample_rate=0.3, sample_group="other")
    # 400 spans: at load they may outlast the default 2 s hold (wall-clock time) and go out without their results.
    p = make_pipeline([first, second, apart], hold_timeout_s=600)
    for index in range(200):
        with p.tracer.start_as_current_span(f"root-{index}"):
            with p.tracer.start_as_current_span(f"child-{index}"):
                pass
    p.flush()
    by_trace: dict[int, list[set[str]]] = {}
    for span in p.spans():
        judged = {n for n in ("first", "second", "apart") if f"evaltrace.eval.{n}.passed" in span.attributes}
        assert span.context is not None
        by_trace.setdefault(span.context.trace_id, []).append(judged)
    for trace_id, spans in by_trace.items():
        expected_group = trace_fraction(trace_id) < 0.3
        expected_apart = trace_fraction(trace_id, "other") < 0.3
        for judged in spans:  # both spans of a trace: all in, or all out
            assert ("first" in judged) is ("second" in judged) is expected_group
            assert ("apart" in judged) is expected_apart
    counted = sum(len(spans) for t, spans in by_trace.items() if trace_fraction(t) >= 0.3) * 2
    counted += sum(len(spans) for t, spans in by_trace.items() if trace_fraction(t, "other") >= 0.3)
    assert p.processor.stats()["sampled_out"] == counted


def test_a_sample_group_longer_than_the_hash_salt_is_refused() -> None:
    with pytest.raises(ValueError, match="sample_group"):
        EvaluatorSpec(evaluator(name="x")(lambda t: True), sample_rate=0.5, sample_group="a-group-name-over-16-bytes")
