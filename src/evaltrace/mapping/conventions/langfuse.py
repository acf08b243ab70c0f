"""Langfuse SDK attributes on a model call: ``langfuse.observation.model.name`` and ``.completion_start_time``.

The Langfuse SDKs (and apps that set Langfuse's attributes for its display) record the model of a generation as
``langfuse.observation.model.name`` and when its first token arrived as ``langfuse.observation.completion_start_time``,
an ISO-8601 timestamp (older SDKs JSON-encode it a second time, quotes included).
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping
from typing import Any

from evaltrace._internal import semconv as sc
from evaltrace.mapping.conventions._common import StreamTiming

MODEL = "langfuse.observation.model.name"
COMPLETION_START = sc.LANGFUSE_OBSERVATION_COMPLETION_START_TIME
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def stream_timing(attributes: Mapping[str, Any], start_ns: int) -> StreamTiming | None:
    """Return the first token's time from ``completion_start_time``, or None (absent or not a timestamp)."""
    value = attributes.get(COMPLETION_START)
    if not isinstance(value, str) or not value:
        return None
    if value.startswith('"'):
        try:
            value = json.loads(value)
        except ValueError:
            return None
    try:
        moment = dt.datetime.fromisoformat(str(value))
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.UTC)
    delta = moment - _EPOCH
    ns = (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1000
    return StreamTiming(first_chunk_s=max(0, ns - start_ns) / 1e9)
