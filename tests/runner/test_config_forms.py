"""The spec's eval.yaml shapes: `systems:` (alias `variants:`), `{name, type}` evaluators, `field:`, `output:`."""

from __future__ import annotations

from typing import Any

import pytest

from evaltrace.runner import RunConfigError, load_eval_config, re_evaluate, run_eval
from evaltrace.runner.config_models import OutputConfig
from evaltrace.runner.evaluate import build_evaluators

from .conftest import Project


def _system(project: Project, name: str = "v1", function: str = "answer") -> dict[str, Any]:
    return {"name": name, "adapter": "python_function", "config": {"target": project.target(function)}}


@pytest.mark.parametrize("key", ["systems", "variants"])
def test_systems_and_its_alias_variants_give_the_same_run(project: Project, key: str) -> None:
    path = project.write(
        {"name": "alias", key: [_system(project), _system(project, "v2", "answer_wrong")], "baseline": "v1"}
    )
    config = load_eval_config(path)
    assert [v.name for v in config.variants] == ["v1", "v2"]
    assert config.variants_key == key
    outcome = run_eval(path, runs_dir=project.runs_dir)
    assert {t.variant_name for t in outcome.traces} == {"v1", "v2"}
    assert outcome.summary.comparison is not None and outcome.summary.comparison.baseline == "v1"
    # A re-evaluation reads the variant order back from the run's config.yaml, whichever key it used.
    again = re_evaluate(outcome.run)
    assert [v.name for v in again.summary.variants] == ["v1", "v2"]


def test_adapter_errors_name_the_key_the_systems_were_written_under(project: Project) -> None:
    bad = {"name": "v", "adapter": "python_function", "config": {"target": f"{project.module}:no_such_function"}}
    project.write({"name": "x", "systems": [_system(project), bad]})
    with pytest.raises(RunConfigError) as caught:
        run_eval(project.eval_path, runs_dir=project.runs_dir)
    assert caught.value.entry == "systems[1].config.target"
    assert "has no attribute 'no_such_function'" in str(caught.value)


def test_name_is_the_result_name_and_type_the_catalogue_type(project: Project) -> None:
    path = project.write(
        {
            "name": "forms",
            "systems": [_system(project)],
            "evaluators": [
                {"name": "mentions_alpha", "type": "contains_text", "args": ["alpha"]},  # spec form
                {"name": "tool_called"},  # legacy: the name is the catalogue type
                {"name": "not_contains", "as": "no_gamma", "args": ["gamma"]},  # legacy with a result name
                {"import": f"{project.probe}:answer_mentions_question", "name": "echoes"},  # imported, named
            ],
        }
    )
    outcome = run_eval(path, runs_dir=project.runs_dir)
    seen = {(r.evaluator, r.evaluator_type) for r in outcome.results}
    assert seen == {
        ("mentions_alpha", "contains_text"),
        ("tool_called", "tool_called"),
        ("no_gamma", "not_contains"),
        ("echoes", "function"),  # an import has no catalogue type: the evaluator's own kind stays
    }
    by_cell = {(r.case_id, r.evaluator): r for r in outcome.results}
    assert by_cell[("c1", "mentions_alpha")].passed is True  # "q1: alpha"
    assert by_cell[("c2", "mentions_alpha")].passed is False  # "q2: beta"
    assert by_cell[("c1", "echoes")].passed is True


def test_field_goes_to_evaluators_that_take_it(project: Project) -> None:
    entries = [
        {"name": "shows_work", "type": "contains_text", "args": ["carry"], "field": "output.thinking"},
        {"name": "plain", "type": "contains_text", "args": ["carry"]},
    ]
    built = build_evaluators(entries, project.eval_path)
    assert [b.name for b in built] == ["shows_work", "plain"]
    assert [b.evaluator.field for b in built] == ["output.thinking", "output.final_answer"]
    assert [b.evaluator_type for b in built] == ["contains_text", "contains_text"]


def test_a_field_that_names_no_part_of_a_trace_stops_the_build(project: Project) -> None:
    entries = [{"name": "x", "type": "contains_text", "args": ["a"], "field": "output.answer"}]
    with pytest.raises(RunConfigError) as caught:
        build_evaluators(entries, project.eval_path)
    assert caught.value.entry == "evaluators[0]"
    assert "cannot build the evaluator" in str(caught.value)


def test_outputs_are_validated_and_typed(project: Project) -> None:
    path = project.write(
        {
            "name": "stores",
            "systems": [_system(project)],
            "output": [
                {"type": "local_files", "path": "runs"},
                {"type": "sqlite", "path": "runs.db", "run_namespace": {"project": "shop", "version": 2}},
                {"type": "postgres", "dsn": "${EVALTRACE_TEST_DSN}", "run_namespace": {"branch": "main"}},
            ],
        }
    )
    config = load_eval_config(path)
    assert config.outputs == [
        OutputConfig(type="local_files", path="runs"),
        OutputConfig(type="sqlite", path="runs.db", run_namespace={"project": "shop", "version": "2"}),
        OutputConfig(type="postgres", dsn="${EVALTRACE_TEST_DSN}", run_namespace={"branch": "main"}),
    ]
    assert config.raw["output"][2]["dsn"] == "${EVALTRACE_TEST_DSN}"  # never expanded by loading


def test_workspace_and_metadata_reach_the_variant(project: Project) -> None:
    system = {**_system(project), "metadata": {"prompt": "v2"}, "workspace": {"kind": "tempdir_snapshot", "path": "."}}
    config = load_eval_config(project.write({"name": "ws", "systems": [system]}))
    variant = config.variants[0]
    assert variant.metadata == {"prompt": "v2"}
    assert variant.workspace is not None and variant.workspace.kind == "tempdir_snapshot"
    assert variant.config == {"target": project.target("answer")}  # as written: no defaults filled in
