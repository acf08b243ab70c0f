"""The ``evaluation`` block (an EvaluationConfig) consumed by ``evaltrace run``, and the evaluation records it writes:
evaluations.jsonl (MultiEvaluationResult per case), evaluation_batch.json and evaluation_config.json."""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path
from typing import Any

import pytest

from evaltrace.cli import main
from evaltrace.runner import RunConfigError, re_evaluate, run_eval
from evaltrace.schema import EvaluationBatch, EvaluationConfig, FactualAccuracyEvaluation, MultiEvaluationResult

from .conftest import Project

EVALUATORS_SOURCE = '''
import threading
import time
from pathlib import Path

from evaltrace.schema import EvaluationResult

HERE = Path(__file__).parent
_lock = threading.Lock()
ACTIVE = [0, 0]  # now, most at once


def _log(name, case_id):
    with _lock, (HERE / f"{name}.calls").open("a") as handle:
        handle.write(case_id + "\\n")


class Facts:
    """Reports claims the way the factual-accuracy judge does; one of them refuted on case c2."""

    name = "facts"
    version = "1"

    def __init__(self, strict: bool = False):
        self.strict = strict

    def evaluate(self, trace, case):
        _log("facts", case.id)
        with _lock:
            ACTIVE[0] += 1
            ACTIVE[1] = max(ACTIVE)
        time.sleep(0.05)
        with _lock:
            ACTIVE[0] -= 1
        claims = [{"claim": "a", "verified": True, "sources": ["s1"]}]
        if case.id == "c2":
            claims.append({"claim": "b", "verified": False, "sources": ["s2"]})
        score = 0.0 if self.strict else 0.9
        return EvaluationResult(
            evaluator="facts", evaluator_type="factual_accuracy", passed=score > 0.5, score=score,
            detail={"factual_claims": claims},
        )


class Flaky:
    """Crashes the first time it sees a case, then answers."""

    name = "flaky"
    version = "1"

    def evaluate(self, trace, case):
        seen = (HERE / "flaky.calls").read_text().split() if (HERE / "flaky.calls").exists() else []
        _log("flaky", case.id)
        if case.id not in seen:
            raise RuntimeError("judge hiccup")
        return EvaluationResult(evaluator="flaky", passed=True, score=1.0)


class Slow:
    name = "slow"
    version = "1"

    def evaluate(self, trace, case):
        time.sleep(2.0)
        return True


def never(trace, case):
    _log("never", case.id)
    return True
'''

CASES = [{"id": f"c{i}", "input": {"question": f"q{i}", "key": "a"}} for i in (1, 2, 3)]


def _project(project: Project, evaluation: dict[str, Any] | None = None, extra: list[dict[str, Any]] = ()) -> Path:  # type: ignore[assignment]
    module = f"evals_{project.module}"  # this project's own module name: another test's may still be imported
    (project.root / f"{module}.py").write_text(textwrap.dedent(EVALUATORS_SOURCE))
    target = {"adapter": "python_function", "config": {"target": project.target("answer")}}
    config: dict[str, Any] = {
        "name": "records",
        "variants": [{"name": "v", **target}],
        "evaluators": [
            {"import": f"{module}:Facts", "name": "facts"},
            {"name": "mentions", "type": "contains_text", "args": ["alpha"]},
            {"import": f"{module}:never", "name": "never"},
            *[{**e, "import": f"{module}:{e['import']}"} for e in extra],
        ],
    }
    if evaluation is not None:
        config["evaluation"] = evaluation
    return project.write(config, cases=CASES)


def _calls(project: Project, name: str) -> list[str]:
    path = project.root / f"{name}.calls"
    return path.read_text().split() if path.exists() else []


def test_a_run_writes_each_cases_evaluations_as_typed_records(project: Project) -> None:
    evaluation = {"weights": {"facts": 3, "mentions": 1, "never": 0}}
    outcome = run_eval(_project(project, evaluation), runs_dir=project.runs_dir)
    run = outcome.run.path
    lines = (run / "evaluations.jsonl").read_text().splitlines()
    multis = [MultiEvaluationResult.model_validate_json(line) for line in lines]
    traces = {t.case_id: t for t in outcome.traces}
    assert [m.target_event_id for m in multis] == [traces[c].extra["trace_id"] for c in ("c1", "c2", "c3")]
    second = multis[1]
    facts = second.evaluations[0]
    assert isinstance(facts, FactualAccuracyEvaluation)
    assert (facts.hallucination_detected, facts.citation_accuracy) == (True, 0.5)  # c2's refuted, cited claim
    first_facts = multis[0].evaluations[0]
    assert isinstance(first_facts, FactualAccuracyEvaluation) and not first_facts.hallucination_detected
    assert [e.evaluator_name for e in second.evaluations] == ["facts", "mentions", "never"]
    assert second.summary_score == pytest.approx((3 * 0.9 + 1 * 1.0) / 4)  # weights of the evaluation block

    batch = EvaluationBatch.model_validate_json((run / "evaluation_batch.json").read_text())
    assert batch.batch_metadata.batch_size == len(outcome.results) == len(batch.evaluations) == 9
    assert batch.batch_metadata.evaluator_versions["facts"] == "1" and batch.status == "completed"
    config = EvaluationConfig.model_validate_json((run / "evaluation_config.json").read_text())
    assert config.evaluators == ["facts", "mentions", "never"] and config.retry_config is None
    assert config.evaluator_configs["mentions"] == {"args": ["alpha"]}

    (run / "evaluations.jsonl").unlink()  # derived: rebuilt with the summary, without calling evaluators
    calls = _calls(project, "facts")
    assert main(["runs", "summarize", str(run)]) == 0
    assert (run / "evaluations.jsonl").read_text().splitlines() == lines and _calls(project, "facts") == calls


def test_the_evaluation_block_chooses_and_configures_the_evaluators(project: Project) -> None:
    evaluation = {
        "evaluators": ["facts", "mentions"],  # `never` is not run
        "evaluator_configs": {"facts": {"strict": True}},
        "parallel_execution": False,
    }
    outcome = run_eval(_project(project, evaluation), runs_dir=project.runs_dir)
    assert _calls(project, "never") == []
    assert {r.evaluator for r in outcome.results} == {"facts", "mentions"}
    assert all(r.score == 0.0 and not r.passed for r in outcome.results if r.evaluator == "facts")  # strict
    module = __import__(f"evals_{project.module}")
    assert module.ACTIVE[1] == 1  # one evaluation at a time
    config = EvaluationConfig.model_validate_json((outcome.run.path / "evaluation_config.json").read_text())
    assert config.evaluators == ["facts", "mentions"] and config.parallel_execution is False
    assert config.evaluator_configs["facts"] == {"strict": True}


def test_timeout_ms_and_retries_apply_to_evaluations(project: Project) -> None:
    evaluation = {"timeout_ms": 300, "retry_config": {"max_retries": 2, "initial_delay_ms": 10}}
    extra = [{"import": "Slow", "name": "slow"}, {"import": "Flaky", "name": "flaky"}]
    outcome = run_eval(_project(project, evaluation, extra), runs_dir=project.runs_dir)
    slow = [r for r in outcome.results if r.evaluator == "slow"]
    assert {(r.status, r.error.type if r.error else None) for r in slow} == {("failed", "timeout")}
    flaky = [r for r in outcome.results if r.evaluator == "flaky"]
    assert {r.status for r in flaky} == {"completed"}  # each crashed once, then passed on its retry
    assert sorted(_calls(project, "flaky")) == ["c1", "c1", "c2", "c2", "c3", "c3"]
    assert sorted(_calls(project, "facts")) == ["c1", "c2", "c3"]  # what did not fail is never run again
    results = [json.loads(line) for line in (outcome.run.path / "results.jsonl").read_text().splitlines()]
    assert len(results) == 15 and {r["status"] for r in results if r["evaluator"] == "flaky"} == {"completed"}

    again = re_evaluate(outcome.run)  # re-evaluate follows the block as well
    assert {r.status for r in again.results if r.evaluator == "flaky"} == {"completed"}


def test_without_retry_config_a_failed_evaluation_is_not_retried(project: Project) -> None:
    outcome = run_eval(_project(project, None, [{"import": "Flaky", "name": "flaky"}]), runs_dir=project.runs_dir)
    assert {r.status for r in outcome.results if r.evaluator == "flaky"} == {"failed"}
    assert sorted(_calls(project, "flaky")) == ["c1", "c2", "c3"]


@pytest.mark.parametrize(
    ("evaluation", "where"),
    [
        ({"evaluators": ["nope"]}, "evaluation.evaluators[0]"),
        ({"evaluator_configs": {"nope": {"x": 1}}}, "evaluation.evaluator_configs.nope"),
        ({"evaluator_configs": {"facts": {"type": "length"}}}, "evaluation.evaluator_configs.facts.type"),
        ({"timeout_ms": 0}, "evaluation.timeout_ms"),
        ({"retry_config": {"max_retry": 2}}, "evaluation.retry_config.max_retry"),
        ({"paralel_execution": False}, "evaluation.paralel_execution"),
    ],
)
def test_a_bad_evaluation_block_is_an_error_naming_the_key(
    project: Project, evaluation: dict[str, Any], where: str
) -> None:
    with pytest.raises(RunConfigError, match=re.escape(where)):
        run_eval(_project(project, evaluation), runs_dir=project.runs_dir)
    assert not project.runs_dir.exists() and _calls(project, "facts") == []


def test_parallel_evaluations_by_default(project: Project) -> None:
    run_eval(_project(project), runs_dir=project.runs_dir)
    module = __import__(f"evals_{project.module}")
    assert module.ACTIVE[1] > 1  # the contrast to parallel_execution: false
