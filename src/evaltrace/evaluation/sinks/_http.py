"""HTTP plumbing shared by the backend sinks: classify responses into delivered / retryable / rejected.

Two rules keep a struggling backend from being hammered and shutdown from waiting on it: a ``Retry-After``
(delta-seconds or HTTP-date) is parsed and returned with the failure, and stops the rest of the batch from being
sent; each request's timeout is capped by what is left of the worker's shutdown deadline
(:func:`~evaltrace.evaluation.sinks.base.export_time_left`).
"""

from __future__ import annotations

import datetime as dt
import email.utils
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import httpx

from evaltrace.evaluation.sinks.base import SinkResult, export_time_left
from evaltrace.schema import Score

DEFAULT_TIMEOUT_S = 10.0
TRANSPORT_ERROR = "transport error"
DEADLINE_ERROR = "shutdown deadline reached before the request was sent"
# Below this, a request cannot complete anyway: do not start it.
_MIN_REQUEST_S = 0.01


class HttpFailure(NamedTuple):
    """A request that did not succeed."""

    error: str
    retryable: bool
    retry_after_s: float | None = None


def is_retryable_status(status: int) -> bool:
    """True for statuses worth retrying: 408, 425, 429 and every 5xx."""
    return status in (408, 425, 429) or status >= 500


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """Return the wait a ``Retry-After`` header asks for, in seconds (>= 0); None when absent or unreadable.

    Args:
        value: The header: delta-seconds (``"120"``) or an HTTP-date (``"Wed, 21 Oct 2015 07:28:00 GMT"``).
        now: The current POSIX time, for HTTP-dates (default: the clock).
    """
    if value is None or not (text := value.strip()):
        return None
    if text.isdigit():
        return float(text)
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:  # RFC 9110 dates are GMT; an obsolete form may parse without a zone
        when = when.replace(tzinfo=dt.UTC)
    current = dt.datetime.now(dt.UTC).timestamp() if now is None else now
    return max(0.0, when.timestamp() - current)


def post_each(
    client: httpx.Client,
    url: str,
    batch: Sequence[Score],
    body: Callable[[Score], dict[str, Any]],
    *,
    auth: httpx.Auth | None = None,
) -> SinkResult:
    """POST one JSON body per score; sort the scores into delivered, failed (retryable) and rejected.

    When the backend is unreachable (a transport error) or asks to be left alone (``Retry-After``), the rest
    of the batch is marked failed without trying: one outage costs one timeout per batch rather than one per
    score, and no request goes out before the time the backend gave.
    """
    failed: list[Score] = []
    rejected: list[Score] = []
    error: str | None = None
    retry_after: float | None = None
    for index, score in enumerate(batch):
        outcome = post_json(client, url, body(score), auth=auth)
        if outcome is None:
            continue
        error = outcome.error
        if not outcome.retryable:
            rejected.append(score)
            continue
        failed.append(score)
        if outcome.retry_after_s is not None or error.startswith((TRANSPORT_ERROR, DEADLINE_ERROR)):
            retry_after = outcome.retry_after_s
            failed.extend(batch[index + 1 :])
            break
    return SinkResult(failed=tuple(failed), rejected=tuple(rejected), error=error, retry_after_s=retry_after)


def post_json(
    client: httpx.Client,
    url: str,
    payload: dict[str, Any],
    *,
    auth: httpx.Auth | None = None,
    headers: dict[str, str] | None = None,
) -> HttpFailure | None:
    """POST ``payload``; return None on success, else the failure (retryable or not, and any Retry-After)."""
    timeout: httpx.Timeout | Any = httpx.USE_CLIENT_DEFAULT
    left = export_time_left()
    if left is not None:
        if left < _MIN_REQUEST_S:
            return HttpFailure(DEADLINE_ERROR, True)
        timeout = _capped(client.timeout, left)
    try:
        response = client.post(
            url, json=payload, auth=auth or httpx.USE_CLIENT_DEFAULT, headers=headers, timeout=timeout
        )
    except httpx.HTTPError as exc:
        return HttpFailure(f"{TRANSPORT_ERROR}: {type(exc).__name__}: {exc}", True)
    if response.is_success:
        return None
    text = response.text[:300]
    retryable = is_retryable_status(response.status_code)
    retry_after = parse_retry_after(response.headers.get("Retry-After")) if retryable else None
    return HttpFailure(f"HTTP {response.status_code} from {url}: {text}", retryable, retry_after)


def _capped(timeout: httpx.Timeout, limit: float) -> httpx.Timeout:
    """``timeout`` with every phase at most ``limit`` seconds (None, i.e. no timeout, becomes ``limit``)."""

    def cap(value: float | None) -> float:
        return limit if value is None else min(value, limit)

    return httpx.Timeout(
        connect=cap(timeout.connect), read=cap(timeout.read), write=cap(timeout.write), pool=cap(timeout.pool)
    )
