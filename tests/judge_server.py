"""A real OpenAI chat-completions endpoint on 127.0.0.1 for judge evaluators: scripted verdicts, recorded requests."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Verdict = Callable[[dict[str, Any]], dict[str, Any]]
"""The judge's verdict (``{"score": ..., "reason": ...}``) for a request body."""


@dataclass
class JudgeServer:
    """What the endpoint answers and what it was asked.

    Attributes:
        verdict: The JSON content of every reply, from the request body.
        prompt_tokens: Usage reported with every reply.
        completion_tokens: Usage reported with every reply.
        url: The ``base_url`` to give the client (ends in ``/v1``).
        requests: Per request: ``path``, ``body`` (parsed JSON) and ``authorization`` (the header).
        connections: Connections the client holds open now (opened, not yet closed by it or the server).
    """

    verdict: Verdict
    prompt_tokens: int = 50
    completion_tokens: int = 10
    url: str = ""
    requests: list[dict[str, Any]] = field(default_factory=list)
    connections: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def count(self) -> int:
        """Requests received so far."""
        with self.lock:
            return len(self.requests)

    def completion(self, body: dict[str, Any]) -> dict[str, Any]:
        """A legacy completion echoing the prompt with logprobs (``echo``: one token per word, each -1.0)."""
        prompt = str(body["prompt"])
        tokens, offsets, at = [], [], 0
        for word in prompt.split(" "):
            tokens.append(word if at == 0 else f" {word}")
            offsets.append(at)
            at += len(tokens[-1])
        values: list[float | None] = [None] + [-1.0] * (len(tokens) - 1)
        return {
            "id": f"cmpl-{self.count()}",
            "object": "text_completion",
            "created": 0,
            "model": body["model"],
            "choices": [
                {
                    "index": 0,
                    "text": prompt,
                    "finish_reason": "length",
                    "logprobs": {"tokens": tokens, "token_logprobs": values, "text_offset": offsets},
                }
            ],
            "usage": {"prompt_tokens": len(tokens), "completion_tokens": 1, "total_tokens": len(tokens) + 1},
        }

    def reply(self, body: dict[str, Any]) -> dict[str, Any]:
        """A chat completion carrying the verdict as its content."""
        return {
            "id": f"chatcmpl-{self.count()}",
            "object": "chat.completion",
            "created": 0,
            "model": body["model"],
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": json.dumps(self.verdict(body))},
                    "finish_reason": "stop",
                }
            ],
            "usage": {
                "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens,
                "total_tokens": self.prompt_tokens + self.completion_tokens,
            },
        }


@contextmanager
def serve_judge(
    verdict: Verdict, *, prompt_tokens: int = 50, completion_tokens: int = 10, keep_alive: bool = False
) -> Iterator[JudgeServer]:
    """Run a :class:`JudgeServer` on a free port of 127.0.0.1 for the ``with`` block.

    ``keep_alive`` answers in HTTP/1.1 and keeps each connection open until the client closes it (what real
    endpoints do); by default every reply closes its connection (HTTP/1.0).
    """
    judge = JudgeServer(verdict, prompt_tokens, completion_tokens)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1" if keep_alive else "HTTP/1.0"

        def log_message(self, *args: Any) -> None:  # keep test output quiet
            pass

        def setup(self) -> None:
            super().setup()
            with judge.lock:
                judge.connections += 1

        def finish(self) -> None:
            try:
                super().finish()
            finally:
                with judge.lock:
                    judge.connections -= 1

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            legacy = self.path.endswith("/v1/completions")  # prompt logprobs (GPTScore, perplexity)
            payload = json.dumps(judge.completion(body) if legacy else judge.reply(body)).encode()
            with judge.lock:
                judge.requests.append({"path": self.path, "body": body, "authorization": self.headers["Authorization"]})
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    judge.url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield judge
    finally:
        server.shutdown()
        server.server_close()
