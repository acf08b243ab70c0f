"""Groq audio (transcriptions, translations, speech) is deliberately not traced by ``instrument_groq()``.

The GenAI conventions give speech-to-text and text-to-speech no ``gen_ai.operation.name`` (docs/providers/groq.md
says why we do not invent one). These tests pin both halves of that decision against the real ``groq`` client on
127.0.0.1: the calls pass through unchanged and make no span, and a function the application decorates around
them (the documented way to time them) is its one span. No Groq audio traffic was recorded: the bodies follow
the SDK's ``Transcription`` / ``Translation`` types (JSON ``{"text": ...}``) and speech's binary audio.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

groq = pytest.importorskip("groq")

from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402

import evaltrace  # noqa: E402
from cassettes import Recorded, ReplayServer  # noqa: E402

WAV = b"RIFF\x24\x00\x00\x00WAVEfmt "  # the upload's bytes: the server never decodes them
TEXT = "Hello from the recording."


@pytest.fixture
def instrumented(provider: TracerProvider, capture: None) -> Iterator[None]:
    evaltrace.instrument_groq()
    yield
    evaltrace.uninstrument_groq()


def _served(uri: str, body: bytes, content_type: str) -> Recorded:
    return Recorded("POST", uri, b"", 200, "OK", [("content-type", content_type)], body)


def _text(uri: str) -> Recorded:
    return _served(uri, json.dumps({"text": TEXT, "x_groq": {"id": "req_01"}}).encode(), "application/json")


async def _audio_calls(url: str, is_async: bool) -> list[Any]:
    client = (groq.AsyncGroq if is_async else groq.Groq)(api_key="x", base_url=url, max_retries=0)
    calls = [
        lambda: client.audio.transcriptions.create(file=("a.wav", WAV), model="whisper-large-v3-turbo"),
        lambda: client.audio.translations.create(file=("a.wav", WAV), model="whisper-large-v3"),
        lambda: client.audio.speech.create(model="playai-tts", voice="Fritz-PlayAI", input=TEXT, response_format="wav"),
    ]
    results = []
    for call in calls:
        result = call()
        results.append(await result if is_async else result)
    speech = results[-1]  # binary audio, read before the client closes
    results[-1] = await speech.read() if is_async else speech.read()
    if is_async:
        await client.close()
    else:
        client.close()
    return results


@pytest.mark.usefixtures("instrumented")
async def test_audio_calls_pass_through_unchanged_and_make_no_span(
    is_async: bool, exporter: InMemorySpanExporter
) -> None:
    served = [
        _text("https://api.groq.com/openai/v1/audio/transcriptions"),
        _text("https://api.groq.com/openai/v1/audio/translations"),
        _served("https://api.groq.com/openai/v1/audio/speech", WAV, "audio/wav"),
    ]
    with ReplayServer(served) as srv:
        transcription, translation, speech = await _audio_calls(srv.url, is_async)
    assert [r.path for r in srv.received] == [
        "/openai/v1/audio/transcriptions",
        "/openai/v1/audio/translations",
        "/openai/v1/audio/speech",
    ]
    assert transcription.text == TEXT and translation.text == TEXT
    assert speech == WAV
    assert exporter.get_finished_spans() == ()


@pytest.mark.usefixtures("instrumented")
def test_a_decorated_function_around_a_transcription_is_its_one_span(exporter: InMemorySpanExporter) -> None:
    """The documented way to time (and evaluate) an audio step: decorate the application's own function."""

    @evaltrace.tool(name="transcribe")
    def transcribe(url: str) -> str:
        client = groq.Groq(api_key="x", base_url=url, max_retries=0)
        with client:
            return str(client.audio.transcriptions.create(file=("a.wav", WAV), model="whisper-large-v3-turbo").text)

    with ReplayServer([_text("https://api.groq.com/openai/v1/audio/transcriptions")]) as srv:
        assert transcribe(srv.url) == TEXT
    (span,) = exporter.get_finished_spans()
    assert (span.attributes or {})["evaltrace.span.kind"] == "tool"
    assert TEXT in str((span.attributes or {}).get("gen_ai.tool.call.result", ""))
