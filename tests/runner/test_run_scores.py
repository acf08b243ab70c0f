"""An offline run's scores go to its score sinks: on traces, sessions and the dataset run (each variant)."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import pytest
import yaml

from evaltrace.cli import main
from evaltrace.runner import RunDirectory, re_evaluate, run_eval
from evaltrace.runner.rundir import SUMMARY_FILE
from evaltrace.schema import Score, dataset_run_score_id, score_id, session_score_id

from .conftest import HttpSystem, Project


def _config(project: Project, **extra: Any) -> dict[str, Any]:
    return {
        "name": "scored",
        "variants": [{"name": "v", "adapter": "python_function", "config": {"target": project.target("answer")}}],
        "evaluators": [
            {"name": "contains_text"},  # c3's system raises: no answer, skipped
            {"name": "tool_called"},  # c2 names no tool: skipped
            {"name": "whole_chat", "type": "turn_count", "max_turns": 1},  # conversation-only: session scope
        ],
        **extra,
    }


def _scores(path: Path) -> list[Score]:
    return [Score.model_validate_json(line) for line in path.read_text().splitlines() if line.strip()]


def test_run_pushes_trace_session_and_dataset_run_scores_to_every_sink(project: Project) -> None:
    first, second = project.root / "scores.jsonl", project.root / "more" / "scores.jsonl"
    path = project.write(_config(project, sinks=[f"jsonl:{first}"]))
    code = main(["run", str(path), "--runs-dir", str(project.runs_dir), "--no-progress", "--sink", f"jsonl:{second}"])
    assert code == 0
    run = RunDirectory(next(p for p in project.runs_dir.iterdir() if p.is_dir()))
    traces = {t.case_id: t for t in run.read_traces()}
    results = run.read_results()
    summary = yaml.safe_load((run.path / SUMMARY_FILE).read_text())
    scores = _scores(first)
    assert [s.model_dump() for s in scores] == [s.model_dump() for s in _scores(second)]  # both sinks, same scores

    judged = [r for r in results if r.status == "completed"]
    assert len(judged) < len(results)  # skipped evaluations give no score
    by_target = {s.target: [x for x in scores if x.target == s.target] for s in scores}
    assert set(by_target) == {"trace", "session", "dataset_run"}

    on_traces = {(s.name, s.trace_id) for s in by_target["trace"]}
    expected = {
        (r.evaluator, traces[r.case_id].extra["trace_id"])
        for r in judged
        if (r.metadata or {}).get("scope") != "session"
    }
    assert on_traces == expected
    versions = {(r.evaluator, traces[r.case_id].extra["trace_id"]): r.evaluator_version for r in judged}
    for score in by_target["trace"]:  # the id live evaluation of that trace would use: backends upsert
        version = versions[(score.name, score.trace_id)]
        assert score.id == score_id(str(score.trace_id), None, score.name, version)
        assert score.metadata and score.metadata["run_id"] == run.run_id

    sessions = {r.metadata["session_id"]: r for r in judged if (r.metadata or {}).get("scope") == "session"}
    assert {s.session_id for s in by_target["session"]} == set(sessions) and sessions
    for score in by_target["session"]:
        version = sessions[str(score.session_id)].evaluator_version
        assert score.id == session_score_id(str(score.session_id), "whole_chat", version)

    dataset_run = f"{run.run_id}/v"
    figures = {s.name: s for s in by_target["dataset_run"]}
    assert {s.dataset_run_id for s in figures.values()} == {dataset_run}
    variant = summary["variants"][0]
    assert figures["pass_rate"].value == variant["pass_rate"]
    assert figures["pass_rate"].id == dataset_run_score_id(dataset_run, "pass_rate")
    rollups = {r["evaluator"]: r["by_variant"]["v"] for r in summary["by_evaluator"]}
    for name, rollup in rollups.items():
        assert figures[name].value == rollup["pass_rate"]


def test_scores_reach_langfuse_with_their_targets_and_a_second_push_upserts(
    project: Project, http_system: HttpSystem, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LANGFUSE_HOST", http_system.url)
    monkeypatch.setenv("LANGFUSE_PUBLIC_KEY", "pk-lf-test")
    monkeypatch.setenv("LANGFUSE_SECRET_KEY", "sk-lf-test")
    outcome = run_eval(project.write(_config(project, sinks=["langfuse"])), runs_dir=project.runs_dir)
    assert any(s.startswith("score sink langfuse") for s in outcome.stored) and not outcome.store_errors
    sent = [r["body"] for r in http_system.requests if r["path"] == "/api/public/scores"]
    assert {"traceId", "sessionId", "datasetRunId"} <= {key for body in sent for key in body}
    assert all(sum(k in body for k in ("traceId", "sessionId", "datasetRunId")) == 1 for body in sent)

    again = re_evaluate(outcome.run)  # the run's own sinks: the same ids, so Langfuse updates in place
    assert not again.store_errors
    resent = [r["body"] for r in http_system.requests if r["path"] == "/api/public/scores"][len(sent) :]
    assert sorted(b["id"] for b in resent) == sorted(b["id"] for b in sent)


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def test_a_sink_that_is_down_keeps_the_scores_for_replay_and_exits_3(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    down = f"http://127.0.0.1:{_closed_port()}"
    path = project.write(_config(project, sinks=[f"phoenix:{down}"]))
    out = project.root / "replayed.jsonl"
    assert main(["run", str(path), "--runs-dir", str(project.runs_dir), "--no-progress"]) == 3
    err = capsys.readouterr().err
    assert "score sink phoenix" in err and "not delivered" in err and "evaltrace scores replay" in err
    run = next(p for p in project.runs_dir.iterdir() if p.is_dir())
    dead = run / "dead-letter" / "phoenix.jsonl"
    assert dead.is_file() and (run / SUMMARY_FILE).is_file()  # the run is complete; its scores are kept
    assert main(["scores", "replay", str(dead), "--sink", "jsonl", "--output", str(out)]) == 0
    replayed = [json.loads(line) for line in out.read_text().splitlines()]
    assert {"trace_id", "session_id", "dataset_run_id"} <= {k for s in replayed for k, v in s.items() if v}


@pytest.mark.parametrize("spec", ["jsonl", "kafka:topic", "langfuse:extra"])
def test_a_malformed_sink_is_a_config_error_naming_it(
    project: Project, capsys: pytest.CaptureFixture[str], spec: str
) -> None:
    path = project.write(_config(project, sinks=[spec]))
    assert main(["run", str(path), "--runs-dir", str(project.runs_dir), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "sinks[0]" in err and "jsonl:PATH, langfuse, phoenix" in err
    assert not project.runs_dir.exists()  # refused before anything ran
    again = ["run", str(project.write(_config(project))), "--runs-dir", str(project.runs_dir), "--no-progress"]
    assert main([*again, "--sink", spec]) == 2
    assert "jsonl:PATH, langfuse, phoenix" in capsys.readouterr().err and not project.runs_dir.exists()
