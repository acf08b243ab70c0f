"""The ``openai.AsyncOpenAI`` clients of the judge and the embedder, one per event loop (openai is imported lazily).

An async HTTP client's connections belong to the event loop that opened them. The evaluation processor runs every
async evaluator on one loop, but ``run_evaluator`` and notebooks start a fresh loop per call; a client built by
evaltrace is therefore rebuilt for each new loop, from settings resolved once at construction (no environment
read while evaluating). A client supplied by the user is always used as is.
"""

from __future__ import annotations

import asyncio
import os
import threading
import weakref
from typing import Any

from evaltrace.evaluators._base import require_extra

MISSING_API_KEY = "missing-api-key"
"""Sent when no key was given or set: a local server may need none; OpenAI's rejects it (the call is not made)."""
OPENAI_URL = "https://api.openai.com/"


class LoopClients:
    """Hands out an ``AsyncOpenAI`` for the running event loop, semaphores alike, built from fixed settings."""

    def __init__(
        self,
        *,
        client: Any,
        base_url: str | None,
        api_key: str | None,
        http_client: Any,
        timeout: float,
        max_retries: int,
        max_concurrency: int,
    ) -> None:
        # Resolved here, once: a missing key becomes a placeholder (the openai client refuses an empty one) so
        # evaluators can be created without a key; calls then fail as results (HTTP 401) instead of breaking the
        # application at import time.
        key = api_key or os.environ.get("OPENAI_API_KEY")
        self.key_missing = client is None and not key
        """No key was given or set: failures are reported as a missing key, not as the endpoint's bare error."""
        self._settings: dict[str, Any] = {
            "api_key": key or MISSING_API_KEY,
            "base_url": base_url if base_url is not None else os.environ.get("OPENAI_BASE_URL"),
            "http_client": http_client,
            "timeout": timeout,
            "max_retries": max_retries,
        }
        self._fixed = client is not None or http_client is not None
        self.primary: Any = client if client is not None else self._build()
        self._primary_loop: weakref.ref[asyncio.AbstractEventLoop] | None = None
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any] = weakref.WeakKeyDictionary()
        self._semaphores: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = (
            weakref.WeakKeyDictionary()
        )
        self._max_concurrency = max_concurrency
        self._lock = threading.Lock()

    @property
    def url(self) -> str:
        """The endpoint the calls go to (``https://api.openai.com/v1/`` unless a base URL was given or set)."""
        base_url = getattr(self.primary, "base_url", None)
        return str(base_url) if base_url is not None else "(the client's endpoint)"

    @property
    def key_required(self) -> bool:
        """Whether a call is bound to be refused for want of a key: none is set and the endpoint is OpenAI's."""
        return self.key_missing and self.url.startswith(OPENAI_URL)

    def _build(self) -> Any:
        openai = require_extra("openai", "openai", extra="openai")
        return openai.AsyncOpenAI(**self._settings)

    def client(self) -> Any:
        """Return the client for the running loop (the primary one for the first loop that asks)."""
        if self._fixed:
            return self.primary
        loop = asyncio.get_running_loop()
        with self._lock:
            own = self._clients.get(loop)
            if own is not None:
                return own
            if self._primary_loop is None or self._primary_loop() is None:
                self._primary_loop = weakref.ref(loop)
            if self._primary_loop() is loop:
                return self.primary
            own = self._clients[loop] = self._build()
            return own

    async def aclose(self) -> None:
        """Close the client(s) the running loop was handed; later loops get new ones (none is built to close it).

        A closed primary is replaced by a fresh one: the judge stays usable by the next run (an offline run closes
        its judges at its end, and its retry pass or the next run may use the same judge on another loop).
        """
        if self._fixed:
            await self.primary.close()
            return
        loop = asyncio.get_running_loop()
        with self._lock:
            closing = [client for client in (self._clients.pop(loop, None),) if client is not None]
            if self._primary_loop is not None and self._primary_loop() is loop:
                closing.append(self.primary)
                self.primary = self._build()
                self._primary_loop = None
        for client in closing:
            await client.close()

    def semaphore(self) -> asyncio.Semaphore:
        """Return the running loop's concurrency limiter (asyncio primitives must not cross loops)."""
        loop = asyncio.get_running_loop()
        with self._lock:
            semaphore = self._semaphores.get(loop)
            if semaphore is None:
                semaphore = self._semaphores[loop] = asyncio.Semaphore(self._max_concurrency)
            return semaphore
