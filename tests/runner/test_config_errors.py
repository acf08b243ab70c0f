"""Malformed eval.yaml / cases.yaml: a RunConfigError naming the file, the entry and the problem; CLI exit 2."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from evaltrace.cli import main
from evaltrace.runner import RunConfigError, load_eval_config, run_eval

from .conftest import Project


def _fn(project: Project, **config: Any) -> dict[str, Any]:
    return {"name": "v", "adapter": "python_function", "config": {"target": project.target("answer"), **config}}


CONFIG_CASES: list[tuple[str, Any, str, str]] = [
    # (id, eval.yaml content or a callable of the project, entry named, problem text)
    ("top_level_list", ["a"], "", "expected a mapping at the top level"),
    ("unknown_key", {"name": "x", "variantz": []}, "variantz", "unknown key"),
    ("bad_name", {"name": "has space", "variants": []}, "name", "expected a name"),
    ("no_cases", {"name": "x", "cases": None}, "cases", "path of a cases.yaml"),
    ("no_variants", {"name": "x", "variants": []}, "variants", "non-empty list of variants"),
    ("variant_not_mapping", {"name": "x", "variants": ["v1"]}, "variants[0]", "expected a mapping"),
    ("missing_adapter", {"name": "x", "variants": [{"name": "v"}]}, "variants[0].adapter", "Field required"),
    (
        "unknown_adapter",
        {"name": "x", "variants": [{"name": "v", "adapter": "grpc"}]},
        "variants[0].adapter",
        "unknown adapter 'grpc'; known: http, python_function",
    ),
    (
        "target_missing",
        {"name": "x", "variants": [{"name": "v", "adapter": "python_function"}]},
        "variants[0].config.target",
        "expected 'module:function'",
    ),
    (
        "target_unimportable",
        {
            "name": "x",
            "variants": [{"name": "v", "adapter": "python_function", "config": {"target": "no_such_module_xyz:f"}}],
        },
        "variants[0].config.target",
        "cannot import module 'no_such_module_xyz'",
    ),
    (
        "http_bad_url",
        {"name": "x", "variants": [{"name": "v", "adapter": "http", "config": {"url": "ftp://h"}}]},
        "variants[0].config.url",
        "expected an http(s) URL",
    ),
    (
        "http_env_unset",
        {
            "name": "x",
            "variants": [
                {
                    "name": "v",
                    "adapter": "http",
                    "config": {
                        "url": "http://127.0.0.1:9",
                        "headers": {"Authorization": "Bearer ${EVALTRACE_TEST_UNSET_VAR}"},
                    },
                }
            ],
        },
        "variants[0].config.headers.Authorization",
        "environment variable EVALTRACE_TEST_UNSET_VAR is not set",
    ),
    ("duplicate_variant", "dup", "variants[1].name", "duplicate variant name 'v'"),
    ("unknown_evaluator", "unknown_eval", "evaluators[0]", "unknown evaluator 'no_such_metric'"),
    ("evaluator_both_keys", "both_keys", "evaluators[0]", "exactly one of 'name' or 'import'"),
    ("evaluator_bad_option", "bad_option", "evaluators[0]", "cannot build the evaluator"),
    ("baseline_unknown", "bad_baseline", "baseline", "'nope' is not one of the variants"),
    ("concurrency_zero", "zero_concurrency", "concurrency", "expected a positive integer"),
]


def _content(project: Project, content: Any) -> Any:
    variant = _fn(project)
    special = {
        "dup": {"name": "x", "variants": [variant, variant]},
        "unknown_eval": {"name": "x", "variants": [variant], "evaluators": [{"name": "no_such_metric"}]},
        "both_keys": {"name": "x", "variants": [variant], "evaluators": [{"name": "regex", "import": "m:f"}]},
        "bad_option": {"name": "x", "variants": [variant], "evaluators": [{"name": "latency", "bogus": 1}]},
        "bad_baseline": {"name": "x", "variants": [variant], "baseline": "nope"},
        "zero_concurrency": {"name": "x", "variants": [variant], "concurrency": 0},
    }
    if isinstance(content, str):
        return {"cases": "cases.yaml", **special[content]}
    if isinstance(content, dict):
        return {"cases": "cases.yaml", "variants": [variant], **content}
    return content


@pytest.mark.parametrize(
    ("content", "entry", "problem"), [c[1:] for c in CONFIG_CASES], ids=[c[0] for c in CONFIG_CASES]
)
def test_malformed_eval_yaml(project: Project, content: Any, entry: str, problem: str) -> None:
    project.eval_path.write_text(yaml.safe_dump(_content(project, content), sort_keys=False))
    with pytest.raises(RunConfigError) as caught:
        run_eval(project.eval_path, runs_dir=project.runs_dir)
    message = str(caught.value)
    assert message.startswith(str(project.eval_path))
    assert caught.value.entry == entry
    assert problem in message
    assert not project.runs_dir.exists()  # nothing ran, no run directory


CASES_ERRORS: list[tuple[str, str, str, str]] = [
    ("not_yaml", "- id: [unclosed", "", "not valid YAML"),
    ("empty", "[]", "", "non-empty list of cases"),
    ("entry_not_mapping", "- just text", "cases[0]", "expected a mapping"),
    ("missing_id", "- id: a\n- input: {q: 1}", "cases[1].id", "Field required"),
    ("bad_expected", "- id: a\n  expected: {must_call_tools: 3}", "cases[0].expected.must_call_tools", "list"),
    ("duplicate_id", "- id: a\n- id: a", "cases[1].id", "duplicate case id 'a'"),
]


@pytest.mark.parametrize(("text", "entry", "problem"), [c[1:] for c in CASES_ERRORS], ids=[c[0] for c in CASES_ERRORS])
def test_malformed_cases_yaml(project: Project, text: str, entry: str, problem: str) -> None:
    project.write({"name": "x", "variants": [_fn(project)]})
    (project.root / "cases.yaml").write_text(text)
    with pytest.raises(RunConfigError) as caught:
        load_eval_config(project.eval_path)
    assert caught.value.path == project.root / "cases.yaml"
    assert caught.value.entry == entry
    assert problem in str(caught.value)


def test_missing_files_are_named(tmp_path: Path) -> None:
    with pytest.raises(RunConfigError, match="eval.yaml: cannot read the file"):
        load_eval_config(tmp_path / "eval.yaml")
    (tmp_path / "eval.yaml").write_text("name: x\ncases: nowhere.yaml\nvariants: [{name: v, adapter: http}]\n")
    with pytest.raises(RunConfigError, match="nowhere.yaml: cannot read the file"):
        load_eval_config(tmp_path / "eval.yaml")


def test_cli_prints_the_error_and_exits_2(project: Project, capsys: pytest.CaptureFixture[str]) -> None:
    project.write({"name": "x", "variants": [{"name": "v", "adapter": "grpc"}]})
    code = main(["run", str(project.eval_path), "--runs-dir", str(project.runs_dir), "--no-progress"])
    captured = capsys.readouterr()
    assert code == 2
    assert "variants[0].adapter: unknown adapter 'grpc'" in captured.err.replace("\n", "")
    assert "Traceback" not in captured.err + captured.out
