"""``converse`` and ``converse_stream`` answers no recording holds, through a real boto3 client: the same result
whole or streamed.

Synthetic: the answers are shaped as botocore's bedrock-runtime service model allows (botocore parses them), served
from the replay server on 127.0.0.1; streams as AWS event-stream frames.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

boto3 = pytest.importorskip("boto3")

from bedrock_replay import attrs_json, client, converse_frame, only_span, read_stream, synthetic  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402

from cassettes import ReplayServer  # noqa: E402
from evaltrace import pricing  # noqa: E402

USER = [{"role": "user", "content": [{"text": "hi"}]}]
USAGE = {"inputTokens": 1000, "outputTokens": 100, "totalTokens": 1100}
ROUTER = "arn:aws:bedrock:us-east-1:123456789012:default-prompt-router/anthropic.claude:1"
ROUTED = "arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.anthropic.claude-3-haiku-20240307-v1:0"


pytestmark = pytest.mark.usefixtures("bedrock_instrumented")


def _whole(model: str, content: list[dict[str, Any]], stop: str = "end_turn", **extra: Any) -> None:
    answer = {
        "output": {"message": {"role": "assistant", "content": content}},
        "stopReason": stop,
        "usage": USAGE,
        "metrics": {"latencyMs": 10},
        **extra,
    }
    served = synthetic(f"{model}/converse", json.dumps(answer).encode(), [("Content-Type", "application/json")])
    with ReplayServer([served]) as server:
        client(server).converse(modelId=model, messages=USER)


def _streamed(model: str, events: list[tuple[str, dict[str, Any]]], metadata: dict[str, Any] | None = None) -> None:
    frames = [converse_frame("messageStart", {"role": "assistant"})]
    frames += [converse_frame(kind, body) for kind, body in events]
    frames.append(converse_frame("messageStop", {"stopReason": "end_turn"}))
    frames.append(converse_frame("metadata", {"usage": USAGE, "metrics": {"latencyMs": 10}, **(metadata or {})}))
    with ReplayServer([synthetic(f"{model}/converse-stream", b"".join(frames))]) as server:
        read_stream(client(server).converse_stream(modelId=model, messages=USER))


@pytest.mark.parametrize("stream", [False, True], ids=["converse", "converse_stream"])
def test_a_prompt_routers_chosen_model_is_the_response_model_and_is_priced(
    stream: bool, exporter: InMemorySpanExporter
) -> None:
    assert pricing.price_of(ROUTER, "aws.bedrock") is None  # the router itself has no price
    trace = {"trace": {"promptRouter": {"invokedModelId": ROUTED}}}
    if stream:
        _streamed(ROUTER, [("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "Hi"}})], trace)
    else:
        _whole(ROUTER, [{"text": "Hi"}], **trace)
    a = only_span(exporter).attributes
    assert a["gen_ai.request.model"] == ROUTER
    assert a["gen_ai.response.model"] == ROUTED
    price = pricing.price_of(ROUTED, "aws.bedrock")
    assert price is not None
    assert a["evaltrace.cost_usd"] == pytest.approx((1000 * price.input + 100 * price.output) / 1e6)


@pytest.mark.parametrize("stream", [False, True], ids=["converse", "converse_stream"])
def test_without_a_router_there_is_no_response_model(stream: bool, exporter: InMemorySpanExporter) -> None:
    model = "us.anthropic.claude-3-haiku-20240307-v1:0"
    if stream:
        _streamed(model, [("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "Hi"}})])
    else:
        _whole(model, [{"text": "Hi"}])
    span = only_span(exporter)
    assert "gen_ai.response.model" not in span.attributes
    assert attrs_json(span, "gen_ai.output.messages")[0]["parts"] == [{"type": "text", "content": "Hi"}]


def _parts(exporter: InMemorySpanExporter) -> list[dict[str, Any]]:
    spans = exporter.get_finished_spans()
    exporter.clear()
    assert len(spans) == 1
    parts: list[dict[str, Any]] = attrs_json(spans[0], "gen_ai.output.messages")[0]["parts"]
    return parts


def test_an_image_answer_is_the_same_part_streamed_or_whole(exporter: InMemorySpanExporter) -> None:
    model = "us.amazon.nova-2-omni-v1:0"
    image = bytes(range(12))
    _whole(
        model, [{"text": "Here:"}, {"image": {"format": "png", "source": {"bytes": base64.b64encode(image).decode()}}}]
    )
    whole = _parts(exporter)
    _streamed(
        model,
        [
            ("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "Here:"}}),
            ("contentBlockStart", {"contentBlockIndex": 1, "start": {"image": {"format": "png"}}}),
            *[
                ("contentBlockDelta", {"contentBlockIndex": 1, "delta": {"image": {"source": {"bytes": piece}}}})
                for piece in (base64.b64encode(image[:6]).decode(), base64.b64encode(image[6:]).decode())
            ],
            ("contentBlockStop", {"contentBlockIndex": 1}),
        ],
    )
    streamed = _parts(exporter)
    assert (
        whole
        == streamed
        == [
            {"type": "text", "content": "Here:"},
            {
                "type": "uri",
                "modality": "image",
                "uri": "data:image/png;base64,<omitted 12 bytes>",
                "mime_type": "image/png",
            },
        ]
    )


def test_a_cited_answer_is_the_same_streamed_or_whole(exporter: InMemorySpanExporter) -> None:
    """The whole answer's ``citationsContent`` records its text, not its citations: so does the stream."""
    model = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"
    citation = {"title": "doc", "location": {"documentChar": {"documentIndex": 0, "start": 0, "end": 5}}}
    cited = {"citationsContent": {"content": [{"text": "Paris"}], "citations": [citation]}}
    _whole(model, [{"text": "The capital is "}, cited])
    whole = _parts(exporter)
    _streamed(
        model,
        [
            ("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "The capital is "}}),
            ("contentBlockDelta", {"contentBlockIndex": 1, "delta": {"text": "Paris"}}),
            ("contentBlockDelta", {"contentBlockIndex": 1, "delta": {"citation": citation}}),
        ],
    )
    streamed = _parts(exporter)
    assert [p["content"] for p in whole] == ["The capital is ", "Paris"]
    assert "".join(p["content"] for p in whole) == "".join(p["content"] for p in streamed) == "The capital is Paris"


def test_an_image_answer_in_s3_is_its_uri_streamed_or_whole(exporter: InMemorySpanExporter) -> None:
    """An image the model answers with as an S3 location (``ImageSource.s3Location``, which botocore's model allows
    in a whole answer and in a stream's ``ImageBlockDelta``): its URI, not an empty inline image."""
    model = "us.amazon.nova-2-omni-v1:0"
    location = {"uri": "s3://bucket/answer.png", "bucketOwner": "123456789012"}
    _whole(model, [{"image": {"format": "png", "source": {"s3Location": location}}}])
    whole = _parts(exporter)
    _streamed(
        model,
        [
            ("contentBlockStart", {"contentBlockIndex": 0, "start": {"image": {"format": "png"}}}),
            ("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"image": {"source": {"s3Location": location}}}}),
            ("contentBlockStop", {"contentBlockIndex": 0}),
        ],
    )
    streamed = _parts(exporter)
    assert whole == streamed == [{"type": "uri", "modality": "image", "uri": "s3://bucket/answer.png"}]
