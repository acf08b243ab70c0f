"""HTTP plumbing shared by the backend sinks: classify responses into delivered / retryable / rejected.

Two rules keep a struggling backend from being hammered and shutdown from waiting on it: a ``Retry-After``
(delta-seconds or HTTP-date) is parsed and returned with the failure, and stops the rest of the batch from being
sent; each request's timeout is capped by what is left of the worker's shutdown deadline
(:func:`~evaltrace.evaluation.sinks.base.export_time_left`).

Bodies are encoded here (:func:`json_body`), not by httpx: httpx 0.28 refuses a lone surrogate and a NaN that
httpx 0.27 sends escaped or as a bare ``NaN``, so the same score would raise on one release and be answered
with a 500 or 422 on the other. Here it is sent the same way on every release, as the scores' other outputs
(the local store, pydantic's JSON mode) write it.
"""

from __future__ import annotations

import datetime as dt
import email.utils
import json
import logging
import math
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import httpx
from pydantic_core import to_jsonable_python

from evaltrace.evaluation.sinks.base import SinkResult, export_time_left
from evaltrace.schema import Score

DEFAULT_TIMEOUT_S = 10.0
TRANSPORT_ERROR = "transport error"
DEADLINE_ERROR = "shutdown deadline reached before the request was sent"
# Below this, a request cannot complete anyway: do not start it.
_MIN_REQUEST_S = 0.01
_JSON_HEADERS = {"Content-Type": "application/json"}
_CLEANED_LOGGED: list[bool] = []  # one warning per process: the same evaluator would log it on every score
logger = logging.getLogger("evaltrace.evaluation")


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
    content = json_body(payload)
    try:
        response = client.post(
            url,
            content=content,
            auth=auth or httpx.USE_CLIENT_DEFAULT,
            headers={**_JSON_HEADERS, **headers} if headers else _JSON_HEADERS,
            timeout=timeout,
        )
    except httpx.HTTPError as exc:
        return HttpFailure(f"{TRANSPORT_ERROR}: {type(exc).__name__}: {exc}", True)
    if response.is_success:
        return None
    text = response.text[:300]
    retryable = is_retryable_status(response.status_code)
    retry_after = parse_retry_after(response.headers.get("Retry-After")) if retryable else None
    return HttpFailure(f"HTTP {response.status_code} from {url}: {text}", retryable, retry_after)


def json_body(payload: Any) -> bytes:
    """Return ``payload`` as a UTF-8 JSON body that every backend can store, on every httpx release.

    What JSON cannot carry is written as the scores' other outputs write it: a NaN or infinity becomes ``null``
    (pydantic's JSON mode, the dead-letter file); a lone surrogate, which UTF-8 cannot encode and backends
    refuse even escaped (Phoenix answers 500), becomes U+FFFD (the local store), while a surrogate pair is
    joined into its character. Other objects (a datetime in metadata) are written as pydantic writes them.
    The first such score of the process is logged once.

    Raises:
        ValueError: A value neither json nor pydantic can write (``PydanticSerializationError``).
    """
    try:
        return _dumps(payload).encode("utf-8")
    except ValueError:  # NaN (allow_nan=False) or a surrogate (UnicodeEncodeError is a ValueError)
        pass
    body = _dumps(_writable(payload)).encode("utf-8")
    if not _CLEANED_LOGGED:
        _CLEANED_LOGGED.append(True)
        logger.warning(
            "evaltrace: a score held a value JSON cannot carry (a NaN or infinity, or text with a lone "
            "surrogate); it was sent with null or U+FFFD in its place (logged once per process)"
        )
    return body


def _dumps(payload: Any) -> str:
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":"), allow_nan=False, default=to_jsonable_python)


def _writable(value: Any) -> Any:
    """``value`` with every text made valid Unicode and every non-finite float ``None`` (the slow path)."""
    if isinstance(value, str):
        # UTF-16 with surrogatepass joins a pair into its character; "replace" turns a lone one into U+FFFD.
        return value.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if value is None or isinstance(value, (bool, int)):
        return value
    if isinstance(value, dict):
        return {
            (_writable(key) if isinstance(key, (str, float)) else key): _writable(item) for key, item in value.items()
        }
    if isinstance(value, (list, tuple)):
        return [_writable(item) for item in value]
    return _writable(to_jsonable_python(value))


def _capped(timeout: httpx.Timeout, limit: float) -> httpx.Timeout:
    """``timeout`` with every phase at most ``limit`` seconds (None, i.e. no timeout, becomes ``limit``)."""

    def cap(value: float | None) -> float:
        return limit if value is None else min(value, limit)

    return httpx.Timeout(
        connect=cap(timeout.connect), read=cap(timeout.read), write=cap(timeout.write), pool=cap(timeout.pool)
    )
