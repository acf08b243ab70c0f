"""Langfuse scores API sink: ``POST {host}/api/public/scores``, one score per request, upsert on id.

Wire format (conventions.md 4.3 and 7): ``traceId`` is the 32-hex OTel trace id, ``observationId`` the 16-hex
span id; NUMERIC sends the number, BOOLEAN sends 0 or 1 (a number), CATEGORICAL sends the category string;
``comment`` is the evaluator's reason; ``metadata`` carries the label when there is also a value. ``source``
is not sent: Langfuse reserves ``EVAL`` and defaults to ``API``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import httpx

from evaltrace._internal import forks
from evaltrace.evaluation.sinks._http import DEFAULT_TIMEOUT_S, post_each
from evaltrace.evaluation.sinks.base import SinkResult
from evaltrace.exceptions import ConfigError
from evaltrace.schema import Score

LANGFUSE_PUBLIC_KEY_ENV = "LANGFUSE_PUBLIC_KEY"
LANGFUSE_SECRET_KEY_ENV = "LANGFUSE_SECRET_KEY"
LANGFUSE_HOST_ENV = "LANGFUSE_HOST"
LANGFUSE_BASE_URL_ENV = "LANGFUSE_BASE_URL"  # the newer SDKs' name for the same setting
DEFAULT_LANGFUSE_HOST = "https://cloud.langfuse.com"
SCORES_PATH = "/api/public/scores"


def langfuse_score_body(score: Score, environment: str | None = None) -> dict[str, Any]:
    """Return the JSON body of ``POST /api/public/scores`` for ``score``."""
    body: dict[str, Any] = {"id": score.id, "name": score.name, "dataType": score.data_type}
    if score.data_type == "CATEGORICAL":
        body["value"] = score.string_value if score.string_value is not None else str(score.value)
    elif score.data_type == "BOOLEAN":
        body["value"] = 1 if score.value == 1.0 else 0
    else:
        body["value"] = score.value
    targets = {
        "traceId": score.trace_id,
        "observationId": score.observation_id,
        "sessionId": score.session_id,
        "datasetRunId": score.dataset_run_id,
        "comment": score.comment,
        "metadata": score.metadata,
        "configId": score.config_id,
        "environment": environment,
    }
    body.update({key: value for key, value in targets.items() if value is not None})
    return body


class LangfuseScoreSink:
    """Send scores to Langfuse's public scores API with Basic auth.

    Args:
        host: Langfuse base URL; defaults to ``LANGFUSE_HOST``, ``LANGFUSE_BASE_URL``, then
            ``https://cloud.langfuse.com``.
        public_key: Defaults to ``LANGFUSE_PUBLIC_KEY``.
        secret_key: Defaults to ``LANGFUSE_SECRET_KEY``.
        environment: Langfuse environment recorded on each score (None leaves Langfuse's default).
        timeout_s: Per-request timeout.
        client: An ``httpx.Client`` to use (tests, proxies); one is created otherwise.

    Raises:
        ConfigError: A key is missing.
    """

    name = "langfuse"

    def __init__(
        self,
        host: str | None = None,
        public_key: str | None = None,
        secret_key: str | None = None,
        *,
        environment: str | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        client: httpx.Client | None = None,
    ) -> None:
        public_key = public_key or os.environ.get(LANGFUSE_PUBLIC_KEY_ENV)
        secret_key = secret_key or os.environ.get(LANGFUSE_SECRET_KEY_ENV)
        if not public_key or not secret_key:
            raise ConfigError("langfuse", f"set {LANGFUSE_PUBLIC_KEY_ENV} and {LANGFUSE_SECRET_KEY_ENV} (or pass keys)")
        env_host = os.environ.get(LANGFUSE_HOST_ENV) or os.environ.get(LANGFUSE_BASE_URL_ENV)
        base = (host or env_host or DEFAULT_LANGFUSE_HOST).rstrip("/")
        self.url = base + SCORES_PATH
        self._environment = environment
        self._owns_client = client is None
        self._client = client or httpx.Client(timeout=timeout_s)
        self._forked = False  # in a forked child, until the first export replaces the parent's client
        if self._owns_client:
            forks.reinit_after_fork(self)
        self._auth = httpx.BasicAuth(public_key, secret_key)

    def export(self, batch: Sequence[Score]) -> SinkResult:
        """POST each score; see :func:`langfuse_score_body` for the mapping."""
        return post_each(
            self._http(),
            self.url,
            batch,
            lambda score: langfuse_score_body(score, self._environment),
            auth=self._auth,
        )

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        """Nothing is buffered here (the worker batches); always True."""
        return True

    def shutdown(self) -> None:
        """Close the HTTP client if this sink created it."""
        if self._owns_client and not self._forked:
            self._client.close()

    def _reinit_after_fork(self) -> None:
        """In a forked child: the first export makes a client of its own (the parent's connections are the parent's)."""
        self._forked = True

    def _http(self) -> httpx.Client:
        if self._forked:  # only the sink's worker thread exports: no race
            forks.keep_inherited(self._client)  # never closed here: its connections are the parent's
            self._client = httpx.Client(timeout=self._client.timeout)
            self._forked = False
        return self._client
