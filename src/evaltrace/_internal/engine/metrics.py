"""GenAI client metrics (semconv v1.41, conventions.md 1.7) with the spec's bucket boundaries."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import opentelemetry.metrics._internal as _metrics_state
from opentelemetry.metrics import Histogram, MeterProvider, get_meter_provider

from evaltrace._internal import semconv as sc
from evaltrace._internal.tracing import INSTRUMENTATION_NAME
from evaltrace._version import __version__

if TYPE_CHECKING:
    from evaltrace._internal.engine.outcome import Summary

DURATION_BUCKETS = (0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92)
TOKEN_BUCKETS = (
    1,
    4,
    16,
    64,
    256,
    1024,
    4096,
    16384,
    65536,
    262144,
    1048576,
    4194304,
    16777216,
    67108864,
)


class MetricAttributes:
    """The attribute sets calls of one shape (operation, provider, model, server) record with.

    Built once per response model and then shared: metric attributes are identical for most calls, and building
    three dicts per call was a measurable share of the per-call cost. The dicts are never mutated.
    """

    __slots__ = ("_by_model", "base")

    def __init__(self, base: dict[str, Any]) -> None:
        self.base = base
        self._by_model: dict[str | None, tuple[dict[str, Any], dict[str, Any], dict[str, Any]]] = {}

    def for_model(self, response_model: str | None) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
        """(call, input-token, output-token) attributes for a call answered by ``response_model``."""
        try:
            return self._by_model[response_model]
        except KeyError:
            pass
        attrs = {**self.base, sc.GEN_AI_RESPONSE_MODEL: response_model} if response_model else self.base
        sets = (
            attrs,
            {**attrs, sc.GEN_AI_TOKEN_TYPE: sc.TOKEN_TYPE_INPUT},
            {**attrs, sc.GEN_AI_TOKEN_TYPE: sc.TOKEN_TYPE_OUTPUT},
        )
        if len(self._by_model) < 64:  # bounded: response model names come from the server
            self._by_model[response_model] = sets
        return sets


class Instruments:
    """The four client histograms, created once per instrumentation."""

    __slots__ = ("duration", "follows_global", "time_per_chunk", "time_to_first_chunk", "token_usage")

    def __init__(self, meter_provider: MeterProvider | None = None) -> None:
        provider = meter_provider if meter_provider is not None else get_meter_provider()
        # On the global provider, nothing is recorded until the application sets a MeterProvider (until then the
        # API's proxy instruments drop every measurement): skip the work, as the spec's "when a MeterProvider is
        # configured" allows. Checked per call, so a provider set after instrument() is picked up.
        self.follows_global = meter_provider is None and hasattr(_metrics_state, "_METER_PROVIDER")
        meter = provider.get_meter(INSTRUMENTATION_NAME, __version__)
        self.duration: Histogram = meter.create_histogram(
            sc.METRIC_CLIENT_OPERATION_DURATION,
            unit="s",
            description="GenAI operation duration",
            explicit_bucket_boundaries_advisory=list(DURATION_BUCKETS),
        )
        self.token_usage: Histogram = meter.create_histogram(
            sc.METRIC_CLIENT_TOKEN_USAGE,
            unit="{token}",
            description="Number of input and output tokens used",
            explicit_bucket_boundaries_advisory=list(TOKEN_BUCKETS),
        )
        self.time_to_first_chunk: Histogram = meter.create_histogram(
            sc.METRIC_CLIENT_TIME_TO_FIRST_CHUNK,
            unit="s",
            description="Time to receive the first chunk of a streamed response",
            explicit_bucket_boundaries_advisory=list(DURATION_BUCKETS),
        )
        self.time_per_chunk: Histogram = meter.create_histogram(
            sc.METRIC_CLIENT_TIME_PER_OUTPUT_CHUNK,
            unit="s",
            description="Time between consecutive chunks of a streamed response, after the first",
            explicit_bucket_boundaries_advisory=list(DURATION_BUCKETS),
        )

    def enabled(self) -> bool:
        """False while these instruments follow the global provider and none is set (nothing would record)."""
        return not self.follows_global or _metrics_state._METER_PROVIDER is not None

    def record_call(
        self, attributes: MetricAttributes, elapsed: float, summary: Summary | None, error_type: str | None
    ) -> None:
        """Record duration (with error.type on failure) and token usage of one finished call."""
        if self.follows_global and _metrics_state._METER_PROVIDER is None:
            return
        model = summary.response_model if summary is not None else None
        attrs, input_attrs, output_attrs = attributes.for_model(model)
        if error_type is not None:
            attrs = {**attrs, sc.ERROR_TYPE: error_type}
        self.duration.record(elapsed, attrs)
        if summary is None:
            return
        if summary.input_tokens is not None:
            self.token_usage.record(summary.input_tokens, input_attrs)
        if summary.output_tokens is not None:
            self.token_usage.record(summary.output_tokens, output_attrs)

    def record_first_chunk(self, base: dict[str, Any], seconds: float) -> None:
        """Record the time to the first chunk of one stream (the per-chunk gaps are recorded as they arrive)."""
        if self.follows_global and _metrics_state._METER_PROVIDER is None:
            return
        self.time_to_first_chunk.record(seconds, base)
