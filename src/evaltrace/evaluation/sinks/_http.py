"""HTTP plumbing shared by the backend sinks: classify responses into delivered / retryable / rejected."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import httpx

from evaltrace.evaluation.sinks.base import SinkResult
from evaltrace.schema import Score

DEFAULT_TIMEOUT_S = 10.0
TRANSPORT_ERROR = "transport error"


def is_retryable_status(status: int) -> bool:
    """True for statuses worth retrying: 408, 425, 429 and every 5xx."""
    return status in (408, 425, 429) or status >= 500


def post_each(
    client: httpx.Client,
    url: str,
    batch: Sequence[Score],
    body: Callable[[Score], dict[str, Any]],
    *,
    auth: httpx.Auth | None = None,
) -> SinkResult:
    """POST one JSON body per score; sort the scores into delivered, failed (retryable) and rejected.

    When the backend is unreachable (a transport error) the rest of the batch is marked failed without
    trying, so one outage costs one timeout per batch rather than one per score.
    """
    failed: list[Score] = []
    rejected: list[Score] = []
    error: str | None = None
    for index, score in enumerate(batch):
        outcome = post_json(client, url, body(score), auth=auth)
        if outcome is None:
            continue
        error, retryable = outcome
        if not retryable:
            rejected.append(score)
            continue
        failed.append(score)
        if error.startswith(TRANSPORT_ERROR):
            failed.extend(batch[index + 1 :])
            break
    return SinkResult(failed=tuple(failed), rejected=tuple(rejected), error=error)


def post_json(
    client: httpx.Client,
    url: str,
    payload: dict[str, Any],
    *,
    auth: httpx.Auth | None = None,
    headers: dict[str, str] | None = None,
) -> tuple[str, bool] | None:
    """POST ``payload``; return None on success, else ``(error text, retryable)``."""
    try:
        response = client.post(url, json=payload, auth=auth or httpx.USE_CLIENT_DEFAULT, headers=headers)
    except httpx.HTTPError as exc:
        return f"{TRANSPORT_ERROR}: {type(exc).__name__}: {exc}", True
    if response.is_success:
        return None
    text = response.text[:300]
    return f"HTTP {response.status_code} from {url}: {text}", is_retryable_status(response.status_code)
