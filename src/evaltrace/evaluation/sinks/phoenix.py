"""Phoenix annotations sink: ``POST {base}/v1/span_annotations?sync=false`` with a batch of annotations.

Scores on a session (session-scope evaluation) go to ``POST {base}/v1/session_annotations?sync=true`` instead,
with ``session_id`` in place of ``span_id`` (Phoenix's session annotations, keyed by the ``session.id`` value).
Synchronously, because Phoenix drops an asynchronous annotation of a session it has not ingested yet without a
word, while a synchronous one answers 404: that answer is retried (the session's spans may still be on their
way, e.g. right after ``force_flush``), then dead-lettered like any failure.

Body (conventions.md 3.3): ``{"data": [{"span_id", "name", "annotator_kind", "result": {"label", "score",
"explanation"}, "metadata", "identifier"}]}``. ``identifier`` makes each call an upsert per (name, span,
identifier), so retries and replays do not duplicate annotations. ``annotator_kind`` is ``LLM`` for judge
evaluators and ``CODE`` otherwise (taken from the score's metadata).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

import httpx

from evaltrace._internal import forks
from evaltrace.evaluation.sinks._http import DEFAULT_TIMEOUT_S, ENCODE_ERROR, json_body, post_json
from evaltrace.evaluation.sinks.base import SinkResult
from evaltrace.schema import Score

PHOENIX_API_KEY_ENV = "PHOENIX_API_KEY"
PHOENIX_BASE_URL_ENV = "PHOENIX_BASE_URL"
PHOENIX_COLLECTOR_ENDPOINT_ENV = "PHOENIX_COLLECTOR_ENDPOINT"
DEFAULT_PHOENIX_BASE_URL = "http://localhost:6006"
ANNOTATIONS_PATH = "/v1/span_annotations"
SESSION_ANNOTATIONS_PATH = "/v1/session_annotations"
ANNOTATOR_KIND_KEY = "annotator_kind"
LABEL_KEY = "label"
SPAN_ID_KEY = "span_id"
_DEFAULT_IDENTIFIER = "evaltrace"
_NOT_FOUND = "HTTP 404 "  # how post_json reports a 404


def span_id_of(score: Score) -> str | None:
    """Return the span a score belongs to: its observation, or the evaluated span recorded in metadata."""
    if score.observation_id is not None:
        return score.observation_id
    span_id = (score.metadata or {}).get(SPAN_ID_KEY)
    return span_id if isinstance(span_id, str) and span_id else None


def phoenix_annotation(score: Score) -> dict[str, Any]:
    """Return one element of the span-annotations ``data`` array for ``score`` (session annotations: see below)."""
    metadata = dict(score.metadata or {})
    kind = str(metadata.get(ANNOTATOR_KIND_KEY) or "CODE").upper()
    label = metadata.get(LABEL_KEY)
    if label is None and score.data_type != "NUMERIC":
        label = score.string_value
    result: dict[str, Any] = {"label": label, "score": score.value, "explanation": score.comment}
    version = metadata.get("evaluator_version")
    identifier = f"{_DEFAULT_IDENTIFIER}-{version}" if version else _DEFAULT_IDENTIFIER
    return {
        "span_id": span_id_of(score),
        "name": score.name,
        "annotator_kind": kind if kind in ("LLM", "CODE", "HUMAN") else "CODE",
        "result": {key: value for key, value in result.items() if value is not None},
        "metadata": metadata,
        "identifier": identifier,
    }


def _encodes(annotate: Callable[[Score], dict[str, Any]], score: Score) -> bool:
    """Whether ``score``'s annotation can be encoded as a request body (checked only after a batch's failed)."""
    try:
        json_body({"data": [annotate(score)]})
    except Exception:
        return False
    return True


def phoenix_session_annotation(score: Score) -> dict[str, Any]:
    """Return one element of the session-annotations ``data`` array for a score on a session."""
    annotation = phoenix_annotation(score)
    del annotation["span_id"]
    return {"session_id": score.session_id, **annotation}


class PhoenixScoreSink:
    """Send scores on spans to Phoenix as span annotations.

    Args:
        base_url: Phoenix URL; defaults to ``PHOENIX_BASE_URL``, then ``PHOENIX_COLLECTOR_ENDPOINT``, then
            ``http://localhost:6006``.
        api_key: Sent as ``Authorization: Bearer``; defaults to ``PHOENIX_API_KEY`` (none when unset).
        timeout_s: Request timeout.
        client: An ``httpx.Client`` to use; one is created otherwise.
    """

    name = "phoenix"

    def __init__(
        self,
        base_url: str | None = None,
        api_key: str | None = None,
        *,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        client: httpx.Client | None = None,
    ) -> None:
        base = (
            base_url
            or os.environ.get(PHOENIX_BASE_URL_ENV)
            or os.environ.get(PHOENIX_COLLECTOR_ENDPOINT_ENV)
            or DEFAULT_PHOENIX_BASE_URL
        ).rstrip("/")
        self.url = base + ANNOTATIONS_PATH + "?sync=false"
        self.session_url = base + SESSION_ANNOTATIONS_PATH + "?sync=true"
        api_key = api_key or os.environ.get(PHOENIX_API_KEY_ENV)
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._owns_client = client is None
        self._client = client or httpx.Client(timeout=timeout_s)
        self._forked = False  # in a forked child, until the first export replaces the parent's client
        if self._owns_client:
            forks.reinit_after_fork(self)
        self._headers = headers

    def export(self, batch: Sequence[Score]) -> SinkResult:
        """POST the batch as annotations: span ones in one request, session ones in another.

        Scores on neither a span nor a session are rejected.
        """
        on_sessions = [score for score in batch if score.session_id is not None]
        if not on_sessions:
            return self._export_spans(batch)
        rest = [score for score in batch if score.session_id is None]
        spans = self._export_spans(rest) if rest else SinkResult()
        sessions = self._export_sessions(on_sessions)
        return SinkResult(
            failed=(*spans.failed, *sessions.failed),
            rejected=(*spans.rejected, *sessions.rejected),
            error=sessions.error or spans.error,
            retry_after_s=max(
                (r for r in (spans.retry_after_s, sessions.retry_after_s) if r is not None), default=None
            ),
        )

    def _export_sessions(self, scores: Sequence[Score]) -> SinkResult:
        # A 404 is retried: the session is not ingested yet (see the module docstring).
        return self._post(scores, self.session_url, phoenix_session_annotation, retry_not_found=True)

    def _export_spans(self, batch: Sequence[Score]) -> SinkResult:
        on_spans = [score for score in batch if span_id_of(score) is not None]
        not_on_spans = tuple(score for score in batch if span_id_of(score) is None)
        error = "Phoenix span annotations need a span id" if not_on_spans else None
        if not on_spans:
            return SinkResult(rejected=not_on_spans, error=error)
        sent = self._post(on_spans, self.url, phoenix_annotation, retry_not_found=False)
        return SinkResult(
            failed=sent.failed,
            rejected=(*sent.rejected, *not_on_spans),
            error=sent.error or error,
            retry_after_s=sent.retry_after_s,
        )

    def _post(
        self,
        scores: Sequence[Score],
        url: str,
        annotate: Callable[[Score], dict[str, Any]],
        *,
        retry_not_found: bool,
    ) -> SinkResult:
        """POST ``scores`` as one body of annotations; a score that cannot be encoded is rejected alone."""
        payload = {"data": [annotate(score) for score in scores]}
        outcome = post_json(self._http(), url, payload, headers=self._headers)
        if outcome is None:
            return SinkResult()
        if outcome.error.startswith(ENCODE_ERROR) and len(scores) > 1:
            # One body for the batch: find the scores that cannot be encoded, reject them alone, send the rest.
            bad = [score for score in scores if not _encodes(annotate, score)]
            if bad and len(bad) < len(scores):
                kept = [score for score in scores if all(score is not b for b in bad)]
                rest = self._post(kept, url, annotate, retry_not_found=retry_not_found)
                return SinkResult(
                    failed=rest.failed,
                    rejected=(*rest.rejected, *bad),
                    # The encode error names why the bad scores were rejected; the rest's, what befell the others.
                    error=f"{rest.error}; {outcome.error}" if rest.error else outcome.error,
                    retry_after_s=rest.retry_after_s,
                )
        if outcome.retryable or (retry_not_found and outcome.error.startswith(_NOT_FOUND)):
            return SinkResult(failed=tuple(scores), error=outcome.error, retry_after_s=outcome.retry_after_s)
        return SinkResult(rejected=tuple(scores), error=outcome.error)

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
