"""HTTP plumbing shared by the backend sinks: classify responses into delivered / retryable / rejected.

Two rules keep a struggling backend from being hammered and shutdown from waiting on it: a ``Retry-After``
(delta-seconds or HTTP-date) is parsed and returned with the failure, and stops the rest of the batch from being
sent; each request's timeout is capped by what is left of the worker's shutdown deadline
(:func:`~evaltrace.evaluation.sinks.base.export_time_left`).

Bodies are encoded here (:func:`json_body`), not by httpx: httpx 0.28 refuses a lone surrogate and a NaN,
which httpx 0.27 sends escaped or as a bare ``NaN``, so the same score raised in the sink on one release and, on
the other, was accepted by Phoenix's asynchronous span annotations and never stored. Here it is encoded the
same way on every release, with what JSON cannot carry replaced; a body that cannot be encoded at all is
rejected (not retried: it would fail the same way every time).
"""

from __future__ import annotations

import datetime as dt
import email.utils
import json
import logging
import math
import threading
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import httpx
from pydantic_core import to_jsonable_python

from evaltrace.evaluation.sinks.base import SinkResult, export_time_left
from evaltrace.schema import Score

DEFAULT_TIMEOUT_S = 10.0
TRANSPORT_ERROR = "transport error"
DEADLINE_ERROR = "shutdown deadline reached before the request was sent"
ENCODE_ERROR = "the body could not be encoded as JSON"
# Below this, a request cannot complete anyway: do not start it.
_MIN_REQUEST_S = 0.01
_JSON_HEADERS = {"Content-Type": "application/json"}
# One WARNING per process (the same evaluator would log it on every score), then a DEBUG line per body.
_WARNED = threading.Event()
_LOG_LOCK = threading.Lock()
_NAN_ERROR = "Out of range float values"  # json's allow_nan=False error
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
    try:
        content = json_body(payload)
    except Exception as exc:  # the same body fails every time: rejected, never retried
        return HttpFailure(f"{ENCODE_ERROR}: {type(exc).__name__}: {exc}", False)
    try:
        response = client.post(
            url,
            content=content,
            auth=auth or httpx.USE_CLIENT_DEFAULT,
            headers=_with_json_type(client, headers),
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

    What JSON cannot carry is replaced: a NaN or infinity becomes ``null`` (as pydantic's JSON mode and the
    dead-letter file write it); a lone surrogate, which UTF-8 cannot encode and Phoenix cannot store even
    escaped, becomes U+FFFD, while a surrogate pair held as two halves is joined into its character (no loss).
    Other objects (a datetime, an Enum in metadata) are written as pydantic writes them. The first replacement
    of the process is logged once.

    Raises:
        ValueError: A value neither json nor pydantic can write, a circular reference, or two keys of one
            object that become the same key once replaced (an entry would be lost).
    """
    try:
        return _dumps(payload).encode("utf-8")
    except UnicodeEncodeError:  # a surrogate, lone or held as two halves
        pass
    except ValueError as exc:
        if not str(exc).startswith(_NAN_ERROR):  # a circular reference, a value pydantic cannot write
            raise
    cleaner = _Cleaner()
    body = _dumps(cleaner.clean(payload)).encode("utf-8")
    if cleaner.replaced:
        with _LOG_LOCK:
            first = not _WARNED.is_set()
            _WARNED.set()
        logger.log(
            logging.WARNING if first else logging.DEBUG,
            "evaltrace: a body for a score backend held %d value(s) JSON cannot carry (a NaN or infinity, or text "
            "with a lone surrogate); it was encoded with null or U+FFFD in their place%s",
            cleaner.replaced,
            " (the first of this process; later ones are logged at DEBUG)" if first else "",
        )
    return body


def _with_json_type(client: httpx.Client, headers: dict[str, str] | None) -> httpx.Headers | dict[str, str] | None:
    """``headers`` with ``Content-Type: application/json``, unless they or the client's defaults name one.

    A content type set on a user's own client wins, as it did when httpx encoded the body (``json=``).
    """
    if "content-type" in client.headers:
        return headers
    if not headers:
        return _JSON_HEADERS
    merged = httpx.Headers(headers)
    merged.setdefault("Content-Type", "application/json")
    return merged


def _dumps(payload: Any) -> str:
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":"), allow_nan=False, default=to_jsonable_python)


class _Cleaner:
    """Rewrite a payload so that JSON can carry it, counting each value replaced (the slow path)."""

    def __init__(self) -> None:
        self.replaced = 0
        self._path: set[int] = set()  # the containers being cleaned: one met again is a loop

    def clean(self, value: Any) -> Any:
        if isinstance(value, str):
            # UTF-16 with surrogatepass joins a pair into its character; "replace" turns a lone one into U+FFFD.
            text = value.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
            if text.count("\ufffd") != value.count("\ufffd"):
                self.replaced += 1
            return text
        if isinstance(value, float):
            if math.isfinite(value):
                return value
            self.replaced += 1
            return None
        if value is None or isinstance(value, (bool, int)):
            return value
        if isinstance(value, (dict, list, tuple)):
            if id(value) in self._path:
                raise ValueError("Circular reference detected")
            self._path.add(id(value))
            try:
                if isinstance(value, dict):
                    return self._clean_dict(value)
                return [self.clean(item) for item in value]
            finally:
                self._path.discard(id(value))
        return self.clean(to_jsonable_python(value))

    def _clean_dict(self, value: dict[Any, Any]) -> dict[Any, Any]:
        cleaned: dict[Any, Any] = {}
        # The keys as JSON writes them (None and "null" are one key there), and whether cleaning changed each. Two
        # keys meeting is an error only when cleaning made them meet: keys that met already are written as they
        # are, as the fast path writes them.
        written: dict[str, bool] = {}
        for key, item in value.items():
            new_key = self.clean(key) if isinstance(key, (str, float)) else key
            changed = type(new_key) is not type(key) or new_key != key
            as_json = new_key if isinstance(new_key, str) else json.dumps(new_key, default=str)
            if as_json in written and (changed or written[as_json]):
                raise ValueError(f"two keys become {as_json!r} once made valid JSON: one entry would be lost")
            written[as_json] = changed or written.get(as_json, False)
            cleaned[new_key] = self.clean(item)
        return cleaned


def _capped(timeout: httpx.Timeout, limit: float) -> httpx.Timeout:
    """``timeout`` with every phase at most ``limit`` seconds (None, i.e. no timeout, becomes ``limit``)."""

    def cap(value: float | None) -> float:
        return limit if value is None else min(value, limit)

    return httpx.Timeout(
        connect=cap(timeout.connect), read=cap(timeout.read), write=cap(timeout.write), pool=cap(timeout.pool)
    )
