"""`evaltrace run`: the run directory, its invariants, adapters for Python functions, and evaluator isolation."""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from evaltrace.cli import main
from evaltrace.runner import RunConfigError, RunDirectory, run_eval
from evaltrace.runner.rundir import TRACES_FILE
from evaltrace.schema import EvaluationResult, RunSummary, Trace

from .conftest import EXAMPLE_DIR, Project

RUN_ID = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}_[A-Za-z0-9_.-]+$")


def _lines(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.fixture
def example_module() -> Iterator[None]:
    """The example imports its ``app`` module by that plain name: forget it afterwards."""
    yield
    sys.modules.pop("app", None)
    if str(EXAMPLE_DIR.resolve()) in sys.path:
        sys.path.remove(str(EXAMPLE_DIR.resolve()))


@pytest.mark.usefixtures("example_module")
def test_example_runs_end_to_end(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    runs = tmp_path / "runs"
    code = main(["run", str(EXAMPLE_DIR / "eval.yaml"), "--runs-dir", str(runs), "--no-progress"])
    assert code == 0
    (run_dir,) = [p for p in runs.iterdir() if p.is_dir()]
    assert RUN_ID.match(run_dir.name) and run_dir.name.endswith("_support_bot")
    names = {p.name for p in run_dir.iterdir()}
    assert {"config.yaml", "config_hash.txt", "traces.jsonl", "results.jsonl", "summary.yaml"} <= names
    summary = RunSummary.model_validate(yaml.safe_load((run_dir / "summary.yaml").read_text()))
    by_name = {v.name: v for v in summary.variants}
    assert by_name["v1"].pass_rate == 1.0 and by_name["v1"].cases_total == 6
    assert by_name["v2"].cases_errored == 1
    assert summary.comparison is not None and summary.comparison.kind == "ad_hoc"
    (delta,) = summary.comparison.deltas
    assert delta.variant == "v2" and delta.regressions == ["empty_question", "order_shipped"]
    traces = [Trace.model_validate(d) for d in _lines(run_dir / "traces.jsonl")]
    paris = next(t for t in traces if t.case_id == "weather_paris" and t.variant_name == "v1")
    assert [c.name for c in paris.tool_calls] == ["get_weather"]
    assert paris.output.final_answer == "It is 18 °C and sunny in Paris."
    assert summary.config_hash == (run_dir / "config_hash.txt").read_text().strip()
    # The authored config is kept verbatim (it holds no secret), comments included.
    assert (run_dir / "config.yaml").read_text() == (EXAMPLE_DIR / "eval.yaml").read_text()
    assert "order_shipped" in capsys.readouterr().out


def test_run_directory_invariants(project: Project) -> None:
    path = project.write(
        {
            "name": "inv",
            "variants": [
                {"name": "sync", "adapter": "python_function", "config": {"target": project.target("answer")}}
            ],
            "evaluators": [
                {"import": f"{project.probe}:TracesWritten", "runs_dir": str(project.runs_dir)},
                {"import": f"{project.probe}:Crashes"},
                {"name": "contains_text"},
                {"name": "tool_called"},
            ],
        }
    )
    outcome = run_eval(path, runs_dir=project.runs_dir)
    run_dir = outcome.run.path
    results = [EvaluationResult.model_validate(d) for d in _lines(run_dir / "results.jsonl")]
    # One result per (case, variant, evaluator).
    assert len(results) == 3 * 4
    assert {(r.case_id, r.evaluator) for r in results} == {
        (c, e) for c in ("c1", "c2", "c3") for e in ("traces_written", "crashes", "contains_text", "tool_called")
    }
    # traces.jsonl existed, and held each trace, while every evaluator ran.
    assert all(r.passed and r.status == "completed" for r in results if r.evaluator == "traces_written")
    # A crashing evaluator only fails its own cells.
    crashed = [r for r in results if r.evaluator == "crashes"]
    assert all(r.status == "failed" and r.error and "evaluator bug" in r.error.message for r in crashed)
    statuses = {r.case_id: r.status for r in results if r.evaluator == "contains_text"}
    assert statuses == {"c1": "completed", "c2": "completed", "c3": "skipped"}  # c3 has no answer to search
    # tool_called is skipped where the case names no tool.
    assert {r.case_id: r.status for r in results if r.evaluator == "tool_called"}["c2"] == "skipped"
    # Trace invariants: latency from the timestamps, error iff the system raised.
    traces = {t.case_id: t for t in outcome.traces}
    for trace in traces.values():
        assert trace.latency_ms == (trace.finished_at - trace.started_at) // __import__("datetime").timedelta(
            milliseconds=1
        )
        assert (trace.run_id, trace.variant_name) == (outcome.run.run_id, "sync")
    assert traces["c1"].error is None and traces["c1"].output.final_answer == "q1: alpha"
    assert traces["c3"].error is not None and traces["c3"].error.type == "exception"
    assert "system exploded" in traces["c3"].error.message and traces["c3"].error.stack
    # Write-once: read-only, and a second write is refused.
    mode = (run_dir / TRACES_FILE).stat().st_mode
    assert not mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH)
    with pytest.raises(FileExistsError):
        RunDirectory(run_dir).write_traces(outcome.traces)


def test_spans_of_each_case_carry_run_case_and_variant(project: Project) -> None:
    path = project.write(
        {
            "name": "ids",
            "variants": [{"name": "v", "adapter": "python_function", "config": {"target": project.target("answer")}}],
            "concurrency": 3,
        }
    )
    outcome = run_eval(path, runs_dir=project.runs_dir)
    seen = {a["evaltrace.case_id"]: a for a in project.sut().SEEN_ATTRIBUTES}
    assert set(seen) == {"c1", "c2", "c3"}
    assert all(a["evaltrace.run_id"] == outcome.run.run_id and a["evaltrace.variant"] == "v" for a in seen.values())
    # Each trace holds only its own case's tool call, though the cases ran concurrently.
    calls = {t.case_id: [(c.name, c.arguments) for c in t.tool_calls] for t in outcome.traces}
    assert calls == {"c1": [("lookup", {"key": "a"})], "c2": [("lookup", {"key": "b"})], "c3": []}


@pytest.mark.parametrize("function", ["answer", "answer_async"])
def test_python_function_sync_and_async(project: Project, function: str) -> None:
    path = project.write(
        {
            "name": "fn",
            "variants": [{"name": "v", "adapter": "python_function", "config": {"target": project.target(function)}}],
            "evaluators": [{"name": "contains_text"}],
            "concurrency": 2,
        },
        cases=[{"id": f"c{i}", "input": {"question": f"q{i}"}} for i in range(6)]
        + [{"id": "bad_input", "input": {"unexpected": 1}}],
    )
    outcome = run_eval(path, runs_dir=project.runs_dir)
    traces = {t.case_id: t for t in outcome.traces}
    assert traces["c0"].output.final_answer == "q0: alpha" and traces["c0"].error is None
    assert traces["bad_input"].error is not None and traces["bad_input"].error.type == "adapter_error"
    assert len(project.sut().CALLS) == 6
    if function == "answer_async":
        assert project.sut().ACTIVE[1] <= 2  # the concurrency limit held


def test_timeout_and_structured_output(project: Project) -> None:
    path = project.write(
        {
            "name": "slow",
            "variants": [
                {
                    "name": "slow",
                    "adapter": "python_function",
                    "config": {"target": project.target("slow"), "timeout_s": 0.1},
                },
                {"name": "obj", "adapter": "python_function", "config": {"target": project.target("structured")}},
            ],
        },
        cases=[{"id": "only", "input": {"question": "q"}}],
    )
    outcome = run_eval(path, runs_dir=project.runs_dir)
    by_variant = {t.variant_name: t for t in outcome.traces}
    assert by_variant["slow"].error is not None and by_variant["slow"].error.type == "timeout"
    assert by_variant["obj"].output.structured == {"answer": "q: alpha", "confidence": 0.9}
    assert by_variant["obj"].output.final_answer == "q: alpha"


def test_secrets_are_masked_in_config_yaml(project: Project, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SUT_TOKEN", "s3cr3t-value")
    path = project.write(
        {
            "name": "masked",
            "variants": [
                {
                    "name": "v",
                    "adapter": "python_function",
                    "config": {"target": project.target("answer")},
                    "metadata": {"api_key": "literal-key-123"},
                }
            ],
            "evaluators": [{"name": "regex", "args": ["alpha"], "as": "has_alpha", "token": "Bearer ${SUT_TOKEN}"}],
        }
    )
    # regex takes no 'token' option: a config error, raised before anything runs.
    with pytest.raises(RunConfigError, match=r"evaluators\[0\]\.token: unknown option of regex"):
        run_eval(path, runs_dir=project.runs_dir)
    assert not project.runs_dir.exists()
    config = yaml.safe_load(path.read_text())
    del config["evaluators"][0]["token"]
    path.write_text(yaml.safe_dump(config))
    outcome = run_eval(path, runs_dir=project.runs_dir)
    text = (outcome.run.path / "config.yaml").read_text()
    assert "literal-key-123" not in text and "***" in text
    assert {r.evaluator for r in outcome.results} == {"has_alpha"}


def test_example_as_a_user_runs_it(tmp_path: Path) -> None:
    """`evaltrace run examples/offline_eval/eval.yaml` in a fresh directory: ./runs/<run_id>/ appears there."""
    script = "from evaltrace.cli import main; raise SystemExit(main())"
    completed = subprocess.run(
        [sys.executable, "-c", script, "run", str(EXAMPLE_DIR / "eval.yaml"), "--fail-on-regression"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "COLUMNS": "200"},
    )
    # v2 regresses two cases against the baseline variant v1, so --fail-on-regression exits 1.
    assert completed.returncode == 1, completed.stderr
    (run_dir,) = (tmp_path / "runs").iterdir()
    assert (run_dir / "summary.yaml").is_file()
    assert "regressions: 2" in completed.stdout
