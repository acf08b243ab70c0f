"""Embedding calls record what was embedded (``input.value``) when content is captured, and nothing otherwise."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from openai_replay import Interaction, client, load
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from tests_paths import cassette

from evaltrace import mapping
from evaltrace._internal import settings

pytestmark = pytest.mark.usefixtures("cassettes", "instrumented")

SINGLE = "test_embeddings_with_content.yaml"  # input: one string
BATCH = "test_embeddings_with_batch_input.yaml"  # input: three strings


@pytest.fixture
def capture_settings() -> Iterator[list[settings.CaptureSettings]]:
    """Install the settings a test appends (the ``instrumented`` fixture's are restored afterwards)."""
    installed: list[settings.CaptureSettings] = []
    previous = settings.get()
    yield installed
    settings.replace(previous)


async def _embed(item: Interaction, is_async: bool, **request: Any) -> Any:
    api, _ = client([item], is_async)
    result = api.embeddings.create(**{**item.request, **request})
    return await result if is_async else result


def _input(exporter: InMemorySpanExporter) -> Any:
    (span,) = exporter.get_finished_spans()
    attrs = span.attributes or {}
    assert attrs["input.mime_type"] == "application/json"
    return json.loads(attrs["input.value"])


@pytest.mark.parametrize("name", [SINGLE, BATCH])
async def test_embedded_texts_are_recorded_one_entry_per_input(
    name: str, is_async: bool, exporter: InMemorySpanExporter
) -> None:
    item = load(cassette(name))[0]
    response = await _embed(item, is_async)
    texts = item.request["input"]
    expected = [texts] if isinstance(texts, str) else texts
    assert _input(exporter) == expected
    assert len(response.data) == len(expected)  # entry i is the text of embedding i


async def test_the_recorded_input_is_what_was_sent_not_what_the_list_became(
    is_async: bool, exporter: InMemorySpanExporter
) -> None:
    """The attribute is built when the span is read: a list changed after the call must not show through."""
    item = load(cassette(BATCH))[0]
    texts = list(item.request["input"])
    await _embed(item, is_async, input=texts)
    texts.append("added after the call")
    texts[0] = "changed after the call"
    assert _input(exporter) == item.request["input"]


async def test_embeddings_input_is_capped_as_valid_json(
    is_async: bool, exporter: InMemorySpanExporter, capture_settings: list[settings.CaptureSettings]
) -> None:
    settings.replace(settings.CaptureSettings(capture_content=True, max_attribute_length=120))
    item = load(cassette(BATCH))[0]
    await _embed(item, is_async, input=item.request["input"] * 20)
    (span,) = exporter.get_finished_spans()
    value = str((span.attributes or {})["input.value"])
    assert len(value) <= 120
    marker = json.loads(value)
    assert marker["evaltrace.truncated"] is True
    assert marker["original_length"] > 120


@pytest.mark.parametrize(
    ("tokens", "expected"),
    [
        ([1212, 318, 257, 1332], [{"type": "tokens", "count": 4}]),
        ([[1212, 318], [257, 1332, 13]], [{"type": "tokens", "count": 2}, {"type": "tokens", "count": 3}]),
    ],
    ids=["one_tokenised_input", "batch_of_tokenised_inputs"],
)
async def test_token_id_inputs_are_recorded_as_counts_not_ids(
    tokens: list[Any], expected: list[dict[str, Any]], is_async: bool, exporter: InMemorySpanExporter
) -> None:
    item = load(cassette(SINGLE))[0]
    await _embed(item, is_async, input=tokens)
    assert _input(exporter) == expected


async def test_nothing_is_recorded_with_content_capture_off(
    is_async: bool, exporter: InMemorySpanExporter, capture_settings: list[settings.CaptureSettings]
) -> None:
    settings.replace(settings.CaptureSettings(capture_content=False))
    item = load(cassette(BATCH))[0]
    await _embed(item, is_async)
    (span,) = exporter.get_finished_spans()
    attrs = span.attributes or {}
    assert "input.value" not in attrs
    assert "input.mime_type" not in attrs
    assert attrs["gen_ai.usage.input_tokens"] == load(cassette(BATCH))[0].json["usage"]["prompt_tokens"]


async def test_an_embeddings_root_span_gives_the_trace_its_input(
    is_async: bool, exporter: InMemorySpanExporter
) -> None:
    """What evaluators see: a trace that is one embeddings call has the embedded texts as its input."""
    item = load(cassette(BATCH))[0]
    await _embed(item, is_async)
    trace = mapping.trace_from_spans(list(exporter.get_finished_spans()))
    assert trace.input == {"input": item.request["input"]}
