"""A huge chat message is recorded as the valid-JSON truncation marker, within the cap (bounded capture)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from openai_replay import client, load
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from tests_paths import cassette

from evaltrace._internal import settings
from evaltrace._internal.jsonutil import TRUNCATED_KEY

pytestmark = pytest.mark.usefixtures("cassettes", "instrumented")

CAP = 2_000


@pytest.fixture
def small_cap(instrumented: object) -> Iterator[None]:
    """The cap for this test, installed after the ``instrumented`` fixture's settings and restored after it."""
    previous = settings.replace(settings.CaptureSettings(max_attribute_length=CAP))
    yield
    settings.replace(previous)


@pytest.mark.usefixtures("small_cap")
async def test_a_huge_message_content_is_capped(is_async: bool, exporter: InMemorySpanExporter) -> None:
    content = "é" * 2_000_000
    (item,) = load(cassette("test_chat_completion_with_content.yaml"))
    api, _ = client([item], is_async)
    result = api.chat.completions.create(**{**item.request, "messages": [{"role": "user", "content": content}]})
    if is_async:
        await result
    (span,) = exporter.get_finished_spans()
    value = (span.attributes or {})["gen_ai.input.messages"]
    assert isinstance(value, str) and len(value) <= CAP
    marker = json.loads(value)
    assert marker[TRUNCATED_KEY] is True and marker["original_length"] >= len(content)
