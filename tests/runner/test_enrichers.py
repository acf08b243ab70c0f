"""TraceEnrichers: each case's trace is enriched before it is saved; a failing enricher never fails the run and
leaves a structured ``enrichment_errors`` entry instead."""

from __future__ import annotations

import json
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from evaltrace.cli import main
from evaltrace.runner import RunConfigError, TraceEnricher, run_eval
from evaltrace.schema import Trace

from .conftest import Project

ENRICHERS_SOURCE = '''
import time

COSTS = {"q1": 0.25, "q2": 0.5}


class UpstreamCost:
    """Reads the cost the platform billed for the trace (here a table) and adds it."""

    name = "upstream_cost"

    def __init__(self, currency: str = "usd"):
        self.currency = currency

    def enrich(self, trace):
        cost = COSTS.get(trace.input.get("question"))
        if cost is None:
            return None  # nothing known upstream: the trace is left as it is
        metrics = trace.metrics.model_copy(update={"cost_usd": cost})
        extra = {**trace.extra, "upstream": {"trace_id": trace.extra.get("trace_id"), "currency": self.currency}}
        return trace.model_copy(update={"metrics": metrics, "extra": extra})


def tag(trace):
    return trace.model_copy(update={"extra": {**trace.extra, "tagged": True}})


def broken(trace):
    raise ConnectionError("platform down")


def liar(trace):
    return trace.model_copy(update={"case_id": "someone else"})


def not_a_trace(trace):
    return {"cost": 1}


def hangs(trace):
    time.sleep(5)
'''


def _project(project: Project, enrichers: list[dict[str, Any]]) -> Path:
    module = f"enrich_{project.module}"  # this project's own module name: another test's may still be imported
    (project.root / f"{module}.py").write_text(textwrap.dedent(ENRICHERS_SOURCE))
    return project.write({
        "name": "enriched",
        "variants": [{"name": "v", "adapter": "python_function", "config": {"target": project.target("answer")}}],
        "evaluators": [{"import": f"{project.probe}:answer_mentions_question"}],
        "enrichers": [{**e, "import": f"{module}:{e['import']}"} for e in enrichers],
    })  # fmt: skip


def _saved(outcome_path: Path) -> dict[str, dict[str, Any]]:
    lines = [json.loads(line) for line in (outcome_path / "traces.jsonl").read_text().splitlines()]
    return {line["case_id"]: line for line in lines}


def test_enrichers_add_to_each_trace_before_it_is_saved(project: Project) -> None:
    path = _project(project, [{"import": "UpstreamCost", "currency": "eur"}, {"import": "tag"}])
    outcome = run_eval(path, runs_dir=project.runs_dir)
    saved = _saved(outcome.run.path)
    assert saved["c1"]["metrics"]["cost_usd"] == 0.25 and saved["c2"]["metrics"]["cost_usd"] == 0.5
    assert saved["c1"]["extra"]["upstream"] == {"trace_id": saved["c1"]["extra"]["trace_id"], "currency": "eur"}
    assert all(line["extra"]["tagged"] is True for line in saved.values())  # in order, each on the last's output
    assert saved["c3"]["metrics"]["cost_usd"] is None  # None from the enricher: unchanged
    assert all("enrichment_errors" not in line["extra"] for line in saved.values())
    assert outcome.summary.variants[0].avg_cost_usd is not None  # the summary sees the enriched cost


def test_a_failing_enricher_is_recorded_and_never_fails_the_run(project: Project) -> None:
    enrichers = [
        {"import": "broken"},
        {"import": "liar", "name": "rewrites_the_case"},
        {"import": "not_a_trace"},
        {"import": "hangs", "timeout_s": 0.2},
        {"import": "tag"},
    ]
    started = time.monotonic()
    assert main(["run", str(_project(project, enrichers)), "--runs-dir", str(project.runs_dir), "--no-progress"]) == 0
    assert time.monotonic() - started < 4.5  # the hung enricher was abandoned, not waited for 5 s a case
    run = next(p for p in project.runs_dir.iterdir() if p.is_dir())
    saved = _saved(run)
    assert set(saved) == {"c1", "c2", "c3"}
    for line in saved.values():
        assert line["extra"]["tagged"] is True  # the enricher after the failures still ran
        assert line["extra"]["enrichment_errors"] == [
            {"enricher": "broken", "error": "ConnectionError: platform down"},
            {"enricher": "rewrites_the_case", "error": "ValueError: changed case_id: an enricher adds to a trace,"
             " it is the same cell"},
            {"enricher": "not_a_trace", "error": "TypeError: returned dict, not a Trace"},
            {"enricher": "hangs", "error": "TimeoutError: no answer within 0.2 s"},
        ]  # fmt: skip
    assert {line["case_id"] for line in saved.values()} == {"c1", "c2", "c3"}
    assert Trace.model_validate(saved["c1"]).extra["enrichment_errors"][0]["enricher"] == "broken"


def test_enricher_objects_from_python(project: Project) -> None:
    class Marker:
        name = "marker"

        def enrich(self, trace: Trace) -> Trace:
            return trace.model_copy(update={"extra": {**trace.extra, "marked": trace.case_id}})

    assert isinstance(Marker(), TraceEnricher)
    outcome = run_eval(_project(project, []), runs_dir=project.runs_dir, enrichers=[Marker()])
    assert {t.case_id: t.extra["marked"] for t in outcome.traces} == {"c1": "c1", "c2": "c2", "c3": "c3"}


@pytest.mark.parametrize(
    ("entry", "where"),
    [
        ({"import": "nowhere:thing"}, "enrichers[0]"),
        ({"import": "UpstreamCost", "colour": "red"}, "enrichers[0]"),
        ({"import": "tag", "timeout_s": 0}, "enrichers[0].timeout_s"),
        ({"name": "x"}, "enrichers[0]"),
    ],
)
def test_a_bad_enricher_entry_is_a_config_error(project: Project, entry: dict[str, Any], where: str) -> None:
    path = _project(project, [])
    text = path.read_text().replace("enrichers: []", "enrichers: " + json.dumps([entry]))
    if "import" in entry and ":" not in entry["import"]:
        text = text.replace(f'"{entry["import"]}"', f'"enrich_{project.module}:{entry["import"]}"')
    path.write_text(text)
    with pytest.raises(RunConfigError, match=rf"{where.replace('[', '.').replace(']', '.')}"):
        run_eval(path, runs_dir=project.runs_dir)
    assert not project.runs_dir.exists()
