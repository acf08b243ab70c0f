"""A real HTTP server on 127.0.0.1 speaking the OpenAI chat-completions, completions and embeddings API, scripted."""

from __future__ import annotations

import json
import re
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Reply = str | dict[str, Any]
"""A reply: content (str), or {"status": 429/500, ...}, {"refusal": "..."}, {"content", "usage", "finish_reason"}."""


def letter_vector(text: str) -> list[float]:
    """A deterministic toy embedding: letter counts a-z (tests compute expected cosines with it too)."""
    lowered = text.lower()
    return [float(lowered.count(chr(c))) for c in range(ord("a"), ord("z") + 1)]


def toy_logprob(token: str) -> float:
    """A deterministic toy log-probability: longer words are less likely (tests recompute it)."""
    return -0.25 * len(token.strip())


def split_tokens(text: str) -> list[str]:
    """Toy tokenizer: each word with its leading whitespace (so the tokens concatenate back to the text)."""
    return re.findall(r"\s*\S+|\s+$", text)


@dataclass
class FakeOpenAI:
    """Scripted OpenAI-compatible endpoint; records every request body."""

    replies: deque[Reply] = field(default_factory=deque)
    responder: Callable[[dict[str, Any]], Reply] | None = None
    embed: Callable[[str], list[float]] = letter_vector
    chat_requests: list[dict[str, Any]] = field(default_factory=list)
    embedding_requests: list[dict[str, Any]] = field(default_factory=list)
    completion_requests: list[dict[str, Any]] = field(default_factory=list)
    logprob: Callable[[str], float] = toy_logprob
    completion_error: dict[str, Any] | None = None
    """When set ({"status": 400, "message": ...}), every completions request gets this error."""
    echo_logprobs: bool = True
    """False: answer as a server that ignores echo (logprobs of the generated token only)."""
    delay_s: float = 0.0
    in_flight: int = 0
    max_in_flight: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def script(self, *replies: Reply) -> None:
        self.replies.extend(replies)

    def prompts(self) -> list[str]:
        """The last user message of every chat request."""
        return [r["messages"][-1]["content"] for r in self.chat_requests]

    def next_reply(self, body: dict[str, Any]) -> Reply:
        if self.responder is not None:
            return self.responder(body)
        if not self.replies:
            return {"status": 500, "message": "no scripted reply left"}
        return self.replies.popleft()

    def start(self) -> None:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as real servers: clients reuse connections

            def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with fake.lock:
                    fake.in_flight += 1
                    fake.max_in_flight = max(fake.max_in_flight, fake.in_flight)
                try:
                    if fake.delay_s:
                        time.sleep(fake.delay_s)
                    status, payload = fake.handle(self.path, body)
                finally:
                    with fake.lock:
                        fake.in_flight -= 1
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True).start()

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()

    def handle(self, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        if path.endswith("/embeddings"):
            with self.lock:
                self.embedding_requests.append(body)
            inputs = body["input"] if isinstance(body["input"], list) else [body["input"]]
            data = [{"object": "embedding", "index": i, "embedding": self.embed(t)} for i, t in enumerate(inputs)]
            usage = {"prompt_tokens": len(inputs), "total_tokens": len(inputs)}
            return 200, {"object": "list", "data": data, "model": body["model"], "usage": usage}
        if path.endswith("/completions") and not path.endswith("/chat/completions"):
            with self.lock:
                self.completion_requests.append(body)
            return self.completion_response(body)
        with self.lock:
            self.chat_requests.append(body)
            reply = self.next_reply(body)
        return chat_response(body, reply)

    def completion_response(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """A legacy completions reply shaped as vLLM's: echoed prompt tokens (first without logprob) + one token."""
        if self.completion_error is not None:
            error = {"message": self.completion_error.get("message", "scripted error"), "type": "invalid_request_error"}
            return int(self.completion_error["status"]), {"error": error}
        prompt = str(body["prompt"])
        echoed = split_tokens(prompt) if body.get("echo") and self.echo_logprobs else []
        tokens = [*echoed, " the"]
        values: list[float | None] = [self.logprob(t) for t in tokens]
        if echoed:
            values[0] = None
        offsets, at = [], 0 if echoed else len(prompt)
        for token in tokens:
            offsets.append(at)
            at += len(token)
        top = [None if v is None else {t: v} for t, v in zip(tokens, values, strict=True)]
        logprobs = {"tokens": tokens, "token_logprobs": values, "text_offset": offsets, "top_logprobs": top}
        text = (prompt if body.get("echo") else "") + " the"
        choice = {"index": 0, "text": text, "logprobs": logprobs, "finish_reason": "length"}
        usage = {"prompt_tokens": len(split_tokens(prompt)), "completion_tokens": 1}
        usage["total_tokens"] = usage["prompt_tokens"] + 1
        return 200, {
            "id": "cmpl-test",
            "object": "text_completion",
            "created": 0,
            "model": body["model"],
            "choices": [choice],
            "usage": usage,
        }


def chat_response(body: dict[str, Any], reply: Reply) -> tuple[int, dict[str, Any]]:
    if isinstance(reply, dict) and "status" in reply:
        error = {"message": reply.get("message", "scripted error"), "type": "server_error", "code": None}
        return int(reply["status"]), {"error": error}
    message: dict[str, Any] = {"role": "assistant", "content": reply}
    usage = {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}
    finish_reason = "stop"
    if isinstance(reply, dict):
        message = {"role": "assistant", "content": reply.get("content"), "refusal": reply.get("refusal")}
        usage = reply.get("usage", usage)
        finish_reason = reply.get("finish_reason", finish_reason)
    choice = {"index": 0, "message": message, "finish_reason": finish_reason, "logprobs": None}
    return 200, {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": 0,
        "model": body["model"],
        "choices": [choice],
        "usage": usage,
    }
