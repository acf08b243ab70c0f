"""A toy LLM SDK for the engine's own tests: every endpoint shape the engine must handle, no network.

Module functions and class methods, sync and async, plain responses (dicts), streams as a generator, an async
generator and an iterator-context-manager (mistral's ``EventStream`` shape), a botocore-like ``api_call`` whose
operation is an argument, and errors carrying a provider code.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any


class ToyError(Exception):
    """An API error with a provider code, its HTTP status where botocore keeps it."""

    def __init__(self, message: str, code: str) -> None:
        super().__init__(message)
        self.code = code
        self.response = {"ResponseMetadata": {"HTTPStatusCode": 404}}


def _answer(model: str, prompt: str) -> dict[str, Any]:
    return {
        "id": "resp-1",
        "model": f"{model}-001",
        "text": f"echo: {prompt}",
        "stop": "end",
        "usage": {"in": 3, "out": 2},
    }


def _chunks(model: str, prompt: str, finish: bool) -> list[dict[str, Any]]:
    chunks: list[dict[str, Any]] = [{"id": "resp-2", "model": f"{model}-001"}]
    chunks += [{"delta": word} for word in ("echo: ", prompt)]
    if finish:
        chunks.append({"stop": "end", "usage": {"in": 3, "out": 2}})
    return chunks


def complete(model: str, prompt: str, stream: bool = False, finish: bool = True, api_base: str = "") -> Any:
    """A module-level function: a dict, or a generator of chunks with ``stream=True``."""
    if model == "broken":
        raise ToyError("no such model", "model_not_found")
    if stream:
        return (chunk for chunk in _chunks(model, prompt, finish))
    return _answer(model, prompt)


class EventStream:
    """An iterator that is also a context manager (closing it on exit)."""

    def __init__(self, chunks: list[dict[str, Any]]) -> None:
        self._chunks = iter(chunks)
        self.closed = False

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return self

    def __next__(self) -> dict[str, Any]:
        if self.closed:
            raise StopIteration
        return next(self._chunks)

    def __enter__(self) -> EventStream:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        self.closed = True


class Events:
    """An iterable that is not its own iterator (botocore's ``EventStream``: ``__iter__`` is a generator)."""

    def __init__(self, chunks: list[dict[str, Any]]) -> None:
        self._chunks = chunks

    def __iter__(self) -> Iterator[dict[str, Any]]:
        yield from self._chunks

    def close(self) -> None:
        self._chunks = []


class DualStream(EventStream):
    """A stream that is both sync and async (LiteLLM's ``CustomStreamWrapper``)."""

    def __aiter__(self) -> DualStream:
        return self

    async def __anext__(self) -> dict[str, Any]:
        try:
            return next(self)
        except StopIteration:
            raise StopAsyncIteration from None


class Client:
    """A client whose methods are wrapped on the class; ``host``/``port`` are the server attributes."""

    def __init__(self, host: str = "toy.example", port: int = 8443) -> None:
        self.host = host
        self.port = port

    def chat(self, **kwargs: Any) -> Any:
        if kwargs.get("stream"):
            return EventStream(_chunks(kwargs["model"], kwargs["prompt"], True))
        return _answer(kwargs["model"], kwargs["prompt"])

    async def achat(self, **kwargs: Any) -> Any:
        if kwargs["model"] == "broken":
            raise ToyError("no such model", "model_not_found")
        if kwargs.get("stream"):
            return _agen(_chunks(kwargs["model"], kwargs["prompt"], True))
        return _answer(kwargs["model"], kwargs["prompt"])

    def dual(self, **kwargs: Any) -> DualStream:
        """Returns a stream that could be read either way; this sync method's caller reads it sync."""
        return DualStream(_chunks(kwargs["model"], kwargs["prompt"], True))

    def api_call(self, operation: str, params: dict[str, Any]) -> Any:
        """botocore's shape: one method for every operation, some of them not LLM calls."""
        if operation == "Converse":
            return _answer(params["modelId"], params["prompt"])
        if operation == "ConverseStream":
            return {"stream": Events(_chunks(params["modelId"], params["prompt"], True)), "meta": {}}
        return {"models": ["a", "b"]}


async def _agen(chunks: list[dict[str, Any]]) -> AsyncIterator[dict[str, Any]]:
    for chunk in chunks:
        yield chunk
