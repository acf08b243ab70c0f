"""An offline run closes its judges' HTTP clients: nothing is left to the garbage collector of a keep-alive endpoint."""

from __future__ import annotations

import gc
import time
import warnings
from typing import Any

from evaltrace.runner import run_eval
from judge_server import JudgeServer, serve_judge

from .conftest import Project


def _verdict(body: dict[str, Any]) -> dict[str, Any]:
    return {"score": 5, "reason": "fine"}


def _run(project: Project, judge: JudgeServer) -> list[warnings.WarningMessage]:
    config = {
        "name": "judged",
        "systems": [{"name": "v1", "adapter": "python_function", "config": {"target": project.target("answer")}}],
        "judge": {"model": "judge-small", "base_url": judge.url, "api_key": "k"},
        "evaluators": [
            {"name": "names_alpha", "type": "llm_judge", "rubric": "The answer names alpha.", "scale": [1, 5]},
            {"name": "second", "type": "llm_judge", "rubric": "Says alpha.", "scale": [1, 5]},
        ],
    }
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        outcome = run_eval(project.write(config), runs_dir=project.runs_dir)
        assert {r.status for r in outcome.results} == {"completed", "skipped"}  # c3's system raised: nothing to judge
        del outcome
        gc.collect()  # whatever was left open is finalised here, warning as it goes
    return [w for w in caught if issubclass(w.category, ResourceWarning)]


def test_a_run_closes_its_judges_connections_to_a_keep_alive_endpoint(project: Project) -> None:
    with serve_judge(_verdict, keep_alive=True) as judge:
        leaks = _run(project, judge)
        assert judge.count() == 4  # 2 answered cases x 2 judge evaluators, over connections kept alive
        deadline = time.monotonic() + 10  # the server's handler threads see the client's FIN asynchronously
        while judge.connections and time.monotonic() < deadline:
            time.sleep(0.01)
        assert judge.connections == 0
    assert not leaks, [str(w.message) for w in leaks]


def test_a_run_closes_the_likelihood_evaluators_connections_to_a_keep_alive_endpoint(project: Project) -> None:
    """The likelihood evaluators (perplexity, GPTScore: ``Judge.prompt_logprobs``) ask the ``judge:`` block's
    completions endpoint on their own loops: their clients are closed as the chat judges' are. The code path of
    ``e2e_llm/test_logprobs_real_model.py``, here against a keep-alive endpoint on 127.0.0.1."""
    with serve_judge(_verdict, keep_alive=True) as judge:
        config = {
            "name": "likelihood",
            "systems": [{"name": "v1", "adapter": "python_function", "config": {"target": project.target("answer")}}],
            "judge": {"model": "judge-small", "base_url": judge.url, "api_key": "k"},
            "evaluators": [
                {"name": "perplexity", "type": "perplexity"},
                {"name": "perplexity_again", "type": "perplexity"},  # a second loop, a second client
            ],
        }
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            outcome = run_eval(project.write(config), runs_dir=project.runs_dir)
            completed = [r for r in outcome.results if r.status == "completed"]
            assert len(completed) == 4, [(r.case_id, r.evaluator, r.status, r.error) for r in outcome.results]
            del outcome, completed
            gc.collect()
        leaks = [w for w in caught if issubclass(w.category, ResourceWarning)]
        assert {r["path"] for r in judge.requests} == {"/v1/completions"}
        deadline = time.monotonic() + 10  # the server's handler threads see the client's FIN asynchronously
        while judge.connections and time.monotonic() < deadline:
            time.sleep(0.01)
        assert judge.connections == 0
    assert not leaks, [str(w.message) for w in leaks]
