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
    # (id, eval.yaml content or a key of _special, entry named, the exact problem)
    ("top_level_list", ["a"], "", "expected a mapping at the top level"),
    ("bad_name", {"name": "has space"}, "name", "expected a name of letters, digits, '_', '-' or '.', got 'has space'"),
    ("no_cases", {"cases": None}, "cases", "expected the path of a cases.yaml file, got None"),
    ("no_systems", {"variants": None}, "systems", "expected a non-empty list of systems"),
    ("empty_variants", {"variants": []}, "variants", "expected a non-empty list of variants"),
    ("variant_not_mapping", {"variants": ["v1"]}, "variants[0]", "expected a mapping, got 'v1'"),
    ("missing_adapter", {"variants": [{"name": "v"}]}, "variants[0].adapter", "required key is missing"),
    (
        "unknown_adapter",
        {"variants": [{"name": "v", "adapter": "grpc"}]},
        "variants[0].adapter",
        "unknown adapter 'grpc'; known: http, python_function",
    ),
    (
        "unknown_adapter_systems",
        {"systems": [{"name": "v", "adapter": "grpc"}]},
        "systems[0].adapter",
        "unknown adapter 'grpc'; known: http, python_function",
    ),
    (
        "target_missing",
        {"variants": [{"name": "v", "adapter": "python_function"}]},
        "variants[0].config.target",
        "required key is missing",
    ),
    (
        "target_unimportable",
        {"variants": [{"name": "v", "adapter": "python_function", "config": {"target": "no_such_module_xyz:f"}}]},
        "variants[0].config.target",
        # {root}: the project directory, named among the directories searched.
        "cannot import module 'no_such_module_xyz': no module named 'no_such_module_xyz' (searched {root} and the"
        " installed packages); add `pythonpath:` to eval.yaml or run from the project root",
    ),
    (
        "negative_timeout",
        {"variants": [{"name": "v", "adapter": "python_function", "config": {"target": "m:f", "timeout_s": -1}}]},
        "variants[0].config.timeout_s",
        "expected a number greater than 0, got -1",
    ),
    (
        "http_bad_url",
        {"variants": [{"name": "v", "adapter": "http", "config": {"url": "ftp://h"}}]},
        "variants[0].config.url",
        "expected an http(s) URL, got 'ftp://h'",
    ),
    (
        "http_bad_method",
        {"systems": [{"name": "v", "adapter": "http", "config": {"url": "http://h", "method": "DELETE"}}]},
        "systems[0].config.method",
        "expected one of GET, PATCH, POST, PUT, got 'DELETE'",
    ),
    (
        "http_env_unset",
        {
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
    ("both_aliases", "both_aliases", "variants", "is an alias of systems; give one of them, not both"),
    ("duplicate_variant", "dup", "variants[1].name", "duplicate variant name 'v'"),
    (
        "bad_variant_name",
        "bad_variant_name",
        "variants[0].name",
        "'a b' is not a valid system name (letters, digits, '_', '-', '.')",
    ),
    (
        "unknown_evaluator",
        "unknown_eval",
        "evaluators[0].name",
        "unknown evaluator 'no_such_metric'; see docs/evaluators.md for the catalogue",
    ),
    (
        "evaluator_near_name",
        "near_eval",
        "evaluators[0].type",
        "unknown evaluator 'contain_text'; did you mean contains_text?",
    ),
    (
        "evaluator_type_and_import",
        "both_keys",
        "evaluators[0].type",
        "give either type (a catalogue evaluator) or import, not both",
    ),
    (
        "evaluator_no_form",
        "no_form",
        "evaluators[0]",
        "expected 'type' (a catalogue name) or 'import' ('module:object')",
    ),
    (
        "evaluator_missing_arg",
        "missing_arg",
        "evaluators[0]",
        "cannot build the evaluator: Regex needs at least one pattern",
    ),
    ("baseline_unknown", "bad_baseline", "baseline", "'nope' is not one of the variants"),
    ("concurrency_zero", "zero_concurrency", "concurrency", "expected a number greater than 0, got 0"),
    ("judge_without_model", "judge_no_model", "judge.model", "required key is missing"),
]


def _special(project: Project, key: str) -> dict[str, Any]:
    variant = _fn(project)
    evaluators = {
        "unknown_eval": [{"name": "no_such_metric"}],
        "near_eval": [{"name": "mentions", "type": "contain_text"}],
        "both_keys": [{"name": "r", "type": "regex", "import": "m:f"}],
        "no_form": [{"args": ["x"]}],
        "missing_arg": [{"name": "r", "type": "regex"}],
    }
    if key in evaluators:
        return {"name": "x", "variants": [variant], "evaluators": evaluators[key]}
    return {
        "both_aliases": {"name": "x", "systems": [variant], "variants": [variant]},
        "dup": {"name": "x", "variants": [variant, variant]},
        "bad_variant_name": {"name": "x", "variants": [{**variant, "name": "a b"}]},
        "bad_baseline": {"name": "x", "variants": [variant], "baseline": "nope"},
        "zero_concurrency": {"name": "x", "variants": [variant], "concurrency": 0},
        "judge_no_model": {"name": "x", "variants": [variant], "judge": {"base_url": "http://127.0.0.1:9/v1"}},
    }[key]


def _content(project: Project, content: Any) -> Any:
    if isinstance(content, str):
        return {"cases": "cases.yaml", **_special(project, content)}
    if isinstance(content, dict):
        systems = {} if {"systems", "variants"} & set(content) else {"variants": [_fn(project)]}
        return {"name": "x", "cases": "cases.yaml", **systems, **content}
    return content


def _error_of(project: Project, config: Any) -> RunConfigError:
    project.eval_path.write_text(yaml.safe_dump(config, sort_keys=False))
    with pytest.raises(RunConfigError) as caught:
        run_eval(project.eval_path, runs_dir=project.runs_dir)
    assert not project.runs_dir.exists()  # nothing ran, no run directory
    return caught.value


@pytest.mark.parametrize(
    ("content", "entry", "problem"), [c[1:] for c in CONFIG_CASES], ids=[c[0] for c in CONFIG_CASES]
)
def test_malformed_eval_yaml(project: Project, content: Any, entry: str, problem: str) -> None:
    error = _error_of(project, _content(project, content))
    assert error.entry == entry
    problem = problem.replace("{root}", str(project.root.resolve()))
    assert str(error) == (f"{project.eval_path}: {entry}: {problem}" if entry else f"{project.eval_path}: {problem}")


def _system(**overrides: Any) -> dict[str, Any]:
    return {"name": "s", "adapter": "python_function", "config": {"target": "m:f"}, **overrides}


def _http(**config: Any) -> dict[str, Any]:
    return {"name": "h", "adapter": "http", "config": {"url": "http://127.0.0.1:9", **config}}


UNKNOWN_KEYS: list[tuple[str, dict[str, Any], str]] = [
    # (id, eval.yaml beyond name/cases, the exact message after "<file>: ")
    ("top_level", {"systems": [_system()], "concurency": 2}, "concurency: unknown key; did you mean concurrency?"),
    ("top_level_alias_typo", {"variantz": [_system()]}, "variantz: unknown key; did you mean variants?"),
    (
        "top_level_no_close_match",
        {"systems": [_system()], "zzz": 1},
        "zzz: unknown key; expected one of baseline, cases, concurrency, enrichers, evaluation, evaluators, judge, "
        "name, output, pythonpath, runs_dir, sinks, systems, variants",
    ),
    (
        "system",
        {"systems": [_system(), _system(name="t", metdata={})]},
        "systems[1].metdata: unknown key; did you mean metadata?",
    ),
    (
        "python_function_config",
        {"systems": [_system(), _system(name="t", config={"target": "m:f", "timout_s": 3})]},
        "systems[1].config.timout_s: unknown key; did you mean timeout_s?",
    ),
    (
        "python_function_kwargs",
        {"systems": [_system(config={"target": "m:f", "kwarg": {"model": "x"}})]},
        "systems[0].config.kwarg: unknown key; did you mean kwargs?",
    ),
    (
        "python_function_http_key",
        {"variants": [_system(config={"target": "m:f", "url": "http://h"})]},
        "variants[0].config.url: unknown key; expected one of kwargs, target, timeout_s",
    ),
    ("http_config", {"systems": [_http(hedaers={})]}, "systems[0].config.hedaers: unknown key; did you mean headers?"),
    (
        "http_config_function_key",
        {"systems": [_http(target="m:f")]},
        "systems[0].config.target: unknown key; expected one of body_template, headers, method, response_mapping, "
        "timeout_s, url",
    ),
    (
        "response_mapping",
        {"systems": [_http(response_mapping={"preset": "anthropic", "final_anwser": "$.text"})]},
        "systems[0].config.response_mapping.final_anwser: unknown key; did you mean final_answer?",
    ),
    (
        "response_mapping_not_a_selector",
        {"systems": [_http(response_mapping={"thinking": 3})]},
        "systems[0].config.response_mapping.thinking: expected a JSONPath selector such as '$.answer', got 3",
    ),
    (
        "response_mapping_unknown_preset",
        {"systems": [_http(response_mapping={"preset": "mistral"})]},
        "systems[0].config.response_mapping.preset: unknown preset 'mistral'; known: anthropic, deepseek, gemini, openai",
    ),
    (
        "workspace",
        {"systems": [_system(workspace={"kind": "tempdir_snapshot", "path": "w", "ignor": ["*.pyc"]})]},
        "systems[0].workspace.ignor: unknown key; did you mean ignore?",
    ),
    (
        "workspace_kind",
        {"systems": [_system(workspace={"kind": "docker", "path": "w"})]},
        "systems[0].workspace.kind: expected 'tempdir_snapshot' or 'git_branch', got 'docker'",
    ),
    (
        "output",
        {"systems": [_system()], "output": [{"type": "local_files"}, {"type": "sqlite", "pth": "runs.db"}]},
        "output[1].pth: unknown key for a sqlite store; did you mean path?",
    ),
    (
        "output_key_of_another_store",
        {"systems": [_system()], "output": [{"type": "sqlite", "path": "r.db", "dsn": "postgresql://h/db"}]},
        "output[0].dsn: unknown key for a sqlite store; expected one of path, run_namespace, type",
    ),
    (
        "output_unknown_store",
        {"systems": [_system()], "output": [{"type": "mysql"}]},
        "output[0].type: unknown store 'mysql'; known: local_files, sqlite, postgres",
    ),
    (
        "output_postgres_without_dsn",
        {"systems": [_system()], "output": [{"type": "postgres", "run_namespace": {"project": "x"}}]},
        "output[0].dsn: a postgres store needs a connection string",
    ),
    (
        "judge",
        {"systems": [_system()], "judge": {"model": "m", "temprature": 0}},
        "judge.temprature: unknown key; did you mean temperature?",
    ),
    (
        "judge_value",
        {"systems": [_system()], "judge": {"model": "m", "temperature": "hot"}},
        "judge.temperature: expected a valid number, got 'hot'",
    ),
    (
        "evaluator_judge_override",
        {"systems": [_system()], "evaluators": [{"name": "j", "type": "llm_judge", "judge": {"modle": "m"}}]},
        "evaluators[0].judge.modle: unknown key; did you mean model?",
    ),
    (
        "evaluator_reserved_key",
        {"systems": [_system()], "evaluators": [{"name": "fast", "type": "latency", "timeout_s": "soon"}]},
        "evaluators[0].timeout_s: expected a valid number, got 'soon'",
    ),
]


@pytest.mark.parametrize(("extra", "message"), [c[1:] for c in UNKNOWN_KEYS], ids=[c[0] for c in UNKNOWN_KEYS])
def test_unknown_keys_name_the_nearest_known_key(project: Project, extra: dict[str, Any], message: str) -> None:
    # Validation happens at load: no module is imported, no adapter built.
    project.write({"name": "x", **extra})
    with pytest.raises(RunConfigError) as caught:
        load_eval_config(project.eval_path)
    assert str(caught.value) == f"{project.eval_path}: {message}"


EVALUATOR_OPTIONS: list[tuple[str, dict[str, Any], str]] = [
    # (id, evaluator entry, the exact message after "<file>: ")
    (
        "option_typo",
        {"name": "fast", "type": "latency", "max_msx": 2000},
        "evaluators[0].max_msx: unknown option of latency; did you mean max_ms?",
    ),
    (
        "option_typo_legacy_form",
        {"name": "latency", "max_msx": 2000},
        "evaluators[0].max_msx: unknown option of latency; did you mean max_ms?",
    ),
    (
        "reserved_key_typo",
        {"name": "fast", "type": "latency", "timout_s": 2},
        "evaluators[0].timout_s: unknown option of latency; did you mean timeout_s?",
    ),
    (
        "no_close_option",
        {"name": "fast", "type": "cost", "zzz": 1},
        "evaluators[0].zzz: unknown option of cost; expected one of args, as, import, max_dataset_rows, max_usd, name, scope, threshold, timeout_s, type",
    ),
    (
        "field_not_taken",
        {"name": "fast", "type": "latency", "field": "output.thinking"},
        "evaluators[0].field: evaluator latency does not take field",
    ),
    (
        "judge_not_taken",
        {"name": "fast", "type": "latency", "judge": {"model": "m"}},
        "evaluators[0].judge: evaluator latency does not take judge",
    ),
    (
        "as_with_name",
        {"name": "fast", "type": "latency", "as": "quick"},
        "evaluators[0].as: 'name' already names the result; drop 'as'",
    ),
    (
        "duplicate_result_name",
        {"name": "tool_called"},
        "evaluators[1]: duplicate evaluator name 'tool_called'; give each a distinct 'name' (with 'type')",
    ),
]


@pytest.mark.parametrize(
    ("entry", "message"), [c[1:] for c in EVALUATOR_OPTIONS], ids=[c[0] for c in EVALUATOR_OPTIONS]
)
def test_evaluator_entries_are_checked_against_the_constructor(
    project: Project, entry: dict[str, Any], message: str
) -> None:
    evaluators = [entry, {"name": "tool_called"}] if "duplicate" in message else [entry]
    error = _error_of(
        project, {"name": "x", "cases": "cases.yaml", "systems": [_fn(project)], "evaluators": evaluators}
    )
    assert str(error) == f"{project.eval_path}: {message}"


def test_imported_function_options_are_checked(project: Project) -> None:
    entry = {"import": f"{project.probe}:answer_mentions_question", "treshold": 0.5}
    error = _error_of(project, {"name": "x", "cases": "cases.yaml", "systems": [_fn(project)], "evaluators": [entry]})
    assert str(error) == (
        f"{project.eval_path}: evaluators[0].treshold: unknown option of "
        f"{project.probe}:answer_mentions_question; did you mean threshold?"
    )


CASES_ERRORS: list[tuple[str, str, str, str]] = [
    ("not_yaml", "- id: [unclosed", "", "not valid YAML"),
    ("empty", "[]", "", "expected a non-empty list of cases"),
    ("entry_not_mapping", "- just text", "cases[0]", "expected a mapping, got str"),
    ("missing_id", "- id: a\n- input: {q: 1}", "cases[1].id", "required key is missing"),
    (
        "bad_expected",
        "- id: a\n  expected: {must_call_tools: 3}",
        "cases[0].expected.must_call_tools",
        "expected a valid list, got 3",
    ),
    ("duplicate_id", "- id: a\n- id: a", "cases[1].id", "duplicate case id 'a'"),
    (
        "expected_typo",
        "- id: a\n- id: b\n  expected: {must_call_tool: [lookup]}",
        "cases[1].expected.must_call_tool",
        "unknown key; did you mean must_call_tools?",
    ),
    ("case_typo", "- id: a\n  inputs: {q: 1}", "cases[0].inputs", "unknown key; did you mean input?"),
]


@pytest.mark.parametrize(("text", "entry", "problem"), [c[1:] for c in CASES_ERRORS], ids=[c[0] for c in CASES_ERRORS])
def test_malformed_cases_yaml(project: Project, text: str, entry: str, problem: str) -> None:
    project.write({"name": "x", "variants": [_fn(project)]})
    cases_path = project.root / "cases.yaml"
    cases_path.write_text(text)
    with pytest.raises(RunConfigError) as caught:
        load_eval_config(project.eval_path)
    assert caught.value.path == cases_path
    assert caught.value.entry == entry
    if problem == "not valid YAML":
        assert str(caught.value).startswith(f"{cases_path}: not valid YAML")
    else:
        assert str(caught.value) == (f"{cases_path}: {entry}: {problem}" if entry else f"{cases_path}: {problem}")


def test_missing_files_are_named(tmp_path: Path) -> None:
    with pytest.raises(RunConfigError, match="eval.yaml: cannot read the file"):
        load_eval_config(tmp_path / "eval.yaml")
    (tmp_path / "eval.yaml").write_text(
        "name: x\ncases: nowhere.yaml\nvariants: [{name: v, adapter: http, config: {url: 'http://h'}}]\n"
    )
    with pytest.raises(RunConfigError, match="nowhere.yaml: cannot read the file"):
        load_eval_config(tmp_path / "eval.yaml")


def test_cli_prints_the_error_and_exits_2(project: Project, capsys: pytest.CaptureFixture[str]) -> None:
    project.write({"name": "x", "systems": [{**_fn(project), "config": {"target": "m:f", "timout_s": 3}}]})
    code = main(["run", str(project.eval_path), "--runs-dir", str(project.runs_dir), "--no-progress"])
    captured = capsys.readouterr()
    assert code == 2
    assert "systems[0].config.timout_s: unknown key; did you mean timeout_s?" in captured.err.replace("\n", "")
    assert "Traceback" not in captured.err + captured.out
