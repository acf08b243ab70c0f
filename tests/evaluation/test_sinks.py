from __future__ import annotations

import base64
import json
from pathlib import Path

import httpx
import pytest

from evaltrace.cli import main as cli_main
from evaltrace.evaluation import (
    EvaluatorSpec,
    JsonlScoreSink,
    LangfuseScoreSink,
    PhoenixScoreSink,
    RetryPolicy,
    evaluator,
)
from evaltrace.evaluation.sinks import SinkWorker, read_dead_letters, write_dead_letters
from evaltrace.exceptions import ConfigError
from evaltrace.schema import Score, ScoreConfig, Trace, score_id

from .conftest import Backend, MakePipeline, wait_until

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
SPAN = "00f067aa0ba902b7"
FAST = RetryPolicy(max_retries=2, initial_backoff_s=0.001, max_backoff_s=0.01)


def numeric(name: str = "relevance", value: float = 0.82) -> Score:
    return Score(
        id=score_id(TRACE, SPAN, name, "v1"),
        name=name,
        value=value,
        data_type="NUMERIC",
        trace_id=TRACE,
        observation_id=SPAN,
        comment="Answers the question; cites source.",
        source="EVAL",
        metadata={"label": "relevant", "annotator_kind": "LLM", "evaluator_version": "v1"},
    )


def langfuse(backend: Backend, **kwargs: object) -> LangfuseScoreSink:
    return LangfuseScoreSink(backend.url, "pk-lf-1", "sk-lf-2", timeout_s=kwargs.pop("timeout_s", 2.0), **kwargs)  # type: ignore[arg-type]


def test_langfuse_request_shape(backend: Backend) -> None:
    boolean = Score(name="hallucination", value=0, data_type="BOOLEAN", trace_id=TRACE, observation_id=SPAN)
    category = Score(name="toxicity", string_value="not toxic", data_type="CATEGORICAL", trace_id=TRACE)
    sink = langfuse(backend, environment="default")
    result = sink.export([numeric(), boolean, category])
    sink.shutdown()
    assert result.ok
    assert [r.path for r in backend.requests] == ["/api/public/scores"] * 3
    expected_auth = "Basic " + base64.b64encode(b"pk-lf-1:sk-lf-2").decode()
    assert all(r.headers["authorization"] == expected_auth for r in backend.requests)
    first, second, third = backend.bodies()
    assert first == {
        "id": score_id(TRACE, SPAN, "relevance", "v1"),
        "name": "relevance",
        "value": 0.82,
        "dataType": "NUMERIC",
        "traceId": TRACE,
        "observationId": SPAN,
        "comment": "Answers the question; cites source.",
        "metadata": {"label": "relevant", "annotator_kind": "LLM", "evaluator_version": "v1"},
        "environment": "default",
    }
    assert "source" not in first
    assert (second["value"], second["dataType"]) == (0, "BOOLEAN")
    assert isinstance(second["value"], int)
    assert (third["value"], third["dataType"], "observationId" in third) == ("not toxic", "CATEGORICAL", False)


def test_langfuse_keys_from_environment(monkeypatch: pytest.MonkeyPatch, backend: Backend) -> None:
    monkeypatch.setenv("LANGFUSE_PUBLIC_KEY", "pk-env")
    monkeypatch.setenv("LANGFUSE_SECRET_KEY", "sk-env")
    monkeypatch.setenv("LANGFUSE_HOST", backend.url + "/")
    sink = LangfuseScoreSink()
    assert sink.export([numeric()]).ok
    sink.shutdown()
    assert backend.requests[0].headers["authorization"] == "Basic " + base64.b64encode(b"pk-env:sk-env").decode()
    monkeypatch.delenv("LANGFUSE_SECRET_KEY")
    with pytest.raises(ConfigError):
        LangfuseScoreSink()


def test_phoenix_request_shape(monkeypatch: pytest.MonkeyPatch, backend: Backend) -> None:
    monkeypatch.setenv("PHOENIX_API_KEY", "px-key")
    sink = PhoenixScoreSink(backend.url)
    trace_score = Score(name="whole", value=1.0, trace_id=TRACE, metadata={"span_id": "aaaaaaaaaaaaaaaa"})
    assert sink.export([numeric(), trace_score]).ok
    sink.shutdown()
    (request,) = backend.requests
    assert request.path == "/v1/span_annotations?sync=false"
    assert request.headers["authorization"] == "Bearer px-key"
    first, second = request.body["data"]
    assert first == {
        "span_id": SPAN,
        "name": "relevance",
        "annotator_kind": "LLM",
        "result": {"label": "relevant", "score": 0.82, "explanation": "Answers the question; cites source."},
        "metadata": {"label": "relevant", "annotator_kind": "LLM", "evaluator_version": "v1"},
        "identifier": "evaltrace-v1",
    }
    assert second["span_id"] == "aaaaaaaaaaaaaaaa" and second["annotator_kind"] == "CODE"


def test_phoenix_without_key_sends_no_auth(monkeypatch: pytest.MonkeyPatch, backend: Backend) -> None:
    monkeypatch.delenv("PHOENIX_API_KEY", raising=False)
    sink = PhoenixScoreSink(backend.url)
    assert sink.export([numeric()]).ok
    sink.shutdown()
    assert "authorization" not in backend.requests[0].headers


def test_worker_retries_5xx_then_delivers_same_id(tmp_path: Path, backend: Backend) -> None:
    backend.statuses = [500, 503]
    worker = SinkWorker(langfuse(backend), retry=FAST, schedule_delay_s=0.01, dead_letter_path=tmp_path / "dl.jsonl")
    worker.submit([numeric()])
    assert worker.force_flush(10)
    worker.shutdown(5)
    ids = [body["id"] for body in backend.bodies()]
    assert ids == [numeric().id] * 3  # same deterministic id on every attempt: an idempotent upsert
    assert (worker.stats.successes, worker.stats.retries, worker.stats.dead_lettered) == (1, 2, 0)
    assert not (tmp_path / "dl.jsonl").exists()


def test_worker_dead_letters_when_backend_stays_down_then_replay_once(tmp_path: Path, backend: Backend) -> None:
    dead = tmp_path / "langfuse.jsonl"
    backend.default_status = 500
    worker = SinkWorker(langfuse(backend), retry=FAST, schedule_delay_s=0.01, dead_letter_path=dead)
    scores = [numeric("a"), numeric("b")]
    worker.submit(scores)
    worker.force_flush(10)
    worker.shutdown(5)
    assert worker.stats.dead_lettered == 2 and worker.stats.retries == 2
    # A score dead-lettered twice (e.g. by two processes) must still be delivered once.
    with dead.open("a") as handle:
        handle.write(json.dumps({"sink": "langfuse", "score": scores[0].model_dump(mode="json")}) + "\n")
    assert {s.id for s in read_dead_letters(dead)[0]} == {s.id for s in scores}

    backend.default_status = 200
    backend.requests.clear()
    args = ["scores", "replay", str(dead), "--sink", "langfuse", "--host", backend.url]
    assert cli_main([*args, "--public-key", "pk", "--secret-key", "sk"]) == 0
    assert sorted(body["id"] for body in backend.bodies()) == sorted(s.id for s in scores)
    assert not dead.exists()
    backend.requests.clear()
    assert cli_main([*args, "--public-key", "pk", "--secret-key", "sk"]) == 0
    assert backend.requests == []


def test_4xx_is_not_retried_and_timeouts_are(tmp_path: Path, backend: Backend) -> None:
    backend.statuses = [400]
    worker = SinkWorker(langfuse(backend), retry=FAST, schedule_delay_s=0.01, dead_letter_path=tmp_path / "dl.jsonl")
    worker.submit([numeric()])
    worker.force_flush(10)
    assert (worker.stats.retries, worker.stats.dead_lettered) == (0, 1)
    worker.shutdown(5)

    backend.delay_s = 0.5
    slow = SinkWorker(
        langfuse(backend, timeout_s=0.05), retry=FAST, schedule_delay_s=0.01, dead_letter_path=tmp_path / "t.jsonl"
    )
    slow.submit([numeric("t")])
    slow.force_flush(10)
    slow.shutdown(5)
    assert (slow.stats.retries, slow.stats.dead_lettered) == (2, 1)
    (line,) = (tmp_path / "t.jsonl").read_text().splitlines()
    assert "transport error" in json.loads(line)["error"]


def test_replay_into_jsonl_skips_ids_already_present(tmp_path: Path) -> None:
    dead, out = tmp_path / "dl.jsonl", tmp_path / "scores.jsonl"
    first, second = numeric("a"), numeric("b")
    JsonlScoreSink(out).export([first])
    write_dead_letters(dead, "jsonl", [first, second], "disk full")
    assert cli_main(["scores", "replay", str(dead), "--sink", "jsonl", "--output", str(out)]) == 0
    ids = [json.loads(line)["id"] for line in out.read_text().splitlines()]
    assert ids == [first.id, second.id]


def test_replay_keeps_what_still_fails(tmp_path: Path, backend: Backend) -> None:
    dead = tmp_path / "px.jsonl"
    write_dead_letters(dead, "phoenix", [numeric()], "down")
    backend.default_status = 502
    assert cli_main(["scores", "replay", str(dead), "--sink", "phoenix", "--base-url", backend.url]) == 1
    assert [s.id for s in read_dead_letters(dead)[0]] == [numeric().id]


def test_processor_to_sinks_end_to_end(make_pipeline: MakePipeline, tmp_path: Path, backend: Backend) -> None:
    @evaluator(name="relevance", version="v3", evaluator_type="llm_judge")
    def relevance(trace: Trace) -> float:
        return 0.9

    @evaluator(name="bounded")
    def bounded(trace: Trace) -> float:
        return 7.0  # violates the config below

    jsonl = JsonlScoreSink(tmp_path / "scores.jsonl")
    config = ScoreConfig(name="bounded", data_type="NUMERIC", min_value=0, max_value=1)
    p = make_pipeline(
        [relevance, EvaluatorSpec(bounded, config=config)],
        sinks=[langfuse(backend), jsonl],
        sink_schedule_delay_s=0.01,
    )
    with p.tracer.start_as_current_span("chat") as span:
        ctx = span.get_span_context()
    p.flush()
    (body,) = backend.bodies()
    assert body["traceId"] == format(ctx.trace_id, "032x")
    assert body["observationId"] == format(ctx.span_id, "016x")
    assert body["id"] == score_id(body["traceId"], body["observationId"], "relevance", "v3")
    assert body["metadata"]["annotator_kind"] == "LLM"
    stored = [json.loads(line) for line in (tmp_path / "scores.jsonl").read_text().splitlines()]
    assert [s["name"] for s in stored] == ["relevance"]
    stats = p.processor.stats()
    assert stats["score_rejects"] == 1
    assert stats["sinks"]["langfuse"]["successes"] == 1 and stats["sinks"]["jsonl"]["successes"] == 1


def test_unreachable_backend_fails_whole_batch_fast(tmp_path: Path) -> None:
    sink = LangfuseScoreSink("http://127.0.0.1:9", "pk", "sk", client=httpx.Client(timeout=0.5))
    result = sink.export([numeric("a"), numeric("b"), numeric("c")])
    assert len(result.failed) == 3 and not result.rejected
    sink._client.close()


def test_worker_sends_a_partial_batch_after_the_schedule_delay(tmp_path: Path) -> None:
    out = tmp_path / "scores.jsonl"
    worker = SinkWorker(JsonlScoreSink(out), batch_size=100, schedule_delay_s=0.01)
    worker.submit([numeric()])  # far below the batch size, and nobody calls force_flush
    assert wait_until(lambda: out.exists() and len(out.read_text().splitlines()) == 1)
    worker.shutdown(5)


def test_replay_picks_up_an_interrupted_replay(tmp_path: Path, backend: Backend) -> None:
    dead = tmp_path / "phoenix.jsonl"
    staged = tmp_path / "phoenix.jsonl.replaying"
    write_dead_letters(staged, "phoenix", [numeric("a"), numeric("b")], "left by a crashed replay")
    write_dead_letters(dead, "phoenix", [numeric("b"), numeric("c")], "new failures")
    assert cli_main(["scores", "replay", str(dead), "--sink", "phoenix", "--base-url", backend.url]) == 0
    names = sorted(item["name"] for body in backend.bodies() for item in body["data"])
    assert names == ["a", "b", "c"]  # "b" was in both files: sent once
    assert not dead.exists() and not staged.exists()


def test_a_jsonl_sink_on_a_named_pipe_delivers_scores_and_not_evaluated_records(tmp_path: Path) -> None:
    # Before: the torn-line check seeked and read the target on every write, which a pipe refuses: every export
    # failed and the not-evaluated write raised, so nothing reached the pipe (the reader got 0 lines).
    import os
    import threading

    from evaltrace.evaluation.sinks.not_evaluated import NotEvaluated

    if not hasattr(os, "mkfifo"):
        pytest.skip("named pipes are POSIX-only")
    fifo = tmp_path / "scores.fifo"
    os.mkfifo(fifo)
    received: list[bytes] = []

    def read_all() -> None:
        with open(fifo, "rb") as pipe:  # blocks until a writer opens it
            received.append(pipe.read())

    reader = threading.Thread(target=read_all, daemon=True)
    reader.start()
    keep_open = os.open(fifo, os.O_WRONLY)  # the reader sees EOF only once this closes, not after each write
    try:
        sink = JsonlScoreSink(fifo)
        result = sink.export([numeric("a"), numeric("b")])
        assert result.ok, result.error
        record = NotEvaluated(TRACE, SPAN, SPAN, "tone", None, "shutdown")
        sink.record_not_evaluated([record])
    finally:
        os.close(keep_open)
        reader.join(60)
    assert not reader.is_alive()
    lines = received[0].decode("utf-8").splitlines()
    assert [json.loads(line)["name"] for line in lines[:2]] == ["a", "b"]
    assert lines[2:] == [record.to_line()]
