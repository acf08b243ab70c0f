"""The backend sinks encode what JSON cannot carry the same way on every httpx release, and deliver the score.

A real HTTP server on 127.0.0.1 receives the real sinks' requests. Before, the body was httpx's to encode: httpx
0.28 raised inside the sink's export on a lone surrogate and on a NaN in metadata; httpx 0.27 sent the surrogate
escaped and the NaN as a bare ``NaN``, which Phoenix's asynchronous span annotations accepted (200) and never
stored (``tests/integration/test_phoenix.py``). This file also runs in the oldest-versions CI step (httpx 0.27).
"""

from __future__ import annotations

import datetime as dt
import enum
import json
import logging
import threading
from typing import Any

import httpx
import pytest

from evaltrace.evaluation import LangfuseScoreSink, PhoenixScoreSink
from evaltrace.evaluation.sinks import _http
from evaltrace.evaluation.sinks._http import json_body
from evaltrace.schema import Score

from .conftest import Backend
from .test_sinks import numeric


class Tone(enum.Enum):
    CALM = "calm"


# (what the score holds, what the backend receives): one hazard each.
HAZARDS: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "lone surrogate": ({"comment": "half a pair: \ud800 / \udc80"}, {"comment": "half a pair: \ufffd / \ufffd"}),
    "pair in halves": ({"comment": "two halves: \ud83d\ude00"}, {"comment": "two halves: \U0001f600"}),
    "nan": ({"metadata": {"nan": float("nan")}}, {"metadata": {"nan": None}}),
    "infinity": ({"metadata": {"inf": float("-inf")}}, {"metadata": {"inf": None}}),
    "datetime": (
        {"metadata": {"when": dt.datetime(2026, 11, 30, 12, 0, tzinfo=dt.UTC)}},
        {"metadata": {"when": "2026-11-30T12:00:00Z"}},
    ),
    "enum": ({"metadata": {"tone": Tone.CALM}}, {"metadata": {"tone": "calm"}}),
    "nested surrogate key": (
        {"metadata": {"k\udc80": [{"v": "\ud800"}]}},
        {"metadata": {"k\ufffd": [{"v": "\ufffd"}]}},
    ),
}
REPLACES = {"lone surrogate", "nan", "infinity", "nested surrogate key"}  # the ones that lose something: logged


@pytest.fixture(autouse=True)
def fresh_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_http, "_WARNED", threading.Event())


def _warnings(caplog: pytest.LogCaptureFixture) -> int:
    return sum("JSON cannot carry" in r.getMessage() and r.levelno == logging.WARNING for r in caplog.records)


def _score(name: str, update: dict[str, Any]) -> Score:
    return numeric(name).model_copy(update=update)


@pytest.mark.parametrize("hazard", list(HAZARDS))
def test_phoenix_delivers_a_score_json_cannot_carry_as_json_can_carry_it(
    hazard: str, backend: Backend, caplog: pytest.LogCaptureFixture
) -> None:
    held, received = HAZARDS[hazard]
    sink = PhoenixScoreSink(backend.url)
    with caplog.at_level(logging.WARNING, logger="evaltrace"):
        assert sink.export([numeric("plain"), _score("hard", held)]).ok
        assert sink.export([_score("again", held)]).ok
    sink.shutdown()
    plain, hard, _ = [item for body in backend.bodies() for item in body["data"]]
    assert plain["result"]["explanation"] == "Answers the question; cites source."
    if "comment" in received:
        assert hard["result"]["explanation"] == received["comment"]
    else:
        assert hard["metadata"] == received["metadata"]
    assert _warnings(caplog) == (1 if hazard in REPLACES else 0)  # once per process; a lossless join is silent
    assert all(r.headers["content-type"] == "application/json" for r in backend.requests)


def test_langfuse_delivers_it_too_with_its_basic_auth(backend: Backend) -> None:
    sink = LangfuseScoreSink(backend.url, "pk-lf-1", "sk-lf-2", timeout_s=2.0)
    assert sink.export([_score("hard", {"comment": "half: \ud800", "metadata": {"nan": float("nan")}})]).ok
    sink.shutdown()
    (request,) = backend.requests
    assert request.headers["authorization"].startswith("Basic ")
    assert (request.body["comment"], request.body["metadata"]) == ("half: \ufffd", {"nan": None})


def test_a_body_that_cannot_be_encoded_is_rejected_alone_and_never_retried(backend: Backend) -> None:
    # Before: the encoder's error escaped the sink's export: the batch was retried (failing the same way), and
    # with Langfuse the scores before it in the batch were sent again.
    sink = LangfuseScoreSink(backend.url, "pk-lf-1", "sk-lf-2", timeout_s=2.0)
    bad = _score("bad", {"metadata": {"raw": object()}})
    tuple_key = _score("tuple key", {"metadata": {"m": {(1, 2): 1}}})  # json raises TypeError, not ValueError
    result = sink.export([numeric("a"), bad, numeric("c"), tuple_key])
    sink.shutdown()
    assert [r.body["name"] for r in backend.requests] == ["a", "c"]
    assert result.failed == () and [s.name for s in result.rejected] == ["bad", "tuple key"]
    assert result.error is not None and "the body could not be encoded as JSON" in result.error

    phoenix = PhoenixScoreSink(backend.url)  # one body per batch: the scores that cannot be encoded are found
    result = phoenix.export([numeric("x"), bad, numeric("y"), tuple_key])
    assert phoenix.export([bad]).rejected == (bad,)  # alone
    phoenix.shutdown()
    assert result.failed == () and [s.name for s in result.rejected] == ["bad", "tuple key"]
    assert [item["name"] for item in backend.requests[2].body["data"]] == ["x", "y"]
    assert len(backend.requests) == 3


def test_a_content_type_set_on_the_users_client_is_kept(backend: Backend) -> None:
    client = httpx.Client(timeout=2.0, headers={"content-type": "application/vnd.scores+json"})
    sink = LangfuseScoreSink(backend.url, "pk-lf-1", "sk-lf-2", client=client)
    assert sink.export([numeric("a")]).ok
    client.close()
    assert backend.requests[0].headers["content-type"] == "application/vnd.scores+json"


def test_a_body_json_can_carry_is_encoded_as_is_without_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    payload = {"data": [{"name": "é ✓ \U0001f600", "score": 0.5, "n": 2**70, "ok": True, "none": None, 1: (2, 3)}]}
    with caplog.at_level(logging.WARNING, logger="evaltrace"):
        body = json_body(payload)
    assert body == json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    assert _warnings(caplog) == 0


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ({"raw": object()}, "object"),
        (dict([("a\ud800", 1), ("a\udc00", 2)]), "two keys become 'a\ufffd'"),  # one entry would be lost
        ({"\U0001f600": 1, "\ud83d\ude00": 2}, "two keys become"),  # the halves join into the real key
        ({float("nan"): 1, None: 2}, "two keys become 'null'"),
        ({"null": 1, float("nan"): 2}, "two keys become 'null'"),  # the same key once written
    ],
    ids=["object", "lone-surrogate-keys", "pair-key", "nan-key", "null-and-nan-keys"],
)
def test_a_value_that_cannot_be_written_without_a_loss_is_an_error_naming_it(
    payload: dict[Any, Any], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        json_body(payload)


@pytest.mark.parametrize("first", ["\ud800", float("nan")], ids=["surrogate-first", "nan-first"])
def test_a_circular_reference_is_an_error_at_once(first: Any) -> None:
    # With a NaN met first, the fast encoder stops there and the cleaner meets the loop: still this error.
    looped: dict[str, Any] = {"first": first}
    looped["self"] = [looped]
    with pytest.raises(ValueError, match="Circular reference"):
        json_body({"metadata": looped})


def test_keys_that_meet_before_cleaning_are_written_as_the_fast_path_writes_them() -> None:
    # Whether a score is sent must not depend on an unrelated NaN: None and "null" met already (json writes both,
    # fast path or not); only keys that cleaning made meet are an error.
    assert json_body({"m": {None: 1, "null": 2}, "n": float("nan")}) == b'{"m":{"null":1,"null":2},"n":null}'
    assert json_body({"m": {None: 1, "null": 2}}) == b'{"m":{"null":1,"null":2}}'


def test_a_dict_shared_twice_is_not_a_loop() -> None:
    shared = {"v": "\ud800"}
    assert json.loads(json_body({"a": shared, "b": [shared], "n": float("nan")})) == {
        "a": {"v": "\ufffd"},
        "b": [{"v": "\ufffd"}],
        "n": None,
    }


def test_phoenix_splits_a_batch_around_a_score_it_cannot_encode_and_keeps_every_outcome(backend: Backend) -> None:
    backend.statuses = [503]  # the rest of the batch meets an outage: retried, never lost
    bad = _score("bad", {"metadata": {"raw": object()}})
    no_span = _score("no span", {"observation_id": None})
    sink = PhoenixScoreSink(backend.url)
    result = sink.export([numeric("x"), bad, no_span, numeric("y")])
    sink.shutdown()
    assert [s.name for s in result.failed] == ["x", "y"]
    assert [s.name for s in result.rejected] == ["bad", "no span"]
    assert result.error is not None
    assert "HTTP 503" in result.error and "the body could not be encoded as JSON" in result.error
    assert [[item["name"] for item in r.body["data"]] for r in backend.requests] == [["x", "y"]]


def _on_session(name: str, update: dict[str, Any] | None = None) -> Score:
    return _score(name, {"observation_id": None, "trace_id": None, "session_id": "chat-7", **(update or {})})


def test_phoenix_splits_a_session_batch_around_a_score_it_cannot_encode_and_retries_the_rest_on_404(
    backend: Backend,
) -> None:
    # Before, session annotations went as one body with no split: one score JSON cannot carry rejected the whole
    # batch, the good scores with it, never retried.
    backend.statuses = [
        200,
        404,
    ]  # (spans first) the rest meets a session Phoenix has not ingested yet: retried, never lost
    bad = _on_session("bad", {"metadata": {"raw": object()}})
    sink = PhoenixScoreSink(backend.url)
    result = sink.export([_on_session("turns"), bad, numeric("on a span"), _on_session("retention")])
    assert [s.name for s in result.failed] == ["turns", "retention"]
    assert [s.name for s in result.rejected] == ["bad"]
    assert result.error is not None
    assert "HTTP 404" in result.error and "the body could not be encoded as JSON" in result.error
    sent = {r.path: [item["name"] for item in r.body["data"]] for r in backend.requests}
    assert sent == {
        "/v1/span_annotations?sync=false": ["on a span"],
        "/v1/session_annotations?sync=true": ["turns", "retention"],
    }
    assert all(
        item["session_id"] == "chat-7" for r in backend.requests if "session" in r.path for item in r.body["data"]
    )

    again = sink.export(result.failed)  # the retry, once Phoenix has the session
    sink.shutdown()
    assert again.failed == () and again.rejected == () and again.error is None
    assert [item["name"] for item in backend.requests[-1].body["data"]] == ["turns", "retention"]


@pytest.mark.parametrize("on_session", [False, True], ids=["span", "session"])
def test_a_split_batch_whose_rest_is_refused_rejects_the_rest_then_the_bad_scores_in_order(
    backend: Backend, on_session: bool
) -> None:
    backend.statuses = [400]  # the rest is refused by the backend: rejected, not retried
    make = _on_session if on_session else (lambda name, update=None: _score(name, update or {}))
    bad = make("bad", {"metadata": {"raw": object()}})
    sink = PhoenixScoreSink(backend.url)
    result = sink.export([make("x"), bad, make("y")])
    sink.shutdown()
    assert result.failed == ()
    assert [s.name for s in result.rejected] == ["x", "y", "bad"]
    assert result.error is not None
    assert "HTTP 400" in result.error and "the body could not be encoded as JSON" in result.error
