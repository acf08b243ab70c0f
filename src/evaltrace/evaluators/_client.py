"""Build the ``openai.AsyncOpenAI`` client shared by the judge and the embedder (openai is imported lazily)."""

from __future__ import annotations

import os
from typing import Any


def build_async_client(
    *, base_url: str | None, api_key: str | None, http_client: Any, timeout: float, max_retries: int
) -> Any:
    """Return an ``openai.AsyncOpenAI``; the API key defaults to ``OPENAI_API_KEY``.

    A missing key is passed as ``""`` rather than failing here, so evaluators can be created without a key; the
    judge calls then fail as ``failed`` results (HTTP 401) instead of breaking the application at import time.
    """
    import openai

    return openai.AsyncOpenAI(
        api_key=api_key if api_key is not None else os.environ.get("OPENAI_API_KEY", ""),
        base_url=base_url,
        http_client=http_client,
        timeout=timeout,
        max_retries=max_retries,
    )
