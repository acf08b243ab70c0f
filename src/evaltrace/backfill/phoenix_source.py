"""Traces read from a Phoenix server's REST API, for re-judging.

Phoenix serves a project's spans in OTLP form at ``GET /v1/projects/{project}/spans/otlpv1`` (snake_case OTLP
fields, hex ids, newest first, ``next_cursor`` pagination, filters ``start_time``, ``trace_id`` and
``attribute=key:value``). Each page is handed, as an OTLP/JSON request, to the decoder ``evaltrace worker`` uses,
so the spans are rebuilt exactly as received OTLP spans are. Phoenix does not return resources: the spans carry
no ``service.name``.

A filter on a session (or ``--where`` attributes) selects traces by the spans that carry the attribute, then reads
those traces whole. Filter values are sent as Phoenix reads them (``key:value``, the value JSON-parsed): as a JSON
string (``session.id:"s-1"``), so a value that looks like a number or a boolean still matches the string, and, for
such a value, also as the number or boolean (the two answers joined), as the local store matches either.

Memory stays bounded by a window of traces, not the project: the selection is read as trace ids (and start times)
page by page, keeping no span; the spans are fetched when judged, :data:`_TRACE_IDS_PER_REQUEST` traces at a time,
and a window is dropped when the next is fetched.
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
import os
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import httpx

from evaltrace.backfill.sources import session_of
from evaltrace.exceptions import ConfigError, EvaltraceError

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan

__all__ = ["PhoenixSource", "PhoenixSourceError"]

PAGE_SIZE = 1000
"""Spans per request (Phoenix's most)."""
_TRACE_IDS_PER_REQUEST = 50
_TIMEOUT_S = 30.0


class PhoenixSourceError(EvaltraceError):
    """Phoenix could not be read: unreachable, refusing the key, or answering something else than spans."""


def _without_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value]
    return value


def _forms(key: str, value: str) -> list[str]:
    """The ``attribute`` filters matching ``key`` = ``value``: the string, and the number or boolean it spells."""
    forms = [f"{key}:{json.dumps(value)}"]
    try:
        parsed = json.loads(value)
    except ValueError:
        return forms
    if isinstance(parsed, bool | int | float) and json.dumps(parsed) == value.strip():
        forms.append(f"{key}:{value.strip()}")
    return forms


class PhoenixSource:
    """The traces of one Phoenix project.

    Args:
        url: Phoenix's base URL (``http://127.0.0.1:6006``).
        project: The project's name (or id).
        since_ns: Only traces with spans that started at or after this Unix time (nanoseconds).
        trace_ids: Only these traces (full 32-hex ids).
        session_id: Only the traces of this ``session.id``.
        attributes: Only traces with a span whose attribute ``key`` is ``value`` (Phoenix's ``attribute`` filter).
        api_key: Sent as ``Authorization: Bearer``; defaults to ``PHOENIX_API_KEY``.
        key: What the selection was written as, for the checkpoint's key.

    Raises:
        ConfigError: An empty URL or project.
    """

    in_store = False

    def __init__(
        self,
        url: str,
        project: str,
        *,
        since_ns: int | None = None,
        trace_ids: Sequence[str] = (),
        session_id: str | None = None,
        attributes: Sequence[tuple[str, str]] = (),
        api_key: str | None = None,
        key: str | None = None,
    ) -> None:
        if not url.startswith(("http://", "https://")):
            raise ConfigError("--phoenix", f"expected Phoenix's http(s) URL, got {url!r}")
        if not project or any(c in project for c in "/?#"):
            raise ConfigError("--project", f"expected a Phoenix project name (no '/', '?' or '#'), got {project!r}")
        self.url = url.rstrip("/")
        self.project = project
        self.since_ns = since_ns
        self.trace_ids_given = [t.lower() for t in trace_ids]
        self.session_id = session_id
        self.attributes = list(attributes)
        self.key = key
        api_key = api_key or os.environ.get("PHOENIX_API_KEY")
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.Client(headers=headers, timeout=_TIMEOUT_S)
        self._ids: dict[str, int] | None = None
        self._order: list[str] = []
        self._position: dict[str, int] | None = None
        self._cache: dict[str, list[ReadableSpan]] = {}  # the traces of the current window (and a session's)

    def _pages(self, params: dict[str, Any]) -> Iterator[list[dict[str, Any]]]:
        """Every page of spans the query selects."""
        path = f"{self.url}/v1/projects/{quote(self.project, safe='')}/spans/otlpv1"
        cursor: str | None = None
        while True:
            query = {**params, "limit": PAGE_SIZE, **({"cursor": cursor} if cursor else {})}
            try:
                response = self._client.get(path, params=query)
            except httpx.HTTPError as exc:
                raise PhoenixSourceError(f"cannot read spans from Phoenix at {self.url}: {exc}") from None
            if response.status_code == 404:
                raise PhoenixSourceError(f"Phoenix at {self.url} has no project {self.project!r}")
            if response.status_code in (401, 403):
                raise PhoenixSourceError(f"Phoenix at {self.url} refused the request (HTTP {response.status_code}); "
                                         "set PHOENIX_API_KEY")  # fmt: skip
            if response.status_code != 200:
                raise PhoenixSourceError(f"Phoenix at {self.url} answered HTTP {response.status_code}: "
                                         f"{response.text[:200]}")  # fmt: skip
            try:
                body = response.json()
                data = list(body["data"])
            except (ValueError, KeyError, TypeError):
                raise PhoenixSourceError(f"Phoenix at {self.url} answered something else than spans") from None
            yield data
            cursor = body.get("next_cursor")
            if not cursor:
                return

    def _decode(self, spans: list[dict[str, Any]]) -> list[ReadableSpan]:
        from evaltrace.worker.decode import PayloadError, parse_request, spans_from_request

        request = {"resourceSpans": [{"resource": {}, "scopeSpans": [{"scope": {}, "spans": _without_nulls(spans)}]}]}
        try:
            return spans_from_request(parse_request(json.dumps(request).encode(), "application/json"))
        except PayloadError as exc:
            raise PhoenixSourceError(f"Phoenix at {self.url} sent spans that are not OTLP: {exc.reason}") from None

    def _base_params(self) -> dict[str, Any]:
        if self.since_ns is None:
            return {}
        return {"start_time": dt.datetime.fromtimestamp(self.since_ns / 1e9, dt.UTC).isoformat()}

    def _read(self, params: dict[str, Any], into: dict[str, list[ReadableSpan]]) -> None:
        for page in self._pages(params):
            for span in self._decode(page):
                assert span.context is not None  # the decoder refuses spans without ids
                into.setdefault(f"{span.context.trace_id:032x}", []).append(span)

    def _read_ids(self, params: dict[str, Any], into: dict[str, int]) -> None:
        """The trace ids of the spans the query selects, with each trace's earliest start; a page at a time."""
        for page in self._pages(params):
            for span in self._decode(page):
                assert span.context is not None
                trace_id = f"{span.context.trace_id:032x}"
                start = span.start_time or 0
                into[trace_id] = min(into.get(trace_id, start), start)

    def _whole(self, trace_ids: Sequence[str]) -> dict[str, list[ReadableSpan]]:
        """Every span of these traces, whatever their start time."""
        traces: dict[str, list[ReadableSpan]] = {}
        for start in range(0, len(trace_ids), _TRACE_IDS_PER_REQUEST):
            self._read({"trace_id": list(trace_ids[start : start + _TRACE_IDS_PER_REQUEST])}, traces)
        return traces

    def _matching(self, filters: Sequence[tuple[str, str]], params: dict[str, Any], into: dict[str, int]) -> None:
        """Traces with a span matching every ``(key, value)`` filter, a value matched in each form it may take."""
        for forms in itertools.product(*(_forms(key, value) for key, value in filters)):
            self._read_ids({**params, "attribute": list(forms)}, into)

    def _session_traces(self, session_id: str, params: dict[str, Any]) -> list[str]:
        found: dict[str, int] = {}
        self._read_ids({**params, "attribute": [f"session.id:{json.dumps(session_id)}"]}, found)
        return list(found)

    def _selected(self) -> dict[str, int]:
        """The selected trace ids, each with its earliest start seen (read once)."""
        if self._ids is None:
            params = self._base_params()
            ids: dict[str, int] = {}
            if self.trace_ids_given:
                whole = self._whole(self.trace_ids_given)  # bounded by the ids given
                self._cache.update(whole)
                ids = {t: min(s.start_time or 0 for s in spans) for t, spans in whole.items()}
            else:
                filters = list(self.attributes)
                if self.session_id is not None:
                    filters.append(("session.id", self.session_id))
                if filters:
                    self._matching(filters, params, ids)
                else:
                    self._read_ids(params, ids)
            self._ids = ids
            self._order = sorted(ids, key=lambda t: -ids[t])
        return self._ids

    def trace_ids(self) -> list[str]:
        """The selected trace ids, newest first."""
        self._selected()
        return list(self._order)

    def spans(self, trace_id: str) -> list[ReadableSpan]:
        """The trace's spans, by start time (fetched whole with the next traces of the selection, a window)."""
        if trace_id not in self._cache:
            self._fetch_window(trace_id)
        return sorted(self._cache.get(trace_id, []), key=lambda s: s.start_time or 0)

    def _fetch_window(self, trace_id: str) -> None:
        """Replace the cached traces with ``trace_id`` and the traces after it in the selection."""
        self._selected()
        if self._position is None:
            self._position = {t: i for i, t in enumerate(self._order)}
        at = self._position.get(trace_id)
        window = [trace_id] if at is None else self._order[at : at + _TRACE_IDS_PER_REQUEST]
        self._cache = self._whole(window)

    def session_trace_ids(self, session_id: str) -> list[str]:
        """Every trace of the session on the server (a session is judged whole)."""
        ids = self._session_traces(session_id, {})
        missing = [t for t in ids if t not in self._cache]
        if missing:  # kept with the window until the next one: the session's turns are read next
            self._cache.update(self._whole(missing))
        return [t for t in ids if session_of(self._cache.get(t, [])) == session_id]

    def describe(self) -> str:
        """The server, the project and the selection."""
        selection = self.key if self.key is not None else repr((self.since_ns, self.session_id, self.attributes))
        return f"phoenix:{self.url}|{self.project}|{selection}|{','.join(self.trace_ids_given)}"

    def close(self) -> None:
        """Close the HTTP client."""
        self._client.close()
