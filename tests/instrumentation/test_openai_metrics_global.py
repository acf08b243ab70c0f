"""Metrics on the global MeterProvider: nothing is recorded (or built) until the application sets one.

Runs in a subprocess: the global MeterProvider can be set only once per process.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

_SCRIPT = textwrap.dedent(
    """
    import sys
    sys.path.insert(0, {tests!r})
    from opentelemetry import metrics
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider

    from evaltrace._internal import tracing
    from evaltrace.instrumentation.openai import instrument_openai
    from openai_replay import client, json_interaction
    from test_openai_safety import CHAT, COMPLETION

    tracing.set_tracer_provider(TracerProvider())
    instrument_openai()  # no meter_provider: follows the global one, which is not set yet
    api, _ = client([json_interaction(CHAT, COMPLETION)] * 2, is_async=False)
    request = {{"model": "gpt-4o-mini", "messages": [{{"role": "user", "content": "hi"}}]}}
    from evaltrace._internal.openai.metrics import Instruments
    follows_global = Instruments()
    api.chat.completions.create(**request)  # before any MeterProvider: must not be recorded anywhere
    print(follows_global.enabled())  # False: no metric work at all until a provider is set
    reader = InMemoryMetricReader()
    metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))
    print(follows_global.enabled())
    api.chat.completions.create(**request)  # after: recorded, through the proxy instruments
    data = reader.get_metrics_data()
    found = {{m.name: m for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics}}
    (point,) = found["gen_ai.client.operation.duration"].data.data_points
    print(point.count, point.attributes["gen_ai.response.model"])
    """
)


def test_global_meter_provider_set_after_instrument_records_later_calls_only() -> None:
    tests = str(Path(__file__).parent)
    done = subprocess.run(
        [sys.executable, "-c", _SCRIPT.format(tests=tests)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "True", "1", "gpt-4o-mini-2024-07-18"]
