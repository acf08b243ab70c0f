"""The `judge:` block: every judge evaluator of a run calls that model, over real HTTP on 127.0.0.1."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from evaltrace.runner import RunConfigError, run_eval
from judge_server import JudgeServer, serve_judge

from .conftest import Project

JUDGE_KEY = "s3cret-judge-key"


def _verdict(body: dict[str, Any]) -> dict[str, Any]:
    """Scores 5 when the judged answer mentions alpha, else 1."""
    prompt = body["messages"][-1]["content"]
    return {"score": 5, "reason": "names alpha"} if ": alpha" in prompt else {"score": 1, "reason": "no alpha"}


@pytest.fixture
def chat_server() -> Iterator[JudgeServer]:
    with serve_judge(_verdict) as judge:
        yield judge


def _config(project: Project, judge: dict[str, Any], evaluators: list[dict[str, Any]]) -> dict[str, Any]:
    system = {"name": "v1", "adapter": "python_function", "config": {"target": project.target("answer")}}
    return {"name": "judged", "systems": [system], "judge": judge, "evaluators": evaluators}


def test_judge_evaluators_call_the_judge_block_model(
    project: Project, chat_server: JudgeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EVALTRACE_TEST_JUDGE_URL", chat_server.url)
    monkeypatch.setenv("EVALTRACE_TEST_JUDGE_KEY", JUDGE_KEY)
    judge = {
        "model": "judge-small",
        "base_url": "${EVALTRACE_TEST_JUDGE_URL}",
        "api_key": "${EVALTRACE_TEST_JUDGE_KEY}",
        "temperature": 0.3,
        "timeout_s": 10,
    }
    evaluators = [
        {"name": "names_alpha", "type": "llm_judge", "rubric": "The answer names alpha.", "scale": [1, 5]},
        # An entry overrides keys of the block for itself; the others (url, key, temperature) are inherited.
        {
            "name": "second_opinion",
            "type": "llm_judge",
            "rubric": "Says alpha.",
            "scale": [1, 5],
            "judge": {"model": "judge-large"},
        },
        {"name": "mentions", "type": "contains_text", "args": ["alpha"]},  # takes no judge: gets none
    ]
    outcome = run_eval(project.write(_config(project, judge, evaluators)), runs_dir=project.runs_dir)

    bodies = [r["body"] for r in chat_server.requests]
    assert {r["path"] for r in chat_server.requests} == {"/v1/chat/completions"}
    # c1 and c2 answer; c3 raised, so it has no answer to judge: 2 cases x 2 judge evaluators.
    assert sorted(b["model"] for b in bodies) == ["judge-large", "judge-large", "judge-small", "judge-small"]
    assert {b["temperature"] for b in bodies} == {0.3}
    assert {r["authorization"] for r in chat_server.requests} == {f"Bearer {JUDGE_KEY}"}

    by_cell = {(r.case_id, r.evaluator): r for r in outcome.results}
    first = by_cell[("c1", "names_alpha")]
    # The score is on the rubric's scale (5 of 1-5), the normalised one beside it.
    assert (first.passed, first.score, first.evaluator_type) == (True, 5.0, "llm_judge")
    assert first.detail["normalized_score"] == 1.0
    assert first.detail["judge"]["model"] == "judge-small"
    assert by_cell[("c2", "names_alpha")].passed is False  # "q2: beta": scored 1 of 5
    assert by_cell[("c1", "second_opinion")].detail["judge"]["model"] == "judge-large"
    assert by_cell[("c3", "names_alpha")].status == "skipped"

    # The key reached the server but was never written: config.yaml keeps the reference.
    saved = (outcome.run.path / "config.yaml").read_text()
    assert "${EVALTRACE_TEST_JUDGE_KEY}" in saved and JUDGE_KEY not in saved
    assert not any(JUDGE_KEY in p.read_text() for p in outcome.run.path.iterdir() if p.is_file())


def test_a_literal_judge_key_is_masked_in_config_yaml(project: Project, chat_server: JudgeServer) -> None:
    judge = {"model": "judge-small", "base_url": chat_server.url, "api_key": JUDGE_KEY}
    evaluators = [{"name": "names_alpha", "type": "llm_judge", "rubric": "The answer names alpha.", "scale": [1, 5]}]
    outcome = run_eval(project.write(_config(project, judge, evaluators)), runs_dir=project.runs_dir)
    assert {r["authorization"] for r in chat_server.requests} == {f"Bearer {JUDGE_KEY}"}
    assert JUDGE_KEY not in (outcome.run.path / "config.yaml").read_text()


def test_the_block_is_expanded_only_when_a_judge_evaluator_needs_it(project: Project) -> None:
    judge = {"model": "judge-small", "api_key": "${EVALTRACE_TEST_UNSET_JUDGE_KEY}"}
    deterministic = [{"name": "mentions", "type": "contains_text", "args": ["alpha"]}]
    outcome = run_eval(project.write(_config(project, judge, deterministic)), runs_dir=project.runs_dir)
    assert {r.evaluator for r in outcome.results} == {"mentions"}

    judged = [{"name": "names_alpha", "type": "llm_judge", "rubric": "The answer names alpha."}]
    with pytest.raises(RunConfigError) as caught:
        run_eval(project.write(_config(project, judge, judged)), runs_dir=project.runs_dir)
    assert str(caught.value) == (
        f"{project.eval_path}: judge.api_key: environment variable EVALTRACE_TEST_UNSET_JUDGE_KEY is not set"
    )


def test_an_entry_judge_without_any_model_is_an_error(project: Project) -> None:
    evaluators = [{"name": "j", "type": "llm_judge", "rubric": "r", "judge": {"temperature": 0}}]
    config = _config(project, {"model": "m"}, evaluators)
    del config["judge"]
    with pytest.raises(RunConfigError) as caught:
        run_eval(project.write(config), runs_dir=project.runs_dir)
    assert str(caught.value) == f"{project.eval_path}: evaluators[0].judge.model: required key is missing"
