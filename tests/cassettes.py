"""Serve recorded provider traffic (vcrpy cassettes) from a real HTTP server on 127.0.0.1.

Every provider SDK takes a base URL (``base_url``, ``server_url``, ``endpoint_url``, ``host``, ``api_base``), so
the real client talks HTTP to :class:`ReplayServer` exactly as it would to the provider; nothing inside the SDK is
patched. The loader reads the three shapes the fixture sets use (see each ``tests/fixtures/<provider>-cassettes``
README): ``body: {string: ...}`` (text or ``!!binary``), a bare ``body: ...`` string, and pydantic-ai's
``parsed_body`` tree, which is served as ``json.dumps`` of the tree as upstream's loader does.

Example:
    >>> with ReplayServer(load_cassette(path)) as server:  # doctest: +SKIP
    ...     client = groq.Groq(base_url=server.url, api_key="test")
"""

from __future__ import annotations

import gzip
import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

FIXTURES = Path(__file__).parent / "fixtures"

# Framing headers are recomputed for the served body (a recorded body may have been decompressed or re-indented).
_DROP_HEADERS = {"content-length", "content-encoding", "transfer-encoding", "connection"}


@dataclass
class Recorded:
    """One recorded request/response pair."""

    method: str
    uri: str
    request_body: bytes
    status: int
    reason: str
    headers: list[tuple[str, str]]
    body: bytes

    @property
    def path(self) -> str:
        """The request path with its query, as a client sends it."""
        parts = urlsplit(self.uri)
        return parts.path + (f"?{parts.query}" if parts.query else "")

    @property
    def content_type(self) -> str:
        for name, value in self.headers:
            if name.lower() == "content-type":
                return value
        return ""

    def request_json(self) -> Any:
        """The request body parsed as JSON."""
        return json.loads(self.request_body)

    def response_json(self) -> Any:
        """The response body parsed as JSON."""
        return json.loads(self.body)


def _body(part: dict[str, Any]) -> bytes:
    if "parsed_body" in part:
        return json.dumps(part["parsed_body"]).encode()
    body = part.get("body")
    if isinstance(body, dict):
        body = body.get("string")
    if body is None:
        return b""
    if isinstance(body, bytes):
        return body
    return str(body).encode()


def _headers(raw: dict[str, Any] | None) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for name, values in (raw or {}).items():
        for value in values if isinstance(values, list) else [values]:
            out.append((str(name), value.decode() if isinstance(value, bytes) else str(value)))
    return out


def _inferred_content_type(body: bytes) -> str:
    """The content type of a body recorded with its headers stripped, as the fixture READMEs say to infer it.

    OpenInference's Ollama cassettes keep no headers at all: a streamed ``/api/chat`` body is NDJSON (one JSON
    object per line) on the wire, and is served so, one line per chunk.
    """
    text = body.lstrip()
    if text.startswith((b"data:", b"event:")):
        return "text/event-stream"
    lines = [line for line in body.split(b"\n") if line.strip()]
    if len(lines) > 1 and all(line.lstrip().startswith(b"{") for line in lines):
        return "application/x-ndjson"
    return "application/json" if text.startswith((b"{", b"[")) else ""


def load_cassette(path: Path) -> list[Recorded]:
    """Every interaction of the cassette at ``path``, in recorded order."""
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    out = []
    for item in data["interactions"]:
        request, response = item["request"], item["response"]
        headers = _headers(response.get("headers"))
        body = _body(response)
        if any(n.lower() == "content-encoding" and "gzip" in v for n, v in headers) and body[:2] == b"\x1f\x8b":
            body = gzip.decompress(body)
        if body and not any(n.lower() == "content-type" for n, _ in headers):
            inferred = _inferred_content_type(body)
            if inferred:
                headers.append(("content-type", inferred))
        status = response.get("status") or {}
        out.append(
            Recorded(
                method=str(request.get("method", "POST")).upper(),
                uri=str(request["uri"]),
                request_body=_body(request),
                status=int(status.get("code", 200)),
                reason=str(status.get("message", "OK")),
                headers=[(n, v) for n, v in headers if n.lower() not in _DROP_HEADERS],
                body=body,
            )
        )
    return out


@dataclass
class Received:
    """A request the server got: what the SDK really sent."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class _State:
    interactions: list[Recorded]
    by_path: bool = False
    served: int = 0
    used: set[int] = field(default_factory=set)  # by_path: the interactions served already
    received: list[Received] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


def _chunks(item: Recorded) -> list[bytes]:
    """The body as the wire delivered it: one write per SSE/NDJSON event, so the client reads them one by one."""
    body, kind = item.body, item.content_type
    if "event-stream" in kind:
        return [event + b"\n\n" for event in body.split(b"\n\n") if event.strip()]
    if "ndjson" in kind or "jsonl" in kind:
        return [line + b"\n" for line in body.split(b"\n") if line.strip()]
    return [body]


def _next_for(state: _State, method: str, path: str) -> int:
    """The first interaction not served yet recorded for ``method`` and ``path`` (query aside); past the end if none."""
    for index, item in enumerate(state.interactions):
        if index not in state.used and item.method == method and item.path.split("?")[0] == path:
            state.used.add(index)
            return index
    return len(state.interactions)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        return  # quiet: tests read failures from assertions

    def _serve(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length) if length else b""
        state = self.server.state
        with state.lock:
            state.received.append(Received(self.command, self.path, dict(self.headers.items()), body))
            index = state.served
            state.served += 1
            if state.by_path:
                index = _next_for(state, self.command, self.path.split("?")[0])
        if index >= len(state.interactions):
            self.send_response(599, "no recorded interaction left")
            self.send_header("content-length", "0")
            self.end_headers()
            return
        item = state.interactions[index]
        chunks = _chunks(item)
        self.send_response(item.status, item.reason)
        for name, value in item.headers:
            self.send_header(name, value)
        if len(chunks) == 1:
            self.send_header("content-length", str(len(chunks[0])))
            self.end_headers()
            self.wfile.write(chunks[0])
            return
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        for chunk in chunks:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _serve


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    state: _State


class ReplayServer:
    """A threaded HTTP server on 127.0.0.1 answering each request with the next recorded response.

    Responses are served in recorded order whatever the path (the SDK under test chooses the path; tests assert
    it through :attr:`received`). With ``by_path``, each request gets the first interaction not served yet that was
    recorded for its method and path (query aside): for an SDK whose versions order their requests differently.
    SSE and NDJSON bodies go out one event per chunk.
    """

    def __init__(self, interactions: list[Recorded], by_path: bool = False) -> None:
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.state = _State(list(interactions), by_path)
        self._thread = threading.Thread(target=self._server.serve_forever, name="replay-server", daemon=True)

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>``, without a trailing slash."""
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def received(self) -> list[Received]:
        """The requests received so far, in order."""
        return list(self._server.state.received)

    def __enter__(self) -> ReplayServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
