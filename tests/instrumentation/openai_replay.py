"""Replay recorded OpenAI traffic (vcrpy cassettes) through the real openai client over httpx.MockTransport.

Responses are served in recorded order with the recorded status, headers and body; SSE bodies are re-chunked
per event so the client sees one network read per event, as on the wire.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
import yaml

_DROP_HEADERS = {"content-length", "content-encoding", "transfer-encoding"}


@dataclass
class Interaction:
    path: str
    request: dict[str, Any]
    status: int
    headers: list[tuple[str, str]]
    body: str
    fail_after: int | None = None  # SSE only: raise ``error`` from the transport after this many events
    error: BaseException | None = None

    @property
    def is_sse(self) -> bool:
        return any(k.lower() == "content-type" and "event-stream" in v for k, v in self.headers)

    @property
    def json(self) -> Any:
        return json.loads(self.body)

    def sse_events(self) -> list[dict[str, Any]]:
        """The JSON payloads of the data events (without [DONE])."""
        out = []
        for event in self.body.split("\n\n"):
            for line in event.splitlines():
                if line.startswith("data: ") and not line.startswith("data: [DONE]"):
                    out.append(json.loads(line[len("data: ") :]))
        return out


def load(path: Path) -> list[Interaction]:
    data = yaml.safe_load(path.read_text())
    out = []
    for item in data["interactions"]:
        headers: list[tuple[str, str]] = []
        for name, values in item["response"]["headers"].items():
            if name.lower() in _DROP_HEADERS:
                continue
            for value in values if isinstance(values, list) else [values]:
                headers.append((name, str(value)))
        out.append(
            Interaction(
                path=httpx.URL(item["request"]["uri"]).path,
                request=json.loads(item["request"]["body"]),
                status=item["response"]["status"]["code"],
                headers=headers,
                body=item["response"]["body"]["string"],
            )
        )
    return out


def sse_body(chunks: list[Any]) -> str:
    """An SSE body from SDK models (``model_dump_json``) or dicts, ending with [DONE]."""
    parts = []
    for chunk in chunks:
        text = chunk.model_dump_json(exclude_unset=True) if hasattr(chunk, "model_dump_json") else json.dumps(chunk)
        parts.append(f"data: {text}\n\n")
    parts.append("data: [DONE]\n\n")
    return "".join(parts)


def sse_interaction(path: str, chunks: list[Any], request: dict[str, Any] | None = None) -> Interaction:
    return Interaction(path, request or {}, 200, [("content-type", "text/event-stream")], sse_body(chunks))


def json_interaction(path: str, body: Any, request: dict[str, Any] | None = None, status: int = 200) -> Interaction:
    text = body.model_dump_json() if hasattr(body, "model_dump_json") else json.dumps(body)
    return Interaction(path, request or {}, status, [("content-type", "application/json")], text)


def _events(body: str) -> list[bytes]:
    return [(event + "\n\n").encode() for event in body.split("\n\n") if event.strip()]


class Server:
    """Serves interactions in order; records the requests it saw."""

    def __init__(self, interactions: list[Interaction], is_async: bool) -> None:
        self.pending = list(interactions)
        self.is_async = is_async
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        item = self.pending.pop(0)
        assert request.url.path.endswith(item.path.removeprefix("/v1")), (request.url.path, item.path)
        content: Any
        if item.is_sse:
            events = _events(item.body)
            if item.fail_after is not None:
                events = events[: item.fail_after]
            content = _aiter(events, item.error) if self.is_async else _iter(events, item.error)
        else:
            content = item.body.encode()
        return httpx.Response(item.status, headers=item.headers, content=content)


def _iter(events: list[bytes], error: BaseException | None) -> Iterator[bytes]:
    yield from events
    if error is not None:
        raise error


async def _aiter(events: list[bytes], error: BaseException | None) -> AsyncIterator[bytes]:
    for event in events:
        yield event
    if error is not None:
        raise error


def client(
    interactions: list[Interaction], is_async: bool, base_url: str = "https://api.openai.com/v1"
) -> tuple[Any, Server]:
    server = Server(interactions, is_async)
    if is_async:
        aclient = httpx.AsyncClient(transport=httpx.MockTransport(server))
        return openai.AsyncOpenAI(api_key="test", base_url=base_url, http_client=aclient, max_retries=0), server
    sclient = httpx.Client(transport=httpx.MockTransport(server))
    return openai.OpenAI(api_key="test", base_url=base_url, http_client=sclient, max_retries=0), server


_RESOURCES = (("/chat/completions", "chat.completions"), ("/responses", "responses"), ("/embeddings", "embeddings"))


def resource_for(path: str) -> str:
    """The client attribute path that serves a URL path: ``/v1/chat/completions`` -> ``chat.completions``."""
    for suffix, resource in _RESOURCES:
        if path.endswith(suffix):
            return resource
    raise AssertionError(path)


def method_for(api: Any, path: str) -> Callable[..., Any]:
    return attribute(api, f"{resource_for(path)}.create")  # type: ignore[no-any-return]


def attribute(obj: Any, dotted: str) -> Any:
    """``attribute(api, "chat.completions.parse")`` is ``api.chat.completions.parse``; None when absent."""
    for name in dotted.split("."):
        obj = getattr(obj, name, None)
        if obj is None:
            return None
    return obj


@lru_cache(maxsize=1)
def _probe() -> openai.OpenAI:
    # A client that is never called: only its resource attributes are looked at.
    probe = openai.OpenAI(api_key="probe", http_client=httpx.Client(transport=httpx.MockTransport(Server([], False))))
    probe.close()
    return probe


@cache
def has_api(dotted: str) -> bool:
    """True when the installed openai client has ``client.<dotted>``: feature detection, never a version check.

    The supported range (pyproject's ``openai>=``) spans APIs that came later: Responses (``client.responses``),
    ``responses.parse`` / ``stream``, ``chat.completions.parse`` out of beta, ``beta.responses``.
    """
    return attribute(_probe(), dotted) is not None


def skip_unless_api(*dotted: str) -> None:
    """Skip the running test, naming what is missing, when the installed client lacks one of these APIs."""
    missing = [name for name in dotted if not has_api(name)]
    if missing:
        names = ", ".join(f"client.{name}" for name in missing)
        pytest.skip(f"openai {openai.__version__} has no {names} (feature-detected)")


def skip_unless_accepts(dotted: str, *params: str) -> None:
    """Skip unless ``client.<dotted>`` exists and takes these keyword arguments (request fields added later)."""
    skip_unless_api(dotted)
    accepted = inspect.signature(attribute(_probe(), dotted)).parameters
    missing = [name for name in params if name not in accepted]
    if missing:
        pytest.skip(f"openai {openai.__version__}: client.{dotted}() takes no {', '.join(missing)} (feature-detected)")


def import_or_skip(module: str, *names: str) -> list[Any]:
    """``from module import names``, or skip naming what this openai lacks (types added in later versions)."""
    imported = pytest.importorskip(module, reason=f"openai {openai.__version__} has no {module}")
    missing = [name for name in names if not hasattr(imported, name)]
    if missing:
        pytest.skip(f"openai {openai.__version__} has no {module}.{', '.join(missing)} (feature-detected)")
    return [getattr(imported, name) for name in names]


async def drain(result: Any, is_async: bool) -> list[Any]:
    if is_async:
        return [chunk async for chunk in result]
    return list(result)


def iter_chunks(result: Any) -> Iterator[Any]:
    yield from result
