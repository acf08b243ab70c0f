"""Evaluation metrics on the global MeterProvider: skipped while none is set, recorded from the moment one is.

Runs in a subprocess: the global MeterProvider can be set only once per process. Real SDK MeterProvider with an
InMemoryMetricReader; the results are recorded through ``PipelineMetrics`` as the pipeline records them.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

_SCRIPT = textwrap.dedent(
    """
    import datetime as dt
    from opentelemetry import metrics
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    from evaltrace.evaluation.telemetry import PipelineMetrics
    from evaltrace.schema import EvaluationResult

    start = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    end = start + dt.timedelta(milliseconds=250)

    def result(name, passed):
        return EvaluationResult(evaluator=name, passed=passed, score=0.9 if passed else 0.1, started_at=start,
                                finished_at=end)

    follows_global = PipelineMetrics(None, lambda: 0, dict, dict, max_evaluator_names=2)
    follows_global.record_result(result("early", True))  # before any MeterProvider: recorded nowhere
    reader = InMemoryMetricReader()
    metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))
    follows_global.record_result(result("late", True))
    follows_global.record_result(result("late", False))
    follows_global.record_result(result("third", True))  # a third name: past the bound of 2, so "_other"
    found = {
        m.name: m
        for rm in reader.get_metrics_data().resource_metrics
        for sm in rm.scope_metrics
        for m in sm.metrics
    }
    counts = sorted(
        (p.attributes["evaltrace.evaluator"], p.attributes["evaltrace.evaluation.outcome"], p.value)
        for p in found["evaltrace.evaluation.count"].data.data_points
    )
    print(counts)
    print(sorted((p.attributes["gen_ai.evaluation.name"], p.count) for p in found["gen_ai.evaluation.score"].data.data_points))
    print(sorted((p.attributes["evaltrace.evaluator"], p.count, p.sum) for p in found["evaltrace.evaluation.duration"].data.data_points))
    """
)


def test_evaluation_metrics_follow_a_global_provider_set_after_the_pipeline_from_its_next_result() -> None:
    done = subprocess.run([sys.executable, "-c", _SCRIPT], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    counts, scores, durations = done.stdout.splitlines()
    # Nothing of "early" (no provider then); every later result counted once. The name seen before the provider
    # still took its place in the bound: the first names seen stay the kept ones, provider or not.
    assert counts == "[('_other', 'pass', 1), ('late', 'fail', 1), ('late', 'pass', 1)]"
    assert scores == "[('_other', 1), ('late', 1), ('late', 1)]"
    assert durations == "[('_other', 1, 0.25), ('late', 2, 0.5)]"
