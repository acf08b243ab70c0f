"""Two local scripted servers that stand in for remote services, so the example runs offline.

* The support agent deployed behind an HTTP endpoint that answers in the shape of Anthropic's Messages API with
  extended thinking (a ``thinking`` block before the ``text`` block, token usage). eval.yaml reads it with
  ``response_mapping: {preset: anthropic}``.
* An OpenAI-compatible judge (``POST /v1/chat/completions``) for the LLM-as-judge evaluator. It scores the answer
  from the prompt it is sent: answers that state a concrete fact (a number, an order state, a saved file) get the
  top score, hedges and apologies a low one.

Both bind 127.0.0.1 on a free port and run on daemon threads; see ``run.py``.
"""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from agent import reply

_ANSWER = re.compile(r"Answer:\n(?P<answer>.*?)\n\nGive a score", re.DOTALL)


def _words(text: str) -> int:
    return len(text.split())


def messages_reply(request: dict[str, Any]) -> dict[str, Any]:
    """An Anthropic Messages API response (extended thinking on) to ``request``."""
    question = str(request["messages"][-1]["content"])
    result = reply(question, "careful", None)
    tool_blocks = [
        {"type": "tool_use", "id": f"toolu_{index:02d}", "name": name, "input": arguments}
        for index, (name, arguments) in enumerate(result.tools)
    ]
    return {
        "id": "msg_01" + format(abs(hash(question)) % 10**20, "020d"),
        "type": "message",
        "role": "assistant",
        "model": request.get("model", "claude-sonnet-4-5"),
        "content": [
            {"type": "thinking", "thinking": result.thinking, "signature": "EqQBCgIYAhIM"},
            *tool_blocks,
            {"type": "text", "text": result.text},
        ],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {
            "input_tokens": 12 + _words(question),
            "output_tokens": _words(result.thinking) + _words(result.text),
        },
    }


def judge_reply(request: dict[str, Any]) -> dict[str, Any]:
    """An OpenAI chat completion whose content is the judge's JSON verdict."""
    prompt = str(request["messages"][-1]["content"])
    match = _ANSWER.search(prompt)
    answer = match.group("answer") if match else ""
    if re.search(r"\b(about|roughly|probably|I think)\b", answer, re.IGNORECASE):
        score, reason = 2, "a guess presented as an answer"
    else:
        score, reason = 5, "states only what it checked, or says plainly that it cannot help"
    content = json.dumps({"score": score, "reason": reason})
    return {
        "id": "chatcmpl-judge",
        "object": "chat.completion",
        "created": 1_764_000_000,
        "model": request.get("model", "judge"),
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": _words(prompt), "completion_tokens": 12, "total_tokens": _words(prompt) + 12},
    }


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}")
        if self.path.rstrip("/").endswith("/chat/completions"):
            payload = judge_reply(body)
        elif self.path.rstrip("/").endswith("/messages"):
            payload = messages_reply(body)
        else:
            self.send_error(404)
            return
        data = json.dumps(payload).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the run's own output is what matters."""


def start() -> tuple[ThreadingHTTPServer, str]:
    """Serve both APIs on a free 127.0.0.1 port; returns the server and its base URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    threading.Thread(target=server.serve_forever, name="example-servers", daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"
