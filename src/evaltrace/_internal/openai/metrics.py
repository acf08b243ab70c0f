"""GenAI client metrics (semconv v1.41, conventions.md 1.7) with the spec's bucket boundaries."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from opentelemetry.metrics import Histogram, MeterProvider, get_meter_provider

from evaltrace._internal import semconv as sc
from evaltrace._internal.tracing import INSTRUMENTATION_NAME
from evaltrace._version import __version__

if TYPE_CHECKING:
    from evaltrace._internal.openai.response import Summary

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


class Instruments:
    """The four client histograms, created once per instrumentation."""

    __slots__ = ("duration", "time_per_chunk", "time_to_first_chunk", "token_usage")

    def __init__(self, meter_provider: MeterProvider | None = None) -> None:
        provider = meter_provider if meter_provider is not None else get_meter_provider()
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

    def record_call(
        self, base: dict[str, Any], elapsed: float, summary: Summary | None, error_type: str | None
    ) -> None:
        """Record duration (with error.type on failure) and token usage of one finished call."""
        if summary is not None and summary.response_model:
            attrs = {**base, sc.GEN_AI_RESPONSE_MODEL: summary.response_model}
        else:
            attrs = dict(base)
        if error_type is not None:
            attrs[sc.ERROR_TYPE] = error_type
        self.duration.record(elapsed, attrs)
        if summary is None:
            return
        if summary.input_tokens is not None:
            self.token_usage.record(summary.input_tokens, {**attrs, sc.GEN_AI_TOKEN_TYPE: sc.TOKEN_TYPE_INPUT})
        if summary.output_tokens is not None:
            self.token_usage.record(summary.output_tokens, {**attrs, sc.GEN_AI_TOKEN_TYPE: sc.TOKEN_TYPE_OUTPUT})

    def record_stream(self, base: dict[str, Any], first: float | None, per_chunk: float | None) -> None:
        """Record time to first chunk and the mean time per output chunk of one stream."""
        if first is not None:
            self.time_to_first_chunk.record(first, base)
        if per_chunk is not None:
            self.time_per_chunk.record(per_chunk, base)
