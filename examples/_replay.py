"""A local stand-in for the OpenAI API: an HTTP server on 127.0.0.1 that replays recorded responses.

Used by ``openai_agent.py`` and ``streaming.py`` so they run without network or API key. The recordings in
``recordings/`` are vcrpy cassettes of real OpenAI traffic (see ``recordings/README.md``). The server answers each
request with the next recorded response of the same method and path, in recorded order, with the recorded status
and headers. A streamed (SSE) body is sent one event per HTTP chunk, optionally paced, as the real API does.

    with ReplayServer(RECORDINGS / "test_chat_completion_streaming.yaml") as server:
        client = openai.OpenAI(api_key="replay", base_url=server.base_url)

A request whose JSON body differs from the recorded one still gets the recorded answer, with a note on stderr:
the replay only knows what was recorded.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

RECORDINGS = Path(__file__).resolve().parent / "recordings"

# The stored bodies were re-serialised (pretty-printed, decompressed), so the recorded framing headers are wrong;
# the server frames the body itself. Values redacted in the recordings ("REDACTED" cookies, organisation ids) are
# placeholders, not something the real API sent, so they are left out too.
_DROPPED_HEADERS = {"content-length", "content-encoding", "transfer-encoding"}
_REDACTED = "REDACTED"


@dataclass
class Recorded:
    """One recorded request/response pair."""

    method: str
    path: str
    request_body: Any
    status: int
    headers: list[tuple[str, str]]
    body: str

    @property
    def is_sse(self) -> bool:
        return any(name.lower() == "content-type" and "event-stream" in value for name, value in self.headers)


def load_cassette(path: Path) -> list[Recorded]:
    """The interactions of a vcrpy cassette, in recorded order."""
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    out = []
    for item in data["interactions"]:
        request, response = item["request"], item["response"]
        headers = []
        for name, values in response["headers"].items():
            for value in values if isinstance(values, list) else [values]:
                if name.lower() not in _DROPPED_HEADERS and str(value) != _REDACTED:
                    headers.append((name, str(value)))
        out.append(
            Recorded(
                method=request["method"].upper(),
                path=urlsplit(request["uri"]).path,
                request_body=json.loads(request["body"]) if request.get("body") else None,
                status=response["status"]["code"],
                headers=headers,
                body=response["body"]["string"],
            )
        )
    return out


def sse_events(body: str) -> list[bytes]:
    """Split a recorded SSE body into its events (the recording keeps the text, not the original chunks)."""
    return [(event + "\n\n").encode() for event in body.split("\n\n") if event.strip()]


class ReplayServer:
    """Serves recorded OpenAI responses on ``127.0.0.1`` from a background thread; use it as a context manager.

    Args:
        *cassettes: vcrpy cassette files; their interactions are served in the order given.
        event_delay: Seconds to wait before each SSE event, so a stream arrives over time as it would live.
    """

    def __init__(self, *cassettes: Path, event_delay: float = 0.0) -> None:
        self.pending = [item for path in cassettes for item in load_cassette(path)]
        self.event_delay = event_delay
        self.served = 0
        self._lock = threading.Lock()
        self._httpd = _HTTPServer(self)
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="openai-replay", daemon=True)

    @property
    def base_url(self) -> str:
        """What to pass as the client's ``base_url`` (the recordings' paths start with ``/v1``)."""
        return f"http://127.0.0.1:{self._httpd.server_port}/v1"

    def __enter__(self) -> ReplayServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def next_for(self, method: str, path: str) -> Recorded | None:
        """Take the first pending interaction recorded for ``method`` and ``path``."""
        with self._lock:
            for index, item in enumerate(self.pending):
                if item.method == method and item.path == path:
                    self.served += 1
                    return self.pending.pop(index)
        return None


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, and chunked transfer for streams
    server: _HTTPServer

    def do_POST(self) -> None:
        self._replay()

    def do_GET(self) -> None:
        self._replay()

    def _replay(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        path = urlsplit(self.path).path
        replay = self.server.replay
        item = replay.next_for(self.command, path)
        if item is None:
            message = f"no recorded response left for {self.command} {path}"
            body = json.dumps({"error": {"message": message, "type": "replay_exhausted"}}).encode()
            self._send(404, [("Content-Type", "application/json")], body)
            return
        if raw and item.request_body is not None and json.loads(raw) != item.request_body:
            note = f"[replay] request {replay.served} differs from the recording; serving it anyway"
            print(note, file=sys.stderr)
        if item.is_sse:
            self._send_stream(item, replay.event_delay)
        else:
            self._send(item.status, item.headers, item.body.encode())

    def _send(self, status: int, headers: list[tuple[str, str]], body: bytes) -> None:
        self.send_response_only(status)  # the recorded Date/Server headers stand in for our own
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _send_stream(self, item: Recorded, delay: float) -> None:
        self.send_response_only(item.status)
        for name, value in item.headers:
            self.send_header(name, value)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for event in sse_events(item.body):
            time.sleep(delay)
            self.wfile.write(b"%X\r\n%s\r\n" % (len(event), event))
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")

    def log_message(self, format: str, *args: Any) -> None:
        pass  # keep the example's output to what it prints itself


class _HTTPServer(ThreadingHTTPServer):
    def __init__(self, replay: ReplayServer) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.replay = replay

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that drops its keep-alive connection (the example breaks out of a stream, or exits) is not an
        # error of this stand-in server; anything else is still printed.
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)
