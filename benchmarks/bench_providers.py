"""Instrumentation cost of the issue 26 providers, per call and per stream chunk, against the uninstrumented client.

Run: python benchmarks/bench_providers.py [--providers mistral,groq] [--quick] [--calls 20] [--stream-calls 6]
[--rows call,chunk,fold]

Every call goes through the provider's real SDK, answered in-process with a response recorded in
``tests/fixtures/<provider>-cassettes`` (loaded by ``tests/cassettes.py``): ``httpx.MockTransport`` where the SDK
takes an httpx client or transport (Mistral, Groq, Ollama, Cohere, Google Gen AI; LiteLLM through the openai
client it accepts, with the OpenAI recording of ``bench_openai_pipeline.py``), and botocore's ``before-send``
event for Bedrock (boto3 has no httpx). In-process answers keep the floor small and stable: no socket, no server
thread. Each provider has two implementations, each in its own callgrind child (``_callgrind.py``:
PYTHONHASHSEED=0, N calls minus 0 calls, application thread and all threads apart): ``none``, the same client
uninstrumented (the floor), and ``evaltrace``, ``configure()`` (evaluation processor included) into
``_pipeline.ReadingExporter`` (reads every attribute of every span) + ``instrument_<provider>()``, content on.
``openai`` is a reference row measured the same way, to compare with the OpenAI budgets.

Per chunk: streams of ``SHORT`` and ``LONG`` content events (the recording's first event, its first content
events, repeated in order if the recording has fewer, then its closing events: finish, usage, ``[DONE]``). Both
runs warm up on the short stream, so the per-chunk figure is (long run - short run) / (streams x (LONG - SHORT)),
with no 0-call run. Defaults: 20 calls, 6 streams of 10 and 110 content events; ``--quick``: 8 calls, 3 streams of
5 and 45. Under load one provider takes 5-20 minutes: run at most two at a time. Streams: every provider. Google Gen AI's
recorded SSE separates events with CRLF CRLF, which ``cassettes._chunks`` serves as one body: split here.
Bedrock's ``converse_stream`` recording is one AWS event-stream body: split here into its messages (each starts
with its length), served through botocore's ``before-send``. No Cohere ``chat_stream`` is recorded: its stream is
``tests/instrumentation/cohere_replay.py``'s ``text_stream_events`` (what the Cohere span tests serve). LiteLLM
streams OpenAI's recorded stream through the openai client it accepts.

The ``chunk`` row's slope includes the SDK's own parse of each chunk (0.06-3M instructions), which varies from one
process to the next by more than our code costs per chunk: its added figure is noise for the heavy SDKs. The
``fold`` row counts our code alone: the uninstrumented client parses one stream of ``LONG`` content events at set
up, then the child folds those chunks as the stream proxy does (``add`` until output, then ``add_batch`` in
batches of 64) and builds the response attributes, ``calls`` times (minus 0 times), per chunk.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import _callgrind
import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

sys.path.insert(0, str(ROOT / "tests" / "instrumentation"))  # cohere_replay (no Cohere stream is recorded)

from cassettes import FIXTURES, Recorded, _chunks, load_cassette  # noqa: E402

COHERE_STREAM = "(cohere_replay.text_stream_events)"
SHORT, LONG = 10, 110
QUICK_SHORT, QUICK_LONG = 5, 45
WARMUP = 5


@dataclass(frozen=True)
class Provider:
    """Where a provider's recordings are, how its real client is built and called, and the SDK it needs."""

    instrument: str
    call: str
    stream: str | None = None
    sdk: str = ""  # the module the provider's client imports: a provider whose SDK is absent is skipped


PROVIDERS: dict[str, Provider] = {
    "openai": Provider(
        "instrument_openai",
        "openai-cassettes/otel-contrib/test_chat_completion_with_content.yaml",
        "openai-cassettes/otel-contrib/test_chat_completion_streaming.yaml",
        sdk="openai",
    ),
    "mistral": Provider(
        "instrument_mistral",
        "mistral-cassettes/pydantic-ai/test_mistral_forwards_penalties.yaml",
        "mistral-cassettes/pydantic-ai/test_mistral_model_thinking_part_iter.yaml",
        sdk="mistralai",
    ),
    "groq": Provider(
        "instrument_groq",
        "groq-cassettes/pydantic-ai/test_extra_headers.yaml",
        "groq-cassettes/pydantic-ai/test_groq_model_thinking_part_iter.yaml",
        sdk="groq",
    ),
    "ollama": Provider(
        "instrument_ollama",
        "ollama-cassettes/openinference/test_instrumentor/test_chat.yaml",
        "ollama-cassettes/openinference/test_instrumentor/test_chat_stream.yaml",
        sdk="ollama",
    ),
    "cohere": Provider(
        "instrument_cohere",
        "cohere-cassettes/pydantic-ai/test_request_simple_success_with_vcr.yaml",
        COHERE_STREAM,  # no chat_stream is recorded: tests/instrumentation/cohere_replay.py's events (see below)
        sdk="cohere",
    ),
    "google_genai": Provider(
        "instrument_google_genai",
        "google-genai-cassettes/openinference/test_instrumentation/test_generate_content.yaml",
        "google-genai-cassettes/openinference/test_instrumentation/test_streaming_reasoning.yaml",
        sdk="google.genai",
    ),
    "bedrock": Provider(
        "instrument_bedrock",
        "bedrock-cassettes/openinference/TestNovaInvokeModel.test_nova_converse.yaml",
        "bedrock-cassettes/openinference/TestConverseStream.test_invoke_text_message.yaml",
        sdk="boto3",
    ),
    "litellm": Provider(
        "instrument_litellm",
        "openai-cassettes/otel-contrib/test_chat_completion_with_content.yaml",
        "openai-cassettes/otel-contrib/test_chat_completion_streaming.yaml",
        sdk="litellm",
    ),
    "bedrock_invoke": Provider(  # Anthropic Messages over invoke_model(_with_response_stream): Claude on Bedrock
        "instrument_bedrock",
        "bedrock-cassettes/openinference/TestClaudeInvokeModelMessageApi.test_invoke_model.yaml",
        "bedrock-cassettes/openinference/TestInvokeModelWithStreamResponse.test_invoke.yaml",
        sdk="boto3",
    ),
}


def sdk_missing(name: str) -> str | None:
    """The SDK module ``name``'s client needs when it is not installed (its rows are skipped), else None."""
    import importlib.util

    module = PROVIDERS[name].sdk
    try:
        found = importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # a parent package is missing (``google`` of ``google.genai``)
        found = False
    return None if found else module


def _is_closing(event: bytes) -> bool:
    """The first event of a stream's recorded close: a finish reason, Ollama's ``done``, or the SSE terminator."""
    if _INVOKE_CHUNK in event:  # Bedrock invoke stream: the model's own event, base64 inside the message
        return b'"type":"content_block_stop"' in _invoke_payload(event)
    compact = event.replace(b" ", b"")
    if b'"finish_reason":"' in compact or b'"done":true' in compact or b"[DONE]" in compact:
        return True
    if b'"finishReason":"' in compact:  # Gemini
        return True
    if b'"type":"content-end"' in compact:  # Cohere v2: content-end, then message-end
        return True
    return b":event-type" in event and (b"contentBlockStop" in event or b"messageStop" in event)  # Bedrock


_INVOKE_CHUNK = b'{"bytes":"'  # an invoke_model_with_response_stream message: {"bytes": "<base64 model event>"}


def _invoke_payload(event: bytes) -> bytes:
    """The model's own event inside one Bedrock invoke-stream message (its JSON payload, before the CRC)."""
    import base64

    payload = event[event.index(_INVOKE_CHUNK) : -4]
    return base64.b64decode(json.loads(payload)["bytes"])


def _is_header(event: bytes) -> bool:
    """An event that opens the content rather than carrying it: an Anthropic ``content_block_start``."""
    return _INVOKE_CHUNK in event and b'"type":"content_block_start"' in _invoke_payload(event)


def stream_events(item: Recorded, contents: int) -> list[bytes]:
    """The recorded stream with ``contents`` content events: its first events, its content events, its close.

    The first events are the recording's first one and any ``content_block_start`` right after it (an Anthropic
    block opens once, not with every repetition of its deltas).
    """
    if item.body[:4] != b"data" and b":event-type" in item.body[:64]:  # Bedrock: AWS event-stream messages
        events = _event_stream_messages(item.body)
    else:
        events = _chunks(item)
    if len(events) == 1 and b"\r\n\r\n" in item.body:  # Gemini's SSE separates events with CRLF CRLF
        events = [event + b"\r\n\r\n" for event in item.body.split(b"\r\n\r\n") if event.strip()]
    start = 1
    while start < len(events) and _is_header(events[start]):
        start += 1
    close = next(i for i in range(start, len(events)) if _is_closing(events[i]))
    body = events[start:close]
    return [*events[:start], *(body[i % len(body)] for i in range(contents)), *events[close:]]


ACCUMULATORS: dict[str, tuple[str, str]] = {  # provider -> (module, class) of its chat stream accumulator
    "openai": ("evaltrace._internal.openai.accumulate", "ChatAccumulator"),
    "mistral": ("evaltrace.instrumentation.mistral.stream", "MistralStreamAccumulator"),
    "groq": ("evaltrace.instrumentation.groq.stream", "GroqStreamAccumulator"),
    "ollama": ("evaltrace.instrumentation.ollama.stream", "OllamaStreamAccumulator"),
    "cohere": ("evaltrace.instrumentation.cohere.stream", "ChatStreamAccumulator"),
    "google_genai": ("evaltrace.instrumentation.google_genai.stream", "GenerateContentAccumulator"),
    "bedrock": ("evaltrace.instrumentation.bedrock.converse_stream", "ConverseStreamAccumulator"),
    "litellm": ("evaltrace.instrumentation.litellm.codec", "LiteLLMChatAccumulator"),
    "bedrock_invoke": ("evaltrace.instrumentation.bedrock.invoke_stream", "InvokeStreamAccumulator"),
}


def fold_function(name: str, chunks: list[Any]) -> Callable[[], None]:
    """One stream's chunks folded as the stream proxy folds them, then its response attributes built.

    ``add`` until a chunk carries output, then ``add_batch`` (else ``add`` per chunk) in batches of the proxy's
    size; then ``outcome()`` and the engine's ``response_attributes`` (output messages, ``output.value``, usage,
    cost), as the span's reader builds them. No SDK, no span, no proxy: the work of the provider's own code.
    """
    import importlib

    from evaltrace._internal.engine import build
    from evaltrace._internal.engine.codec import add_each
    from evaltrace._internal.engine.stream import BATCH

    module, cls = ACCUMULATORS[name]
    make = getattr(importlib.import_module(module), cls)
    if name == "ollama":
        make = lambda: getattr(importlib.import_module(module), cls)(chat=True)  # noqa: E731

    def fold() -> None:
        acc = make()
        index = 0
        for index, chunk in enumerate(chunks, 1):  # noqa: B007  (index: where the batches start)
            if acc.add(chunk):
                break
        fold_batch = getattr(acc, "add_batch", None) or (lambda batch: add_each(acc.add, batch))
        size = getattr(acc, "batch_size", BATCH)  # the proxy's batch for this accumulator
        for start in range(index, len(chunks), size):
            fold_batch(chunks[start : start + size])
        build.response_attributes(acc.outcome, None, True, 128 * 1024, "model", name)

    return fold


def _event_stream_messages(body: bytes) -> list[bytes]:
    """An AWS event stream split into its messages (each starts with its total length, big-endian)."""
    messages = []
    while body:
        size = int.from_bytes(body[:4], "big")
        messages.append(body[:size])
        body = body[size:]
    return messages


def recorded(provider: Provider, case: str) -> Recorded:
    path = provider.stream if case.startswith(("stream", "fold")) else provider.call
    assert path is not None
    if path == COHERE_STREAM:
        from cohere_replay import stream_interaction, text_stream_events

        return stream_interaction(text_stream_events([f"word{i} " for i in range(LONG + 10)]))
    return load_cassette(FIXTURES / path)[0]


def handler(item: Recorded, events: list[bytes] | None) -> Callable[[httpx.Request], httpx.Response]:
    """Answer every request with ``item``'s response (``events`` one chunk each for a stream)."""

    def answer(request: httpx.Request) -> httpx.Response:
        request.read()
        content: Any = iter(events) if events is not None else item.body
        return httpx.Response(item.status, headers=item.headers, content=content)

    return answer


def _request(item: Recorded) -> dict[str, Any]:
    body = dict(item.request_json())
    body.pop("stream", None)
    return body


# --- one call of each provider through its real client -------------------------------------------------------


def _openai(item: Recorded, transport: httpx.MockTransport, stream: bool) -> Callable[[], None]:
    import openai

    client = openai.OpenAI(api_key="bench", http_client=httpx.Client(transport=transport))
    kwargs = _request(item)
    if not stream:
        return lambda: client.chat.completions.create(**kwargs) and None
    return lambda: _drain(client.chat.completions.create(**kwargs, stream=True))


def _mistral(item: Recorded, transport: httpx.MockTransport, stream: bool) -> Callable[[], None]:
    from mistralai.client import Mistral

    client = Mistral(api_key="bench", client=httpx.Client(transport=transport))
    kwargs = _request(item)
    if not stream:
        return lambda: client.chat.complete(**kwargs) and None
    return lambda: _drain(client.chat.stream(**kwargs))


def _groq(item: Recorded, transport: httpx.MockTransport, stream: bool) -> Callable[[], None]:
    import groq

    client = groq.Groq(api_key="bench", http_client=httpx.Client(transport=transport))
    kwargs = _request(item)
    if not stream:
        return lambda: client.chat.completions.create(**kwargs) and None
    return lambda: _drain(client.chat.completions.create(**kwargs, stream=True))


def _ollama(item: Recorded, transport: httpx.MockTransport, stream: bool) -> Callable[[], None]:
    import ollama

    client = ollama.Client(host="http://127.0.0.1:11434", transport=transport)
    kwargs = _request(item)
    if not stream:
        return lambda: client.chat(**kwargs) and None
    return lambda: _drain(client.chat(**kwargs, stream=True))


def _cohere(item: Recorded, transport: httpx.MockTransport, stream: bool) -> Callable[[], None]:
    import cohere

    client = cohere.ClientV2(api_key="bench", httpx_client=httpx.Client(transport=transport))
    if stream:
        return lambda: _drain(
            client.chat_stream(model="command-r7b-12-2024", messages=[{"role": "user", "content": "hi"}])
        )
    kwargs = _request(item)
    return lambda: client.chat(**kwargs) and None


def _google_genai(item: Recorded, transport: httpx.MockTransport, stream: bool) -> Callable[[], None]:
    from google import genai
    from google.genai import types

    options = types.HttpOptions(httpx_client=httpx.Client(transport=transport))
    client = genai.Client(api_key="bench", http_options=options)
    model = item.path.split("/models/")[1].split(":")[0]
    if stream:
        return lambda: _drain(client.models.generate_content_stream(model=model, contents="Tell a bedtime story."))
    return lambda: client.models.generate_content(model=model, contents="What's the weather like?") and None


_BEDROCK_STREAMS: list[dict[str, list[bytes]]] = []  # botocore answers without httpx: the events to send


class _Raw:
    """What botocore reads a response body from (``AWSResponse.raw``)."""

    def __init__(self, body: bytes) -> None:
        self._body = body

    def stream(self, *_: Any, **__: Any) -> Iterator[bytes]:
        yield self._body


def _bedrock(item: Recorded, transport: httpx.MockTransport, stream: bool) -> Callable[[], None]:
    import boto3
    from botocore.awsrequest import AWSResponse

    client = boto3.client(
        "bedrock-runtime", region_name="us-east-1", aws_access_key_id="bench", aws_secret_access_key="bench"
    )
    headers = dict(item.headers)

    def send(request: Any, **_: Any) -> AWSResponse:
        return AWSResponse(request.url, item.status, headers, _Raw(item.body))  # type: ignore[no-untyped-call]

    if stream:
        body = {"events": [item.body]}

        def send_stream(request: Any, **_: Any) -> AWSResponse:
            return AWSResponse(request.url, item.status, headers, _Raw(b"".join(body["events"])))  # type: ignore[no-untyped-call]

        client.meta.events.register("before-send.bedrock-runtime.*", send_stream)
        model = unquote(item.uri.split("/model/")[1].split("/")[0])
        kwargs = _request(item)
        _BEDROCK_STREAMS.append(body)
        return lambda: _drain(client.converse_stream(modelId=model, **kwargs)["stream"])
    client.meta.events.register("before-send.bedrock-runtime.*", send)
    kwargs = _request(item)
    return lambda: client.converse(modelId="amazon.nova-micro-v1:0", **kwargs) and None


def _bedrock_invoke(item: Recorded, transport: httpx.MockTransport, stream: bool) -> Callable[[], None]:
    """``invoke_model`` / ``invoke_model_with_response_stream`` with the recorded Anthropic Messages body."""
    import boto3
    from botocore.awsrequest import AWSResponse

    client = boto3.client(
        "bedrock-runtime", region_name="us-east-1", aws_access_key_id="bench", aws_secret_access_key="bench"
    )
    headers = dict(item.headers)
    body = {"events": [item.body]}

    def send(request: Any, **_: Any) -> AWSResponse:
        return AWSResponse(request.url, item.status, headers, _Raw(b"".join(body["events"])))  # type: ignore[no-untyped-call]

    client.meta.events.register("before-send.bedrock-runtime.*", send)
    model = unquote(item.uri.split("/model/")[1].split("/")[0])
    request = item.request_body
    if stream:
        _BEDROCK_STREAMS.append(body)
        return lambda: _drain(client.invoke_model_with_response_stream(modelId=model, body=request)["body"])
    return lambda: client.invoke_model(modelId=model, body=request)["body"].read() and None


def _litellm(item: Recorded, transport: httpx.MockTransport, stream: bool) -> Callable[[], None]:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # it fetches its price map at import otherwise
    import litellm
    import openai

    client = openai.OpenAI(api_key="bench", http_client=httpx.Client(transport=transport))
    kwargs = _request(item)
    kwargs["model"] = "openai/" + kwargs["model"]
    if stream:
        return lambda: _drain(litellm.completion(**kwargs, client=client, stream=True))
    return lambda: litellm.completion(**kwargs, client=client) and None


CLIENTS: dict[str, Callable[[Recorded, httpx.MockTransport, bool], Callable[[], None]]] = {
    "openai": _openai,
    "mistral": _mistral,
    "groq": _groq,
    "ollama": _ollama,
    "cohere": _cohere,
    "google_genai": _google_genai,
    "bedrock": _bedrock,
    "litellm": _litellm,
    "bedrock_invoke": _bedrock_invoke,
}


def _drain(stream: Any) -> None:
    for _ in stream:
        pass


def callgrind_child(variant: str, calls: int) -> None:
    """``provider:impl:case``: set up, warm up, ``calls`` calls, the pipeline flushed before exit.

    ``streamN`` warms up on ``warmN``'s short stream (``stream<short>,<N>``), so the runs of the short and the long
    stream differ only in the measured streams and their difference alone gives the per-chunk slope.
    """
    name, impl, case = variant.split(":")
    provider = PROVIDERS[name]
    if impl == "fold":  # the uninstrumented client parses one long stream, set up alike in both runs
        item = recorded(provider, case)
        events = stream_events(item, int(case[4:]))
        chunks: list[Any] = []
        global _drain
        _drain = chunks.extend
        client_call = CLIENTS[name](item, httpx.MockTransport(handler(item, events)), True)
        for body in _BEDROCK_STREAMS:
            body["events"] = events
        client_call()
        fold = fold_function(name, chunks)
        for _ in range(WARMUP):
            fold()
        gc.collect()
        gc.disable()
        for _ in range(calls):
            fold()
        _callgrind.count_to_here()  # the interpreter's teardown (litellm's and openai's modules) is no fold
        print(len(chunks), file=sys.stderr)
        return
    flush: Callable[[], Any] = lambda: None  # noqa: E731
    if impl == "evaltrace":
        from _pipeline import ReadingExporter, evaltrace_pipeline

        import evaltrace
        from evaltrace._internal import settings

        handle = evaltrace_pipeline(ReadingExporter())
        settings.replace(settings.CaptureSettings(capture_content=True))
        getattr(evaltrace, provider.instrument)()
        flush = handle.force_flush
    item = recorded(provider, case)
    stream = case.startswith("stream")
    if stream:
        warm, measured = (int(n) for n in case[6:].split(","))
        current = {"events": stream_events(item, warm)}
        fn = CLIENTS[name](item, httpx.MockTransport(lambda r: handler(item, current["events"])(r)), True)
        for body in _BEDROCK_STREAMS:
            body["events"] = current["events"]
    else:
        fn = CLIENTS[name](item, httpx.MockTransport(handler(item, None)), False)
    for _ in range(WARMUP):
        fn()
    flush()
    if stream:
        current["events"] = stream_events(item, measured)
        for body in _BEDROCK_STREAMS:
            body["events"] = current["events"]
    gc.collect()
    gc.disable()  # a cyclic collection lands in one run and not the other (see bench_openai_pipeline.py)
    for _ in range(calls):
        fn()
    flush()


def run_fold(names: list[str], reps: int, long: int) -> None:
    """The ``fold`` row: instructions per chunk of each provider's own stream code (see ``fold_function``)."""
    print(f"fold: callgrind, PYTHONHASHSEED=0; {reps} folds of one stream of {long} content events, minus 0 folds")
    for name in [n for n in names if sdk_missing(n)]:
        print(f"{name:13} fold      (skipped: {sdk_missing(name)} is not installed)", flush=True)
    names = [n for n in names if not sdk_missing(n)]
    if not names:
        return
    variants = [f"{name}:fold:fold{long}" for name in names]
    if _callgrind.can_count_from_collect():  # counted from the child's gc.collect(), as the smoke run's fold rows
        runs = [(variant, n) for variant in variants for n in (0, reps)]
        with ThreadPoolExecutor(max_workers=2) as pool:
            counts = pool.map(lambda run: _callgrind.run_totals(__file__, *run, from_collect=True), runs)
            totals = dict(zip(runs, counts, strict=True))
        results = {v: _callgrind.PerCall((totals[(v, reps)][1] - totals[(v, 0)][1]) / reps, 0.0) for v in variants}
    else:
        results = _callgrind.measure(__file__, variants, reps)
    for name, variant in zip(names, variants, strict=True):
        counted = subprocess.run(  # the chunks the SDK made of the stream (the child prints their number)
            [sys.executable, __file__, _callgrind.CHILD_FLAG, variant, "0"], capture_output=True, text=True, check=True
        )
        chunks = int(counted.stderr.split()[-1])
        per_chunk = results[variant].app_thread / chunks
        print(f"{name:13} fold      {per_chunk:11,.0f} per chunk ({chunks} chunks)", flush=True)
        print(json.dumps({"provider": name, "row": "fold", "per_chunk": per_chunk, "chunks": chunks}), file=sys.stderr)


def run(names: list[str], calls: int, stream_calls: int, short: int, long: int, rows: set[str]) -> None:
    print(f"callgrind, PYTHONHASHSEED=0; {calls} calls, {stream_calls} streams of {short} and {long} content events")
    head = f"{'provider':13} {'row':9} {'floor app':>11} {'evaltrace app':>13} {'x':>5} {'floor all':>11}"
    print(head + f" {'evaltrace all':>13} {'x':>5} {'added all':>10}")
    for name in names:
        provider = PROVIDERS[name]
        missing = sdk_missing(name)
        if missing is not None:
            print(f"{name:13} (skipped: {missing} is not installed)", flush=True)
            continue
        if "call" in rows:
            variants = [f"{name}:{impl}:call" for impl in ("none", "evaltrace")]
            results = _callgrind.measure(__file__, variants, calls)
            floor, ours = results[variants[0]], results[variants[1]]
            _row(name, "call", floor.app_thread, ours.app_thread, floor.all_threads, ours.all_threads)
        if "chunk" not in rows:
            continue
        if provider.stream is None:
            print(f"{name:13} {'chunk':9} (no recorded stream of more than one event)")
            continue
        # Both runs warm up alike (the short stream) and differ only in their measured streams: no 0-call run.
        cases = [f"stream{short},{short}", f"stream{short},{long}"]
        variants = [f"{name}:{impl}:{case}" for impl in ("none", "evaltrace") for case in cases]
        with ThreadPoolExecutor(max_workers=2) as pool:
            totals = dict(
                zip(
                    variants,
                    pool.map(lambda v: _callgrind.run_totals(__file__, v, stream_calls), variants),
                    strict=True,
                )
            )
        per_chunk = stream_calls * (long - short)
        slope = {}
        for impl in ("none", "evaltrace"):
            short_run, long_run = totals[f"{name}:{impl}:{cases[0]}"], totals[f"{name}:{impl}:{cases[1]}"]
            slope[(impl, "app")] = (long_run[1] - short_run[1]) / per_chunk
            slope[(impl, "all")] = (sum(long_run.values()) - sum(short_run.values())) / per_chunk
        _row(name, "chunk", slope[("none", "app")], slope[("evaltrace", "app")], slope[("none", "all")],
             slope[("evaltrace", "all")])  # fmt: skip
        sys.stdout.flush()


def _row(name: str, row: str, floor_app: float, app: float, floor_all: float, total: float) -> None:
    print(
        f"{name:13} {row:9} {floor_app:11,.0f} {app:13,.0f} {app / floor_app:5.2f} {floor_all:11,.0f}"
        f" {total:13,.0f} {total / floor_all:5.2f} {total - floor_all:10,.0f}",
        flush=True,
    )
    print(json.dumps({"provider": name, "row": row, "floor_app": floor_app, "app": app, "floor_all": floor_all,
                      "all": total}), file=sys.stderr)  # fmt: skip


def main() -> None:
    child = _callgrind.child_request(sys.argv)
    if child is not None:
        callgrind_child(*child)
        return
    parser = argparse.ArgumentParser()
    parser.add_argument("--providers", default=",".join(PROVIDERS), help="comma-separated: " + ",".join(PROVIDERS))
    parser.add_argument("--quick", action="store_true", help="fewer calls and shorter streams")
    parser.add_argument("--calls", type=int, default=None, help="calls per plain-call run (default 20, quick 8)")
    parser.add_argument("--stream-calls", type=int, default=None, help="streams per run (default 6, quick 3)")
    parser.add_argument("--rows", default="call,chunk", help="comma-separated: call, chunk, fold (default call,chunk)")
    args = parser.parse_args()
    names = [n for n in args.providers.split(",") if n]
    unknown = [n for n in names if n not in PROVIDERS]
    if unknown:
        parser.error(f"unknown provider(s) {', '.join(unknown)}; choose from {', '.join(PROVIDERS)}")
    calls = args.calls or (8 if args.quick else 20)
    stream_calls = args.stream_calls or (3 if args.quick else 6)
    short, long = (QUICK_SHORT, QUICK_LONG) if args.quick else (SHORT, LONG)
    os.environ.setdefault("PYTHONHASHSEED", "0")
    rows = set(args.rows.split(","))
    if rows - {"call", "chunk", "fold"}:
        parser.error(f"unknown row(s) {', '.join(sorted(rows - {'call', 'chunk', 'fold'}))}")
    if rows & {"call", "chunk"}:
        run(names, calls, stream_calls, short, long, rows)
    if "fold" in rows:
        run_fold(names, calls, long)


if __name__ == "__main__":
    main()
