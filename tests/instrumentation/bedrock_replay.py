"""Replaying the recorded Bedrock traffic (tests/fixtures/bedrock-cassettes) through a real boto3 client.

Each recorded ``bedrock-runtime`` request is sent again by boto3 itself, to :class:`cassettes.ReplayServer`: the
operation and model id come from the recorded URI (``/model/<id>/<converse | converse-stream | invoke |
invoke-with-response-stream>``), the API params from the recorded body (Converse's JSON body is its params; a
native body is sent as recorded). Interactions that are not ``bedrock-runtime`` calls (a test's asset download,
another provider's request) are left out of the server, so boto3's calls get the recorded Bedrock answers in order.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import boto3
import pytest

from cassettes import FIXTURES, Recorded, ReplayServer, load_cassette

BEDROCK = FIXTURES / "bedrock-cassettes"
OPENINFERENCE = BEDROCK / "openinference"
PYDANTIC_AI = BEDROCK / "pydantic-ai"
REGION = "us-east-1"

# URI suffix -> boto3 method
_METHODS = {
    "converse": "converse",
    "converse-stream": "converse_stream",
    "invoke": "invoke_model",
    "invoke-with-response-stream": "invoke_model_with_response_stream",
}


@dataclass(frozen=True)
class Call:
    """One recorded ``bedrock-runtime`` request, as the boto3 call that sends it."""

    method: str
    model: str
    params: dict[str, Any]
    recorded: Recorded


def calls_of(interactions: list[Recorded]) -> list[Call]:
    """The recorded requests that are one of the four traced operations, in order."""
    out: list[Call] = []
    for item in interactions:
        parts = urlsplit(item.uri)
        if not (parts.hostname or "").startswith("bedrock-runtime.") or item.method != "POST":
            continue
        segments = parts.path.split("/")
        method = _METHODS.get(segments[-1])
        if method is None or len(segments) < 4 or segments[1] != "model":
            continue
        model = unquote("/".join(segments[2:-1]))
        if method.startswith("converse"):
            try:
                params = json.loads(item.request_body) if item.request_body else {}
            except ValueError:
                continue  # one upstream recording cut its request body short: not a request boto3 can resend
        else:
            params = {"body": item.request_body, "contentType": "application/json", "accept": "application/json"}
        out.append(Call(method, model, params, item))
    return out


def recorded_params(method: str) -> list[Any]:
    """A ``pytest.param(path, index)`` for each call to ``method`` the cassettes answered with 200, in order.

    ``index`` is the call's place among its cassette's Bedrock calls (``calls_of``); ids read ``<stem>-<index>``.
    """
    out = []
    for path in cassettes():
        for index, call in enumerate(calls_of(load_cassette(path))):
            if call.method == method and call.recorded.status == 200:
                out.append(pytest.param(path, index, id=f"{path.stem}-{index}"))
    return out


def client(server: ReplayServer) -> Any:
    """A real ``bedrock-runtime`` client pointed at the replay server."""
    return boto3.client(
        "bedrock-runtime",
        region_name=REGION,
        endpoint_url=server.url,
        aws_access_key_id="test",
        aws_secret_access_key="test",
    )


@contextmanager
def replay(path: Path) -> Iterator[tuple[Any, list[Call], ReplayServer]]:
    """(client, the cassette's Bedrock calls, server) for the cassette at ``path``."""
    calls = calls_of(load_cassette(path))
    with ReplayServer([c.recorded for c in calls]) as server:
        yield client(server), calls, server


def send(api: Any, call: Call) -> Any:
    """Send ``call`` with boto3; a stream is read to its end. Returns boto3's result dict."""
    result = getattr(api, call.method)(modelId=call.model, **call.params)
    return result


def read_stream(result: dict[str, Any]) -> list[Any]:
    """Every event of a streaming result (``stream`` for Converse, ``body`` for invoke), read to the end."""
    return list(result["stream"] if "stream" in result else result["body"])


def only_span(exporter: Any) -> Any:
    """The one span ``exporter`` holds (fails naming the spans otherwise)."""
    spans = exporter.get_finished_spans()
    assert len(spans) == 1, [s.name for s in spans]
    return spans[0]


def attrs_json(span: Any, key: str) -> Any:
    """A JSON-string attribute of ``span``, parsed."""
    return json.loads(span.attributes[key])


# --- synthetic traffic, for the families and failures no recording covers --------------------------------


def _header(name: str, value: str) -> bytes:
    raw = value.encode()
    return bytes([len(name)]) + name.encode() + b"\x07" + len(raw).to_bytes(2, "big") + raw


def frame(headers: dict[str, str], payload: bytes) -> bytes:
    """One AWS event-stream frame (prelude, CRC, string headers, payload, CRC), as Bedrock sends it."""
    head = b"".join(_header(k, v) for k, v in headers.items())
    total = 16 + len(head) + len(payload)
    prelude = total.to_bytes(4, "big") + len(head).to_bytes(4, "big")
    prelude += binascii.crc32(prelude).to_bytes(4, "big")
    message = prelude + head + payload
    return message + binascii.crc32(message).to_bytes(4, "big")


def converse_frame(event_type: str, body: dict[str, Any]) -> bytes:
    """A ``converse_stream`` event frame (``messageStart``, ``contentBlockDelta``, ...)."""
    headers = {":event-type": event_type, ":content-type": "application/json", ":message-type": "event"}
    return frame(headers, json.dumps(body).encode())


def chunk_frame(chunk: dict[str, Any] | bytes) -> bytes:
    """An ``invoke_model_with_response_stream`` ``chunk`` frame carrying ``chunk`` as base64 JSON bytes.

    A dict is written with ``json.dumps``' default separators; bytes are the model event exactly as given.
    """
    headers = {":event-type": "chunk", ":content-type": "application/json", ":message-type": "event"}
    raw = chunk if isinstance(chunk, bytes) else json.dumps(chunk).encode()
    payload = json.dumps({"bytes": base64.b64encode(raw).decode()}).encode()
    return frame(headers, payload)


def exception_frame(error_type: str, message: str) -> bytes:
    """A modelled stream error (``throttlingException``, ``modelStreamErrorException``...): botocore raises it."""
    headers = {":exception-type": error_type, ":content-type": "application/json", ":message-type": "exception"}
    return frame(headers, json.dumps({"message": message}).encode())


def synthetic(path: str, body: bytes, headers: list[tuple[str, str]] | None = None, status: int = 200) -> Recorded:
    """A response the replay server serves for a Bedrock call (``path``: ``<model>/<operation suffix>``)."""
    return Recorded(
        method="POST",
        uri=f"https://bedrock-runtime.{REGION}.amazonaws.com/model/{path}",
        request_body=b"",
        status=status,
        reason="OK" if status == 200 else "Error",
        headers=[("x-amzn-RequestId", "req-synthetic"), *(headers or [])],
        body=body,
    )


def cassettes() -> list[Path]:
    """Every copied cassette, sorted."""
    return sorted(BEDROCK.rglob("*.yaml"))
