"""Ollama replay helpers: the recorded cassettes (tests/fixtures/ollama-cassettes, OpenInference's recordings).

They hold ``POST /api/chat`` only (streamed as NDJSON, one line per chunk, and not), two tool calls and one 404.
No ``/api/generate`` or ``/api/embed`` recording exists: ``generate_interaction`` and ``embed_interaction`` build
those bodies from the fields of the SDK's ``GenerateResponse`` / ``EmbedResponse`` and the wire format the chat
recordings show (same ``done`` / ``done_reason`` / count fields).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import ollama

from cassettes import FIXTURES, Recorded, load_cassette

SET = FIXTURES / "ollama-cassettes" / "openinference" / "test_instrumentor"
MODEL = "qwen3.6:latest"


def recorded(name: str) -> list[Recorded]:
    """The interactions of one cassette of the set."""
    return load_cassette(SET / name)


def _made(path: str, lines: list[dict[str, Any]]) -> Recorded:
    ndjson = len(lines) > 1
    return Recorded(
        method="POST",
        uri=f"http://127.0.0.1:11434{path}",
        request_body=b"",
        status=200,
        reason="OK",
        headers=[("content-type", "application/x-ndjson" if ndjson else "application/json")],
        body=b"\n".join(json.dumps(line).encode() for line in lines),
    )


_COUNTS = {"total_duration": 1, "load_duration": 1, "prompt_eval_count": 12, "prompt_eval_duration": 1,
           "eval_count": 5, "eval_duration": 1}  # fmt: skip


def generate_interaction(stream: bool) -> Recorded:
    """A ``/api/generate`` answer with thinking (made: no recording exists, see the module docstring)."""
    head = {"model": MODEL, "created_at": "2026-08-07T06:08:14Z"}
    if not stream:
        return _made("/api/generate", [{**head, "response": "Blue.", "thinking": "Rayleigh.", "done": True,
                                        "done_reason": "stop", **_COUNTS}])  # fmt: skip
    return _made(
        "/api/generate",
        [
            {**head, "response": "", "thinking": "Ray", "done": False},
            {**head, "response": "", "thinking": "leigh.", "done": False},
            {**head, "response": "Blu", "done": False},
            {**head, "response": "e.", "done": False},
            {**head, "response": "", "done": True, "done_reason": "length", **_COUNTS},
        ],
    )


def embed_interaction() -> Recorded:
    """An ``/api/embed`` answer for two inputs (made: no recording exists)."""
    return _made("/api/embed", [{"model": "nomic-embed-text", "embeddings": [[0.1, 0.2, 0.3], [0.4, 0.5, 0.6]],
                                 "total_duration": 1, "load_duration": 1, "prompt_eval_count": 4}])  # fmt: skip


@contextmanager
def client_of(url: str) -> Iterator[ollama.Client]:
    """A real ``ollama.Client`` on ``url``, closed afterwards."""
    client = ollama.Client(host=url)
    try:
        yield client
    finally:
        client.close()


@asynccontextmanager
async def async_client_of(url: str) -> AsyncIterator[ollama.AsyncClient]:
    """A real ``ollama.AsyncClient`` on ``url``, closed afterwards."""
    client = ollama.AsyncClient(host=url)
    try:
        yield client
    finally:
        await client.close()


def chat_interaction(lines: list[dict[str, Any]]) -> Recorded:
    """A ``/api/chat`` answer of these lines (one: a whole response; several: an NDJSON stream), made here.

    For the fields the recordings never show (a finished line without ``done_reason`` or ``prompt_eval_count``,
    which older servers and prompt-cache hits send): the rest of each line is the recordings' wire format.
    """
    return _made("/api/chat", lines)
