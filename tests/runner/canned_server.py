"""A real HTTP server on 127.0.0.1 answering each path with a fixed body (a provider API stand-in)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class CannedServer:
    """Serves ``bodies[path]``: a dict or list as JSON, a str as text/plain; unknown paths get 404."""

    def __init__(self, bodies: dict[str, Any]) -> None:
        self.bodies = bodies
        self.requests: list[dict[str, Any]] = []
        self.url = ""

    def handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                server.requests.append({"path": self.path, "body": json.loads(raw or b"null")})
                path = self.path.split("?")[0]
                if path not in server.bodies:
                    self._send(404, b"no such route", "text/plain")
                    return
                body = server.bodies[path]
                if isinstance(body, str):
                    self._send(200, body.encode(), "text/plain; charset=utf-8")
                else:
                    self._send(200, json.dumps(body).encode(), "application/json")

            def _send(self, status: int, payload: bytes, content_type: str) -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        return Handler


@contextmanager
def serve(bodies: dict[str, Any]) -> Iterator[CannedServer]:
    """Run a CannedServer for the block."""
    canned = CannedServer(bodies)
    server = ThreadingHTTPServer(("127.0.0.1", 0), canned.handler())
    server.daemon_threads = True
    canned.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield canned
    finally:
        server.shutdown()
        server.server_close()
