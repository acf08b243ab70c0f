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
import dataclasses
import json
import threading
from pathlib import Path
from typing import Any

import pytest

litellm = pytest.importorskip("litellm")

from litellm_replay import ANTHROPIC, LITELLM_WARNINGS, USER, anthropic_reply  # noqa: E402

from cassettes import FIXTURES, Recorded, ReplayServer, load_cassette  # noqa: E402
from evaltrace._internal.engine.codec import add_each  # noqa: E402
from evaltrace.instrumentation.litellm.codec import LiteLLMChatAccumulator, _cache_writes, _sdk_types  # noqa: E402

pytestmark = [*LITELLM_WARNINGS]


def _streamed(folder: str, marker: bytes) -> list[tuple[Path, int]]:
    found = []
    for path in sorted((FIXTURES / folder).rglob("*.yaml")):
        for index, item in enumerate(load_cassette(path)):
            if item.status == 200 and marker in item.body:
                found.append((path, index))
    return found


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
    return _yielded(model, suffix, anthropic_reply(path.name) if index < 0 else load_cassette(path)[index])


def _yielded(model: str, suffix: str, item: Recorded) -> list[Any]:
    """The chunks LiteLLM yields for one recorded response (see ``_chunks``)."""
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


def _proxy_fold(chunks: list[Any], size: int) -> LiteLLMChatAccumulator:
    """As the stream proxy folds: ``add`` until a chunk carries output, then batches of ``size``."""
    acc = LiteLLMChatAccumulator()
    start = 0
    for start, chunk in enumerate(chunks, 1):  # noqa: B007
        if acc.add(chunk):
            break
    for at in range(start, len(chunks), size):
        acc.add_batch(chunks[at : at + size])
    return acc


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
        assert _record(_proxy_fold(chunks, size)) == expected, size


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
        assert _record(_proxy_fold(chunks, size)) == expected, size
    assert expected is not None
    parts = expected[0].output_messages[0]["parts"]
    assert any(p["type"] == "reasoning" and "an extra thought" in p["content"] for p in parts), parts


OPENAI_STREAM = FIXTURES / "openai-cassettes/otel-contrib/test_chat_completion_streaming.yaml"


def _edited(edit: str) -> Recorded:
    """The recorded OpenAI stream (usage on a closing chunk of its own) with its chunks edited as ``edit`` says."""
    item = load_cassette(OPENAI_STREAM)[0]
    events = [e for e in item.body.split(b"\n\n") if e.strip()]
    chunks = [json.loads(e[len(b"data: ") :]) for e in events[:-1]]  # the last is ``[DONE]``
    usage = chunks[-1]["usage"]
    if edit == "usage on a text chunk":
        chunks[3]["usage"] = usage
        del chunks[-1]
    elif edit == "a choice-less chunk without usage mid-stream":
        chunks.insert(3, {**chunks[-1], "usage": None})
    elif edit == "a header-less first chunk":  # Azure's: prompt filter results only, empty id and model
        chunks.insert(0, {**chunks[0], "id": "", "model": "", "choices": [], "prompt_filter_results": []})
    elif edit == "a first chunk without choices":
        chunks.insert(0, {**chunks[0], "choices": []})
    elif edit == "two choices with usage":
        second = json.loads(json.dumps(chunks[4]["choices"][0]))
        second["index"] = 1
        chunks[4]["choices"].append(second)
        chunks[4]["usage"] = usage
    body = b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks) + b"data: [DONE]\n\n"
    return Recorded(item.method, item.uri, item.request_body, item.status, item.reason, item.headers, body)


EDITS = [
    "usage on a text chunk",
    "a choice-less chunk without usage mid-stream",
    "two choices with usage",
    "a header-less first chunk",
    "a first chunk without choices",
]


@pytest.mark.parametrize("edit", EDITS)
def test_usage_and_choiceless_chunks_record_what_add_records(edit: str) -> None:
    """No recording has these shapes: the recorded OpenAI stream is edited and parsed by LiteLLM itself.

    The batch fold reads a chunk without choices (``include_usage``'s closing chunk) as its usage alone; a chunk of
    several choices still goes through ``add``. LiteLLM moves a usage sent on a text chunk to a closing chunk of its
    own (so a chunk of one choice and usage, which ``add`` reads, is not made here).
    """
    chunks = _yielded("openai/gpt-4o-mini", "/v1", _edited(edit))
    assert sum(1 for c in chunks if not c.choices) == (1 if edit in EDITS[:1] + EDITS[2:3] else 2)
    general = LiteLLMChatAccumulator()
    add_each(general._add, chunks)
    expected = _record(general)
    one_by_one = LiteLLMChatAccumulator()
    assert [one_by_one.add(c) for c in chunks] == [LiteLLMChatAccumulator()._add(c) for c in chunks]
    assert _record(one_by_one) == expected
    assert expected[0].output_messages
    for size in (1, 2, 3, 64):
        assert _record(_proxy_fold(chunks, size)) == expected, size


def test_the_usage_chunk_and_the_text_chunks_are_read_without_add(monkeypatch: pytest.MonkeyPatch) -> None:
    """After the first chunk, the recorded stream's chunks (text, finish, usage alone) all stay on the fast path."""
    chunks = _chunks("openai/gpt-4o-mini", "/v1", OPENAI_STREAM, 0)
    assert any(not c.choices and getattr(c, "usage", None) is not None for c in chunks)  # what LiteLLM yields
    expected = LiteLLMChatAccumulator()
    add_each(expected.add, chunks)
    batched = LiteLLMChatAccumulator()
    assert batched.add(chunks[0])
    added: list[Any] = []
    add = LiteLLMChatAccumulator.add
    monkeypatch.setattr(LiteLLMChatAccumulator, "add", lambda self, chunk: added.append(chunk) or add(self, chunk))
    batched.add_batch(chunks[1:])
    assert added == []
    assert _record(batched) == _record(expected)
    assert batched.usage is not None


@pytest.mark.parametrize(("model", "suffix", "path", "index"), CASES)
def test_add_reads_a_streams_first_chunk_as_the_general_path_does(
    model: str, suffix: str, path: Path, index: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``add`` reads the header of LiteLLM's own first chunk itself, then folds it by ``add_batch``: same record."""
    chunks = _chunks(model, suffix, path, index)
    general = LiteLLMChatAccumulator()
    outputs = [general._add(c) for c in chunks]
    one_by_one = LiteLLMChatAccumulator()
    assert [one_by_one.add(c) for c in chunks] == outputs
    assert _record(one_by_one) == _record(general)
    calls: list[Any] = []
    general_add = LiteLLMChatAccumulator._add
    monkeypatch.setattr(LiteLLMChatAccumulator, "_add", lambda self, c: calls.append(c) or general_add(self, c))
    first = LiteLLMChatAccumulator()
    first.add(chunks[0])
    head = chunks[0]
    if model.startswith("openai/") and len(head.choices) == 1 and not head.choices[0].delta.tool_calls:
        assert calls == []  # OpenAI's first chunk, a header and one choice opening the text: no general path
        assert not first.header_pending


# Delta and choice bodies LiteLLM parses into shapes that leave the common chunk's fast path (no recording has them:
# each is a text chunk of the recorded OpenAI stream, edited). LiteLLM keeps what it does not know in the extras.
BODY_EDITS: list[tuple[str, dict[str, Any], dict[str, Any]]] = [  # (name, delta update, choice update)
    ("an empty refusal", {"refusal": ""}, {}),
    ("a refusal", {"refusal": "I cannot"}, {}),
    ("reasoning under OpenRouter's name", {"reasoning": "a thought"}, {}),
    ("empty reasoning", {"reasoning": ""}, {}),
    ("reasoning_content", {"reasoning_content": "a declared thought"}, {}),
    ("empty reasoning_content", {"reasoning_content": ""}, {}),
    ("a legacy function call", {"function_call": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}, {}),
    (
        "a tool call",
        {
            "tool_calls": [
                {"index": 0, "id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}
            ]
        },
        {},
    ),  # fmt: skip
    ("a null content", {"content": None}, {}),
    ("no content key", {"content": ...}, {}),
    ("provider fields", {"provider_specific_fields": {"citations": ["a"]}}, {}),
    ("thinking blocks", {"thinking_blocks": [{"type": "thinking", "thinking": "hm", "signature": "s"}]}, {}),
    ("an audio part", {"audio": {"id": "a1", "transcript": "hi"}}, {}),
    ("a second choice", {}, {"index": 1}),
    ("back to the first choice", {}, {"index": 0}),
    ("no finish_reason key", {}, {"finish_reason": ...}),
    ("a finish reason mid-stream", {}, {"finish_reason": "length"}),
    ("logprobs", {}, {"logprobs": {"content": [{"token": "a", "logprob": -0.1, "bytes": [97], "top_logprobs": []}]}}),
]


def _body_edited() -> Recorded:
    """The recorded OpenAI stream with one text chunk per ``BODY_EDITS`` entry, each with its own text, then two plain."""
    item = load_cassette(OPENAI_STREAM)[0]
    events = [e for e in item.body.split(b"\n\n") if e.strip()]
    chunks = [json.loads(e[len(b"data: ") :]) for e in events[:-1]]
    text = chunks[1]
    edited = []
    for at, (_name, delta, choice) in enumerate(BODY_EDITS):
        chunk = json.loads(json.dumps(text))
        chunk["choices"][0]["delta"]["content"] = f" word{at}"
        for target, update in ((chunk["choices"][0]["delta"], delta), (chunk["choices"][0], choice)):
            for key, value in update.items():
                if value is ...:
                    target.pop(key, None)
                else:
                    target[key] = value
        plain = [{**text, "choices": [{**text["choices"][0], "delta": {"content": f" plain{at}.{n}"}}]} for n in (1, 2)]
        edited += [chunk, *json.loads(json.dumps(plain))]
    chunks[2:2] = edited
    body = b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks) + b"data: [DONE]\n\n"
    return Recorded(item.method, item.uri, item.request_body, item.status, item.reason, item.headers, body)


def _instance_edits() -> list[tuple[str, Any]]:
    """Shapes LiteLLM does not make from any body (fields missing from, or added to, the instances it made)."""
    return [
        ("delta without content", lambda c: c.choices[0].delta.__pydantic_extra__.pop("content")),
        ("delta without tool_calls", lambda c: c.choices[0].delta.__pydantic_extra__.pop("tool_calls")),
        ("delta without function_call", lambda c: c.choices[0].delta.__pydantic_extra__.pop("function_call")),
        (
            "delta with a null extra reasoning_content",
            lambda c: c.choices[0].delta.__pydantic_extra__.update(reasoning_content=None),
        ),
        ("delta with a null extra reasoning", lambda c: c.choices[0].delta.__pydantic_extra__.update(reasoning=None)),
        ("delta without extras", lambda c: setattr(c.choices[0].delta, "__pydantic_extra__", None)),
        ("delta with an empty __dict__", lambda c: c.choices[0].delta.__dict__.clear()),
        ("delta with a refusal in __dict__", lambda c: c.choices[0].delta.__dict__.update(refusal="no")),
        ("delta with provider fields", lambda c: c.choices[0].delta.__dict__.update(provider_specific_fields={"a": 1})),
        ("delta with thinking blocks", lambda c: c.choices[0].delta.__dict__.update(thinking_blocks=[{"type": "x"}])),
        (
            "delta with an extra reasoning beside thinking blocks",
            lambda c: (
                c.choices[0].delta.__dict__.update(thinking_blocks=[]),
                c.choices[0].delta.__pydantic_extra__.update(reasoning="extra thought"),
            ),
        ),
        ("choice without delta", lambda c: c.choices[0].__pydantic_extra__.pop("delta")),
        ("choice without index", lambda c: c.choices[0].__pydantic_extra__.pop("index")),
        ("choice without finish_reason", lambda c: c.choices[0].__pydantic_extra__.pop("finish_reason")),
        ("choice with finish_reason in __dict__", lambda c: c.choices[0].__dict__.update(finish_reason="length")),
        ("choice without extras", lambda c: setattr(c.choices[0], "__pydantic_extra__", None)),
        ("chunk with a null usage extra", lambda c: c.__pydantic_extra__.update(usage=None)),
        ("chunk with choices as a tuple", lambda c: c.__dict__.update(choices=tuple(c.choices))),
        ("chunk without choices", lambda c: c.__dict__.pop("choices")),
    ]


def test_chunks_leaving_the_common_path_record_what_add_records_chunk_by_chunk() -> None:
    """Each edited chunk, folded by the batch fold, leaves the accumulator as ``add`` leaves it, chunk by chunk.

    Bodies LiteLLM parses (``BODY_EDITS``) and instances edited after it (``_instance_edits``): a refusal, reasoning
    under either name and declared, a function or tool call, provider fields, thinking blocks, a choice index that
    changes and comes back, fields missing where LiteLLM always sets them, a null usage, choices as a tuple.
    """
    chunks = _yielded("openai/gpt-4o-mini", "/v1", _body_edited())
    edits = _instance_edits()
    texts = [c for c in chunks if c.choices and "plain" in (c.choices[0].delta.__pydantic_extra__.get("content") or "")]
    assert len(texts) >= len(edits) + 2
    for (_name, edit), chunk in zip(edits, texts[1:], strict=False):
        edit(chunk)
    general = LiteLLMChatAccumulator()
    batched = _proxy_fold(chunks[:1], 1)
    assert not batched.header_pending
    general._add(chunks[0])
    for at, chunk in enumerate(chunks[1:], 1):
        general._add(chunk)
        batched.add_batch([chunk])
        assert _record(batched) == _record(general), at
    for size in (2, 3, 64):
        assert _record(_proxy_fold(chunks, size)) == _record(general), size
    message = general.outcome().output_messages
    assert message is not None and len(message) == 2  # the second choice
    parts = message[0]["parts"]
    assert {p["type"] for p in parts} >= {"reasoning", "text", "tool_call"}, parts


def test_the_common_chunk_shapes_stay_on_the_fast_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """The edited stream's plain text chunks (and the edits that change nothing ``add`` reads) are read without it."""
    chunks = _yielded("openai/gpt-4o-mini", "/v1", _body_edited())
    added: list[Any] = []
    add = LiteLLMChatAccumulator.add
    monkeypatch.setattr(LiteLLMChatAccumulator, "add", lambda self, chunk: added.append(chunk) or add(self, chunk))
    acc = LiteLLMChatAccumulator()
    assert acc.add(chunks[0])
    added.clear()
    acc.add_batch(chunks[1:])
    plain = [c for c in chunks if c.choices and "plain" in (c.choices[0].delta.__pydantic_extra__.get("content") or "")]
    assert not set(map(id, plain)) & set(map(id, added))
    # What ``add`` reads more of than text: a refusal, reasoning (LiteLLM makes ``reasoning`` its declared
    # ``reasoning_content``, and drops empty reasoning), a function or tool call. LiteLLM's OpenAI route drops the
    # provider fields and thinking blocks of a body (their ``__dict__`` shapes are ``_instance_edits``').
    through_add = {"a refusal", "reasoning under OpenRouter's name", "reasoning_content", "a legacy function call",
                   "a tool call"}  # fmt: skip
    words = {f" word{at}": name for at, (name, _, _) in enumerate(BODY_EDITS)}
    assert {words[c.choices[0].delta.__pydantic_extra__["content"]] for c in added} == through_add


def test_a_first_chunk_whose_fold_fails_raises_as_the_general_path_does(monkeypatch: pytest.MonkeyPatch) -> None:
    """``add`` on the first chunk raises an error of ours as ``_add`` does, not only logs it and returns True.

    The stream proxy then routes the error and takes no time to first chunk from that chunk, as for any provider
    whose ``add`` fails. The error: a choice index LiteLLM passes through unvalidated (a list, unhashable).
    """
    monkeypatch.delenv("EVALTRACE_RAISE_INTERNAL_ERRORS", raising=False)  # the deployed setting: errors are logged
    item = load_cassette(OPENAI_STREAM)[0]
    events = [e for e in item.body.split(b"\n\n") if e.strip()]
    bodies = [json.loads(e[len(b"data: ") :]) for e in events[:-1]]
    for body in bodies:
        for choice in body["choices"]:
            choice["index"] = [0]
    raw = b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in bodies) + b"data: [DONE]\n\n"
    chunks = _yielded("openai/gpt-4o-mini", "/v1", Recorded(item.method, item.uri, item.request_body, item.status,
                                                            item.reason, item.headers, raw))  # fmt: skip
    with pytest.raises(TypeError) as general:
        LiteLLMChatAccumulator()._add(chunks[0])
    acc = LiteLLMChatAccumulator()
    with pytest.raises(TypeError) as fast:
        acc.add(chunks[0])
    assert str(fast.value) == str(general.value)
    assert acc.response_id == chunks[0].id  # the header is read, as ``_add`` reads it before the choices


def _usages() -> list[Any]:
    """Every usage LiteLLM attaches to the chunks of every recorded stream, and of the Anthropic stream with cache writes.

    No recording has non-zero cache writes through LiteLLM: the Anthropic text stream is edited to report 7.
    """
    found = [getattr(c, "usage", None) for case in CASES for c in _chunks(*case.values)]
    body = (ANTHROPIC / "stream_text.sse").read_bytes()
    assert b'"cache_creation_input_tokens": 0' in body
    written = dataclasses.replace(
        anthropic_reply("stream_text.sse"),
        body=body.replace(b'"cache_creation_input_tokens": 0', b'"cache_creation_input_tokens": 7'),
    )
    found += [getattr(c, "usage", None) for c in _yielded("anthropic/claude-sonnet-4-6", "", written)]
    return [u for u in found if u is not None]


def test_cache_writes_are_read_as_getattr_reads_them() -> None:
    """``_cache_writes`` gives what ``getattr(usage, "cache_creation_input_tokens", None)`` gives, for every usage."""
    from litellm.types.utils import Usage

    usages = _usages()
    assert any(getattr(u, "cache_creation_input_tokens", None) == 7 for u in usages)
    made = Usage(prompt_tokens=1, completion_tokens=2, cache_creation_input_tokens=5)
    declared = Usage(prompt_tokens=1, completion_tokens=2)
    object.__setattr__(declared, "cache_creation_input_tokens", 3)  # an instance entry wins over the extras
    plain = {"prompt_tokens": 1, "cache_creation_input_tokens": 4}  # a dict: getattr reads no key
    for usage in [*usages, made, declared, plain, Usage(prompt_tokens=1, completion_tokens=2)]:
        assert _cache_writes(usage) == getattr(usage, "cache_creation_input_tokens", None), usage
    assert _cache_writes(made) == 5 and _cache_writes(declared) == 3 and _cache_writes(plain) is None
