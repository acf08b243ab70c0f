"""Evaluator option values are checked at load against the constructor's annotations, not only their keys.

``latency: {max_ms: fast}`` used to load, error on every evaluation and let the gate pass; now the run stops before
anything is called, naming the file, the path, the expected type and the value.
"""

from __future__ import annotations

import inspect
import textwrap
from pathlib import Path
from typing import Any

import pytest

from evaltrace._internal.value_types import first_mismatch, parameter_hints
from evaltrace.cli import main
from evaltrace.evaluators.catalogue import CATALOGUE
from evaltrace.runner import RunConfigError
from evaltrace.runner.evaluate import build_evaluators

from .conftest import Project

BAD_VALUES: list[tuple[str, dict[str, Any], str]] = [
    # (id, evaluator entry, the exact message after "<file>: ")
    (
        "number_given_text",
        {"name": "fast", "type": "latency", "max_ms": "fast"},
        "evaluators[0].max_ms: expected float | None, got 'fast' (max_ms of latency)",
    ),
    (
        "legacy_form",
        {"name": "latency", "max_first_token_ms": [1]},
        "evaluators[0].max_first_token_ms: expected float | None, got [1] (max_first_token_ms of latency)",
    ),
    (
        "integer_given_fraction",
        {"name": "loops", "type": "tool_loop", "max_repeats": 2.5},
        "evaluators[0].max_repeats: expected int, got 2.5 (max_repeats of tool_loop)",
    ),
    (
        "integer_given_bool",
        {"name": "steps", "type": "step_budget", "max_tool_calls": True},
        "evaluators[0].max_tool_calls: expected int | None, got True (max_tool_calls of step_budget)",
    ),
    (
        "bool_given_text",
        {"name": "r", "type": "rouge", "use_stemmer": "yes"},
        "evaluators[0].use_stemmer: expected bool, got 'yes' (use_stemmer of rouge)",
    ),
    (
        "literal",
        {"name": "r", "type": "rouge", "rouge_type": "rouge9"},
        "evaluators[0].rouge_type: expected Literal['rouge1', 'rouge2', 'rougeL'], got 'rouge9' (rouge_type of rouge)",
    ),
    (
        "nested_mapping_item",
        {"name": "sane", "type": "agent_sanity", "required_keys": {"report.json": ["title", 3]}},
        "evaluators[0].required_keys.report.json[1]: expected str, got 3 (in required_keys of agent_sanity, which"
        " takes Mapping[str, Sequence[str]] | None)",
    ),
    (
        "nested_tuple_item",
        {"name": "j", "type": "llm_judge", "rubric": "helpful", "scale": [0, "ten"]},
        "evaluators[0].scale[1]: expected float, got 'ten' (in scale of llm_judge, which takes tuple[float, float])",
    ),
    (
        "list_given_text",
        {"name": "pii", "type": "pii_leakage", "fields": "output.final_answer"},
        "evaluators[0].fields: expected Sequence[str], got 'output.final_answer' (fields of pii_leakage)",
    ),
    (
        "positional_args",
        {"name": "c", "type": "contains_text", "args": ["refund", 42]},
        "evaluators[0].args[1]: expected str, got 42 (texts of contains_text)",
    ),
]


def _build(project: Project, entries: list[dict[str, Any]]) -> list[Any]:
    return build_evaluators(entries, project.eval_path, base_dir=project.root)


@pytest.mark.parametrize(("entry", "message"), [c[1:] for c in BAD_VALUES], ids=[c[0] for c in BAD_VALUES])
def test_a_value_the_constructor_does_not_take_is_named_at_load(
    project: Project, entry: dict[str, Any], message: str
) -> None:
    with pytest.raises(RunConfigError) as caught:
        _build(project, [entry])
    assert str(caught.value) == f"{project.eval_path}: {message}"


def test_good_values_still_load(project: Project) -> None:
    built = _build(
        project,
        [
            {"name": "fast", "type": "latency", "max_ms": 2000},  # an int where a float is annotated
            {"name": "j", "type": "llm_judge", "rubric": "helpful", "scale": [1, 5]},  # a list for a tuple
            {"name": "sane", "type": "agent_sanity", "root": ".", "required_keys": {"a.json": ["x"]}},  # str -> Path
            {"name": "r", "type": "rouge", "rouge_type": "rouge1", "use_stemmer": False},
            {"name": "pii", "type": "pii_leakage", "allow": ["email"]},  # Iterable[str]
        ],
    )
    assert [b.name for b in built] == ["fast", "j", "sane", "r", "pii"]


def _checked_parameters() -> list[tuple[str, str]]:
    rows = []
    for kind, cls in sorted(CATALOGUE.items()):
        hints = parameter_hints(cls)
        for parameter in inspect.signature(cls).parameters.values():
            if parameter.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
                continue
            if parameter.name in ("judge", "field") or parameter.name not in hints:
                continue
            if first_mismatch(hints[parameter.name], {"not": "a valid value"}) is not None:
                rows.append((kind, parameter.name))
    return rows


CHECKED = _checked_parameters()


def test_every_built_in_evaluator_has_its_options_checked() -> None:
    # Sanity of the sweep below: it covers every catalogue evaluator with an annotated option.
    assert {"latency", "cost", "rouge", "tool_loop", "agent_sanity", "llm_judge"} <= {k for k, _ in CHECKED}
    assert len(CHECKED) > 60


@pytest.mark.parametrize(("kind", "option"), CHECKED, ids=[f"{k}.{o}" for k, o in CHECKED])
def test_every_built_in_option_is_type_checked(project: Project, kind: str, option: str) -> None:
    with pytest.raises(RunConfigError) as caught:
        _build(project, [{"name": "e", "type": kind, option: {"not": "a valid value"}}])
    assert caught.value.entry in (f"evaluators[0].{option}", f"evaluators[0].{option}.not")  # or the item at fault
    assert caught.value.problem.startswith("expected ")
    assert "got {'not': 'a valid value'}" in caught.value.problem or "got 'a valid value'" in caught.value.problem


CUSTOM = """
from collections.abc import Mapping, Sequence
from typing import Literal


class Graded:
    name = "graded"

    def __init__(self, levels: Mapping[str, float], *, mode: Literal["strict", "lenient"] = "strict",
                 tags: Sequence[str] = ()) -> None:
        self.levels = levels

    def evaluate(self, trace, case):
        return True


def scored(trace, case):
    return True
"""


@pytest.fixture
def custom(project: Project) -> str:
    module = f"{project.probe}_custom"
    (project.root / f"{module}.py").write_text(textwrap.dedent(CUSTOM))
    return module


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {"levels": {"good": "high"}},
            "evaluators[0].levels.good: expected float, got 'high' (in levels of {ref}, which takes"
            " Mapping[str, float])",
        ),
        ({"levels": {}, "mode": "loose"}, "evaluators[0].mode: expected Literal['strict', 'lenient'], got 'loose'"),
        ({"levels": {}, "tags": ["a", None]}, "evaluators[0].tags[1]: expected str, got None"),
    ],
)
def test_custom_evaluator_classes_are_checked_by_their_annotations(
    project: Project, custom: str, options: dict[str, Any], message: str
) -> None:
    ref = f"{custom}:Graded"
    with pytest.raises(RunConfigError) as caught:
        _build(project, [{"import": ref, **options}])
    assert str(caught.value).startswith(f"{project.eval_path}: {message.format(ref=ref)}")


def test_imported_function_options_are_checked_against_the_decorator(project: Project, custom: str) -> None:
    # A plain function is wrapped with @evaltrace.evaluator: its options are that decorator's, annotations included.
    with pytest.raises(RunConfigError) as caught:
        _build(project, [{"import": f"{custom}:scored", "threshold": "high"}])
    assert caught.value.entry == "evaluators[0].threshold"
    assert "got 'high'" in caught.value.problem


def test_run_stops_before_calling_the_system(project: Project, capsys: pytest.CaptureFixture[str]) -> None:
    project.write(
        {
            "name": "typed",
            "variants": [{"name": "v", "adapter": "python_function", "config": {"target": project.target("answer")}}],
            "evaluators": [{"name": "tool_called"}, {"name": "latency", "max_ms": "fast"}],
        }
    )
    args = ["run", str(project.eval_path), "--runs-dir", str(project.runs_dir), "--no-progress"]
    assert main([*args, "--fail-on-regression"]) == 2
    captured = capsys.readouterr()
    assert f"{project.eval_path}: evaluators[1].max_ms: expected float | None, got 'fast'" in captured.err
    assert "Traceback" not in captured.err + captured.out
    assert not project.runs_dir.exists()  # nothing ran


def test_environment_references_are_read_as_the_annotated_type(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An environment variable is text: a whole ${VAR} value is read as the option's type, then checked.
    monkeypatch.setenv("EVALTRACE_TEST_MAX_MS", "500")
    (built,) = _build(project, [{"name": "l", "type": "latency", "max_ms": "${EVALTRACE_TEST_MAX_MS}"}])
    assert built.evaluator.max_ms == 500.0
    monkeypatch.setenv("EVALTRACE_TEST_MAX_MS", "fast")
    with pytest.raises(RunConfigError) as caught:
        _build(project, [{"name": "l", "type": "latency", "max_ms": "${EVALTRACE_TEST_MAX_MS}"}])
    assert caught.value.entry == "evaluators[0].max_ms"
    assert caught.value.problem == "expected float | None, got 'fast' (max_ms of latency)"


def test_other_files_are_named_too(tmp_path: Path) -> None:
    with pytest.raises(RunConfigError) as caught:
        build_evaluators([{"name": "cost", "max_usd": "ten"}], tmp_path / "other.yaml")
    assert str(caught.value) == (
        f"{tmp_path / 'other.yaml'}: evaluators[0].max_usd: expected float, got 'ten' (max_usd of cost)"
    )
