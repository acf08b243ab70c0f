"""The backend sinks send what JSON cannot carry the same way on every httpx release, and deliver the score.

A real HTTP server on 127.0.0.1 receives the real sinks' requests. Before, the body was httpx's to encode: httpx
0.28 raised on a lone surrogate (and on a NaN in metadata) inside the sink's export, while httpx 0.27 sent the
surrogate escaped, which Phoenix answers with a 500 (``tests/integration/test_phoenix.py``), and the NaN as a bare
``NaN``, which is not JSON. Either way the score was never delivered; now it is, with U+FFFD and null in their
places. This file also runs in the oldest-versions CI step (httpx 0.27).
"""

from __future__ import annotations

import datetime as dt
import json
import logging

import pytest

from evaltrace.evaluation import LangfuseScoreSink, PhoenixScoreSink
from evaltrace.evaluation.sinks import _http
from evaltrace.evaluation.sinks._http import json_body
from evaltrace.schema import Score

from .conftest import Backend
from .test_sinks import numeric

LONE = "half a pair: \ud800 and \udc80"
PAIR = "a pair written as two halves: \ud83d\ude00"
WHEN = dt.datetime(2026, 11, 30, 12, 0, tzinfo=dt.UTC)


def _hard(name: str) -> Score:
    metadata = {"label": "ok", "nan": float("nan"), "inf": float("-inf"), "when": WHEN, "nested": [{"k": LONE}]}
    return numeric(name).model_copy(update={"comment": LONE + " / " + PAIR, "metadata": metadata})


@pytest.fixture
def fresh_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_http, "_CLEANED_LOGGED", [])


def _warnings(caplog: pytest.LogCaptureFixture) -> int:
    return sum("JSON cannot carry" in r.getMessage() and r.levelno == logging.WARNING for r in caplog.records)


def test_phoenix_delivers_a_score_json_cannot_carry_with_replacements_and_logs_it_once(
    backend: Backend, caplog: pytest.LogCaptureFixture, fresh_warning: None
) -> None:
    sink = PhoenixScoreSink(backend.url)
    with caplog.at_level(logging.WARNING, logger="evaltrace"):
        assert sink.export([numeric("plain"), _hard("hard")]).ok
        assert sink.export([_hard("again")]).ok
    sink.shutdown()
    annotations = [item for body in backend.bodies() for item in body["data"]]
    assert [a["name"] for a in annotations] == ["plain", "hard", "again"]
    plain, hard = annotations[0], annotations[1]
    assert plain["result"]["explanation"] == "Answers the question; cites source."
    assert hard["result"]["explanation"] == "half a pair: \ufffd and \ufffd / a pair written as two halves: \U0001f600"
    assert hard["metadata"]["nan"] is None and hard["metadata"]["inf"] is None  # as pydantic's JSON mode writes them
    assert hard["metadata"]["when"] == "2026-11-30T12:00:00Z"
    assert hard["metadata"]["nested"] == [{"k": "half a pair: \ufffd and \ufffd"}]
    assert _warnings(caplog) == 1  # once per process, not per score
    assert all(r.headers["content-type"] == "application/json" for r in backend.requests)


def test_langfuse_delivers_it_too_with_its_basic_auth(backend: Backend, fresh_warning: None) -> None:
    sink = LangfuseScoreSink(backend.url, "pk-lf-1", "sk-lf-2", timeout_s=2.0)
    assert sink.export([_hard("hard")]).ok
    sink.shutdown()
    (request,) = backend.requests
    assert request.headers["authorization"].startswith("Basic ")
    assert request.body["comment"] == "half a pair: \ufffd and \ufffd / a pair written as two halves: \U0001f600"
    assert request.body["metadata"]["nan"] is None


def test_a_body_json_can_carry_is_encoded_as_is_without_a_warning(
    caplog: pytest.LogCaptureFixture, fresh_warning: None
) -> None:
    payload = {"data": [{"name": "é ✓ \U0001f600", "score": 0.5, "n": 2**70, "ok": True, "none": None}]}
    with caplog.at_level(logging.WARNING, logger="evaltrace"):
        body = json_body(payload)
    assert body == json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    assert json.loads(body) == payload
    assert _warnings(caplog) == 0


def test_a_value_nothing_can_write_is_an_error_naming_it() -> None:
    with pytest.raises(ValueError, match="object"):
        json_body({"metadata": {"raw": object()}})
