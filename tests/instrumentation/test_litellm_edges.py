"""LiteLLM edge cases: ``n`` > 1 stream ends, content capture off for text completions, token-id prompts, a failed
Responses body, streamed reasoning of a text completion and a ``Router`` Responses alias.

The real ``litellm`` is pointed (``api_base``) at the replay server on 127.0.0.1 serving the recorded OpenAI traffic
(tests/fixtures/openai-cassettes) and the Anthropic fixtures (tests/fixtures/anthropic), as in
test_litellm_operations.py; an OpenAI ``/v1/completions`` body is written in the API reference's shape (no recording
of one exists).
"""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # LiteLLM fetches its price map at import otherwise

import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

litellm = pytest.importorskip("litellm")

from litellm_replay import CLAUDE, LITELLM_WARNINGS, OPENAI, close_clients, complete_text, drain, responses_item  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402
from opentelemetry.trace import StatusCode  # noqa: E402

from cassettes import FIXTURES, Recorded, ReplayServer, load_cassette  # noqa: E402
from evaltrace._internal import settings  # noqa: E402
from evaltrace.instrumentation.litellm.codec import LiteLLMChatAccumulator  # noqa: E402

N_2 = OPENAI / "test_chat_completion_multiple_choices_streaming.yaml"  # n=2, streamed, include_usage


@pytest.fixture
def no_content(litellm_instrumented: object) -> Iterator[None]:
    previous = settings.replace(settings.CaptureSettings(capture_content=False))
    yield
    settings.replace(previous)


@pytest.fixture(autouse=True)
async def _close_litellm_clients() -> AsyncIterator[None]:
    """Close and drop LiteLLM's cached clients here, not in a later test (``litellm_replay.close_clients``)."""
    yield
    await close_clients()


pytestmark = [*LITELLM_WARNINGS]


def _attrs(span: Any) -> dict[str, Any]:
    return dict(span.attributes or {})


def _n_2_request() -> tuple[Recorded, dict[str, Any]]:
    item = load_cassette(N_2)[0]
    request = item.request_json()
    return item, {"n": 2, "stream": True, "stream_options": {"include_usage": True}, "messages": request["messages"]}


def _completions_body(body: dict[str, Any], kind: str = "application/json") -> Recorded:
    return Recorded("POST", "https://api.openai.com/v1/completions", b"", 200, "OK", [("content-type", kind)],
                    json.dumps(body).encode())  # fmt: skip


_COMPLETION = {"id": "cmpl-test3", "object": "text_completion", "created": 1700000000, "model": "gpt-3.5-turbo-instruct",
               "choices": [{"text": " yes", "index": 0, "logprobs": None, "finish_reason": "stop"}],
               "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}}  # fmt: skip


# --- n > 1 streams: how they end -------------------------------------------------------------------------------


@pytest.mark.usefixtures("litellm_instrumented")
async def test_an_n_2_text_completion_stream_ends_as_litellm_ended_it(
    is_async: bool, exporter: InMemorySpanExporter
) -> None:
    """A text stream is LiteLLM's chat stream converted: choice 0's finish only (see the chat test of the same).

    The chat stream LiteLLM saw finish is reachable (async: as the argument of the generator LiteLLM reads it
    through): ``exhausted``, choice 1's finish left out of its message, none invented for it.
    """
    item, request = _n_2_request()
    with ReplayServer([item]) as server:
        prompt = request.pop("messages")[-1]["content"]
        stream = await complete_text(is_async, model="openai/gpt-4o-mini", api_base=f"{server.url}/v1", prompt=prompt,
                                     **request)  # fmt: skip
        chunks = await drain(stream, is_async)
    finishes = [(c.index, c.finish_reason) for chunk in chunks for c in chunk.choices if c.finish_reason]
    assert finishes == [(0, "stop")]  # the recording finishes both choices; LiteLLM yields one
    (span,) = exporter.get_finished_spans()
    a = _attrs(span)
    assert a["gen_ai.response.finish_reasons"] == ("stop",)
    messages = json.loads(a["gen_ai.output.messages"])
    assert [m["finish_reason"] for m in messages[:1]] == ["stop"]
    texts = ["".join(c.text or "" for chunk in chunks for c in chunk.choices if c.index == i) for i in (0, 1)]
    assert all(texts)
    assert [m["parts"] for m in messages] == [[{"type": "text", "content": t}] for t in texts]
    assert span.status.status_code is StatusCode.UNSET
    assert a["evaltrace.stream.end_reason"] == "exhausted"
    assert "finish_reason" not in messages[1]


async def test_an_async_text_streams_chat_stream_is_read_before_it_starts() -> None:
    """``atext_completion``'s chat stream is the argument of LiteLLM's generator: readable until that generator ends.

    The frame the argument lives in is gone once the stream is drained, which is why the proxy reads it when the
    call returns (``inner_stream`` then gives None, and the stream is read from its chunks alone).
    """
    from evaltrace.instrumentation.litellm.text import inner_stream

    item, request = _n_2_request()
    with ReplayServer([item]) as server:
        prompt = request.pop("messages")[-1]["content"]
        stream = await litellm.atext_completion(model="openai/gpt-4o-mini", api_base=f"{server.url}/v1",
                                                api_key="test", num_retries=0, prompt=prompt, **request)  # fmt: skip
        chat = inner_stream(stream)
        assert type(chat).__name__ == "CustomStreamWrapper"
        await drain(stream, True)
    assert chat.received_finish_reason == "stop"
    assert inner_stream(stream) is None


def _n_2_chat_stream() -> tuple[Any, list[Any]]:
    """The real ``CustomStreamWrapper`` of the recorded n=2 stream (not traced) and the chunks it yielded."""
    item, request = _n_2_request()
    with ReplayServer([item]) as server:
        stream = litellm.completion(model="openai/gpt-4o-mini", api_base=f"{server.url}/v1", api_key="test",
                                    num_retries=0, **request)  # fmt: skip
        chunks = list(stream)
    assert stream.received_finish_reason == "stop"
    return stream, chunks


def _fold(source: Any, chunks: list[Any]) -> LiteLLMChatAccumulator:
    acc = LiteLLMChatAccumulator(source)
    for chunk in chunks:
        acc.add(chunk)
    return acc


def test_an_n_2_stream_litellm_did_not_see_finish_is_not_exhausted() -> None:
    """Without LiteLLM's stream (chunks from elsewhere) nothing says it finished: choice 1's end is a cut's."""
    stream, chunks = _n_2_chat_stream()
    assert _fold(stream, chunks).end_reason() == "exhausted"
    acc = _fold(None, chunks)
    assert acc.end_reason() == "truncated"
    messages = acc.outcome().output_messages or []
    assert [m["finish_reason"] for m in messages] == ["stop", "error"]
    stream.received_finish_reason = None  # as before LiteLLM reads a finish
    assert _fold(stream, chunks).end_reason() == "truncated"


def test_an_n_2_stream_whose_chunks_finished_no_choice_is_not_exhausted() -> None:
    """LiteLLM's finish alone, no choice's finish folded (the chunks before it): cut, not ended."""
    stream, chunks = _n_2_chat_stream()
    before = [c for c in chunks if not any(choice.finish_reason for choice in c.choices)]
    assert len(before) < len(chunks)
    acc = _fold(stream, before)
    assert acc.end_reason() == "truncated"
    assert [m["finish_reason"] for m in acc.outcome().output_messages or []] == ["error", "error"]


# --- text completions: content off, token ids, streamed reasoning ----------------------------------------------


@pytest.mark.usefixtures("no_content")
@pytest.mark.parametrize("stream", [False, True])
async def test_a_text_completion_records_no_prompt_suffix_or_output_with_content_off(
    stream: bool, is_async: bool, exporter: InMemorySpanExporter
) -> None:
    prompt, suffix = "Say this is a secret", "END-OF-SECRET"
    with ReplayServer(load_cassette(OPENAI / "test_chat_completion_streaming.yaml" if stream else
                                    OPENAI / "test_chat_completion_with_content.yaml")) as server:  # fmt: skip
        response = await complete_text(is_async, model="openai/gpt-4o-mini", api_base=f"{server.url}/v1", prompt=prompt,
                                       suffix=suffix, stream=stream)  # fmt: skip
        chunks = await drain(response, is_async) if stream else [response]
    answer = "".join(c.text or "" for chunk in chunks for c in chunk.choices)
    assert answer
    (span,) = exporter.get_finished_spans()
    a = _attrs(span)
    assert a["gen_ai.operation.name"] == "text_completion"
    assert a["gen_ai.response.finish_reasons"] == ("stop",)
    for key in ("gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.system_instructions", "input.value"):
        assert key not in a
    recorded = json.dumps({k: str(v) for k, v in a.items()})
    assert prompt not in recorded and suffix not in recorded and answer not in recorded


@pytest.mark.usefixtures("litellm_instrumented")
@pytest.mark.parametrize(("prompt", "counts"), [([1212, 318, 257, 1332], [4]), ([[1212, 318], [40]], [2, 1])])
async def test_a_token_id_prompt_is_recorded_as_its_count(
    prompt: list[Any], counts: list[int], is_async: bool, exporter: InMemorySpanExporter
) -> None:
    """Token ids mean nothing without the model's tokenizer: one user message per prompt, holding the count."""
    with ReplayServer([_completions_body(_COMPLETION)]) as server:
        await complete_text(is_async, model="openai/gpt-3.5-turbo-instruct", api_base=f"{server.url}/v1", prompt=prompt)
        assert server.received[0].json()["prompt"] == prompt  # LiteLLM sent the ids as given
    (span,) = exporter.get_finished_spans()
    messages = json.loads(_attrs(span)["gen_ai.input.messages"])
    assert messages == [{"role": "user", "parts": [{"type": "tokens", "count": n}]} for n in counts]


@pytest.mark.usefixtures("litellm_instrumented")
async def test_a_streamed_text_completion_keeps_thinking_as_reasoning(
    is_async: bool, exporter: InMemorySpanExporter
) -> None:
    """LiteLLM's text stream carries the chat stream's ``reasoning_content`` on each choice: reasoning, not answer."""
    body = (FIXTURES / "anthropic" / "stream_thinking.sse").read_bytes()
    served = Recorded("POST", "https://api.anthropic.com/v1/messages", b"", 200, "OK",
                      [("content-type", "text/event-stream")], body)  # fmt: skip
    with ReplayServer([served]) as server:
        stream = await complete_text(is_async, model=CLAUDE, api_base=server.url, prompt="Think, then answer",
                                     stream=True, max_tokens=1024)  # fmt: skip
        chunks = await drain(stream, is_async)
    reasoning = "".join(getattr(c, "reasoning_content", None) or "" for chunk in chunks for c in chunk.choices)
    answer = "".join(c.text or "" for chunk in chunks for c in chunk.choices)
    assert reasoning and answer
    (span,) = exporter.get_finished_spans()
    (message,) = json.loads(_attrs(span)["gen_ai.output.messages"])
    assert message["parts"] == [{"type": "reasoning", "content": reasoning}, {"type": "text", "content": answer}]


# --- Responses ------------------------------------------------------------------------------------------------


@pytest.mark.usefixtures("litellm_instrumented")
async def test_a_failed_responses_body_fails_the_span_and_is_returned(
    is_async: bool, exporter: InMemorySpanExporter
) -> None:
    """A 200 whose ``status`` is ``failed`` (LiteLLM raises nothing): the span fails with the body's error code."""
    item, request = responses_item("test_responses_create_basic")
    body = json.loads(item.body)
    body.update(status="failed", error={"code": "server_error", "message": "The model failed to answer."}, output=[])
    failed = Recorded(item.method, item.uri, item.request_body, item.status, item.reason, item.headers,
                      json.dumps(body).encode())  # fmt: skip
    params = {"api_key": "test", "num_retries": 0, **request}
    with ReplayServer([failed]) as server:
        if is_async:
            response = await litellm.aresponses(api_base=f"{server.url}/v1", **params)
        else:
            response = litellm.responses(api_base=f"{server.url}/v1", **params)
    assert response.status == "failed"  # returned to the caller as LiteLLM gave it
    (span,) = exporter.get_finished_spans()
    assert span.status.status_code is StatusCode.ERROR
    assert span.status.description == "server_error: The model failed to answer."
    assert _attrs(span)["error.type"] == "server_error"


@pytest.mark.usefixtures("litellm_instrumented")
async def test_a_router_responses_alias_names_the_model_group(is_async: bool, exporter: InMemorySpanExporter) -> None:
    """``Router.responses`` / ``aresponses`` name the alias in ``litellm_metadata``, not ``metadata``."""
    item, request = responses_item("test_responses_create_basic")
    with ReplayServer([item]) as server:
        router = litellm.Router(model_list=[
            {"model_name": "my-answers", "litellm_params": {"model": request["model"], "api_base": f"{server.url}/v1",
                                                            "api_key": "test"}},
        ], num_retries=0)  # fmt: skip
        params = {k: v for k, v in request.items() if k != "model"}
        if is_async:
            await router.aresponses(model="my-answers", **params)
        else:
            router.responses(model="my-answers", **params)
    (span,) = exporter.get_finished_spans()
    a = _attrs(span)
    assert a["gen_ai.request.model"] == request["model"]
    assert a["litellm.router.model_group"] == "my-answers"
