"""LiteLLM's stream chunks record the same through ``LiteLLMChatAccumulator.add_batch`` as through ``add``.

``add_batch`` reads the common ``ModelResponseStream`` (LiteLLM's own types, one choice, no usage, a delta with
text only) from the instances' ``__dict__`` and pydantic extras; every other chunk goes through ``add``. No LiteLLM
recording exists in any fixture set, so the real LiteLLM is pointed (``api_base``) at the replay server serving
the recorded streams of the providers behind it, and builds its chunks itself: every recorded OpenAI chat stream
(tests/fixtures/openai-cassettes: text, several choices, tool calls, usage, cut short), every recorded Groq stream
(DeepSeek R1 thinking, a stream that fails mid-way) and every Anthropic stream fixture (thinking and signature
deltas, tool input, truncation), through LiteLLM's ``anthropic/`` route. Each stream's chunks are folded one
``add`` each and as the stream proxy folds them (``add`` to the first output, then batches of several sizes):
outcome, end reason, summary and failure must be equal.
"""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # LiteLLM fetches its price map at import otherwise

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest

litellm = pytest.importorskip("litellm")

from cassettes import FIXTURES, Recorded, ReplayServer, load_cassette  # noqa: E402
from evaltrace._internal.engine.codec import add_each  # noqa: E402
from evaltrace.instrumentation.litellm.codec import LiteLLMChatAccumulator, _sdk_types  # noqa: E402

pytestmark = [
    # LiteLLM's own types, built lazily by pydantic on first use (nothing of ours).
    pytest.mark.filterwarnings("ignore:.*using the `ReadOnly` qualifier:UserWarning"),
    pytest.mark.filterwarnings("ignore:Accessing the 'model_.*' attribute on the instance:DeprecationWarning"),
]


USER = [{"role": "user", "content": "Say this is a test"}]
ANTHROPIC = FIXTURES / "anthropic"


def _streamed(folder: str, marker: bytes) -> list[tuple[Path, int]]:
    found = []
    for path in sorted((FIXTURES / folder).rglob("*.yaml")):
        for index, item in enumerate(load_cassette(path)):
            if item.status == 200 and marker in item.body:
                found.append((path, index))
    return found


def _anthropic(name: str) -> Recorded:
    return Recorded("POST", "https://api.anthropic.com/v1/messages", b"", 200, "OK",
                    [("content-type", "text/event-stream")], (ANTHROPIC / name).read_bytes())  # fmt: skip


CASES: list[Any] = [
    *(
        pytest.param("openai/gpt-4o-mini", "/v1", p, i, id=f"openai-{p.stem}-{i}")
        for p, i in _streamed("openai-cassettes", b"chat.completion.chunk")
    ),
    *(
        pytest.param("groq/deepseek-r1-distill-llama-70b", "", p, i, id=f"groq-{p.stem}-{i}")
        for p, i in _streamed("groq-cassettes", b"chat.completion.chunk")
    ),
    *(
        pytest.param("anthropic/claude-sonnet-4-6", "", ANTHROPIC / name, -1, id=f"anthropic-{name}")
        for name in sorted(p.name for p in ANTHROPIC.glob("stream_*.sse"))
    ),
]


def _chunks(model: str, suffix: str, path: Path, index: int) -> list[Any]:
    """The chunks LiteLLM yields for the recorded stream, up to an error it raises for an error inside it.

    Read on a thread of its own with an event loop of its own, closed after: LiteLLM's sync calls take the thread's
    event loop (``asyncio.get_event_loop``, which makes one on the main thread) and leave it open.
    """
    item = _anthropic(path.name) if index < 0 else load_cassette(path)[index]
    chunks: list[Any] = []

    def read() -> None:
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        try:
            stream = litellm.completion(model=model, api_base=server.url + suffix, api_key="test", messages=USER,
                                        stream=True, num_retries=0, max_tokens=1024,
                                        stream_options={"include_usage": True})  # fmt: skip
            for chunk in stream:
                chunks.append(chunk)
        except Exception:  # the recorded failure itself: what arrived before it is folded
            pass
        finally:
            asyncio.set_event_loop(None)
            loop.close()

    with ReplayServer([item]) as server:
        thread = threading.Thread(target=read)
        thread.start()
        thread.join()
    return chunks


def _record(acc: LiteLLMChatAccumulator) -> tuple[Any, ...]:
    return acc.outcome(), acc.end_reason(), acc.summary(), acc.failure()


def test_litellm_types_are_read_by_the_batch_fold() -> None:
    """The installed LiteLLM's chunk types keep their fields where ``add_batch`` reads them (else all go to add)."""
    assert _sdk_types() is not None


@pytest.mark.parametrize(("model", "suffix", "path", "index"), CASES)
def test_every_recorded_stream_through_litellm_records_the_same_through_the_batch_fold(
    model: str, suffix: str, path: Path, index: int
) -> None:
    chunks = _chunks(model, suffix, path, index)
    assert chunks  # stream_error.sse: one chunk, then the error event LiteLLM raises
    one_by_one = LiteLLMChatAccumulator()
    add_each(one_by_one.add, chunks)
    expected = _record(one_by_one)
    assert expected[0].output_messages
    for size in (1, 2, 5, 64):
        batched = LiteLLMChatAccumulator()
        start = 0
        for start, chunk in enumerate(chunks, 1):  # noqa: B007
            if batched.add(chunk):
                break
        for at in range(start, len(chunks), size):
            batched.add_batch(chunks[at : at + size])
        assert _record(batched) == expected, size


def _function_call() -> Any:
    from litellm.types.utils import FunctionCall

    return FunctionCall(name="get_weather", arguments='{"city": "Paris"}')


def _with_fields_moved(chunks: list[Any]) -> list[Any]:
    """The text chunks of a recorded stream, with fields put where no recorded stream has them.

    Each change lands on its own chunk: a refusal, reasoning (empty, non-empty, under either name) and a function
    call in the delta's extras; the content and the reasoning moved into the delta's ``__dict__``; the choice's
    index in the choice's ``__dict__`` (LiteLLM's choice declares no field, so its fields are all extras).
    """
    texts = [c for c in chunks if len(c.choices) == 1 and c.choices[0].delta.__pydantic_extra__.get("content")]
    changes = [
        lambda delta, choice: delta.__pydantic_extra__.__setitem__("refusal", "I cannot"),
        lambda delta, choice: delta.__pydantic_extra__.__setitem__("reasoning_content", ""),
        lambda delta, choice: delta.__pydantic_extra__.__setitem__("reasoning_content", "an extra thought"),
        lambda delta, choice: delta.__pydantic_extra__.__setitem__("reasoning", "another thought"),
        lambda delta, choice: delta.__pydantic_extra__.__setitem__("function_call", _function_call()),
        lambda delta, choice: delta.__dict__.__setitem__("content", delta.__pydantic_extra__.pop("content")),
        lambda delta, choice: delta.__dict__.__setitem__("reasoning_content", "a declared thought"),
        lambda delta, choice: delta.__dict__.__setitem__("reasoning_content", ""),
        lambda delta, choice: choice.__dict__.__setitem__("index", choice.__pydantic_extra__.pop("index")),
    ]
    assert len(texts) > 2 * len(changes)
    for at, change in enumerate(changes):
        choice = texts[2 + 2 * at].choices[0]
        change(choice.delta, choice)
    return chunks


def test_fields_where_no_recorded_stream_has_them_record_what_add_records() -> None:
    """No recording holds these shapes: they are put into the chunks LiteLLM made of a recorded OpenAI stream."""
    path, index = next((p, i) for p, i in _streamed("openai-cassettes", b"chat.completion.chunk") if "stream" in p.stem)
    expected = None
    for size in (1, 3, 64):
        one_by_one = LiteLLMChatAccumulator()
        add_each(one_by_one.add, _with_fields_moved(_chunks("openai/gpt-4o-mini", "/v1", path, index)))
        expected = _record(one_by_one)
        chunks = _with_fields_moved(_chunks("openai/gpt-4o-mini", "/v1", path, index))
        batched = LiteLLMChatAccumulator()
        start = 0
        for start, chunk in enumerate(chunks, 1):  # noqa: B007
            if batched.add(chunk):
                break
        for at in range(start, len(chunks), size):
            batched.add_batch(chunks[at : at + size])
        assert _record(batched) == expected, size
    assert expected is not None
    parts = expected[0].output_messages[0]["parts"]
    assert any(p["type"] == "reasoning" and "an extra thought" in p["content"] for p in parts), parts
