"""python_function: one function, several variants through config.kwargs and variant metadata."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Iterator
from typing import Any

import pytest

from evaltrace.runner import RunConfigError, run_eval

from .conftest import Project

SUT = """
SEEN = []


def answer(question, model, temperature=0.0, api_key=None, variant_metadata=None):
    SEEN.append({"model": model, "temperature": temperature, "api_key": api_key, "metadata": variant_metadata})
    prompt = (variant_metadata or {}).get("prompt_version")
    return {"answer": f"{model} (prompt {prompt}) answers {question}", "temperature": temperature}


def plain(question, model):
    return f"{model}: {question}"
"""


@pytest.fixture
def sut(project: Project) -> Iterator[str]:
    module = f"{project.module}_kw"
    (project.root / f"{module}.py").write_text(textwrap.dedent(SUT))
    yield module
    sys.modules.pop(module, None)


def _variant(
    name: str, target: str, kwargs: dict[str, object], metadata: dict[str, object] | None = None
) -> dict[str, Any]:
    config: dict[str, Any] = {"target": target}
    if kwargs:
        config["kwargs"] = kwargs
    variant: dict[str, Any] = {"name": name, "adapter": "python_function", "config": config}
    if metadata is not None:
        variant["metadata"] = metadata
    return variant


def test_one_function_serves_two_variants(project: Project, sut: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SUT_MODEL_KEY", "key-from-env")
    path = project.write(
        {
            "name": "kw",
            "variants": [
                _variant(
                    "small",
                    f"{sut}:answer",
                    {"model": "small-1", "api_key": "${SUT_MODEL_KEY}"},
                    {"prompt_version": "v1", "owner": "team-a"},
                ),
                _variant(
                    "large", f"{sut}:answer", {"model": "large-2", "temperature": 0.7, "api_key": "sk-literal"}, {}
                ),
                _variant("plain", f"{sut}:plain", {"model": "tiny"}, {"prompt_version": "v9"}),
            ],
            "evaluators": [{"name": "contains_text", "args": ["answers q1"]}],
        },
        cases=[{"id": "c1", "input": {"question": "q1"}}],
    )
    outcome = run_eval(path, runs_dir=project.runs_dir)
    traces = {t.variant_name: t for t in outcome.traces}
    assert traces["small"].output.final_answer == "small-1 (prompt v1) answers q1"
    assert traces["large"].output.final_answer == "large-2 (prompt None) answers q1"
    assert traces["large"].output.structured == {"answer": "large-2 (prompt None) answers q1", "temperature": 0.7}
    assert traces["plain"].output.final_answer == "tiny: q1"
    # The function got the expanded secret; the trace keeps the config as written, literal secrets masked.
    seen = {s["model"]: s for s in sys.modules[sut].SEEN}
    assert seen["small-1"]["api_key"] == "key-from-env" and seen["large-2"]["api_key"] == "sk-literal"
    assert seen["small-1"]["metadata"] == {"prompt_version": "v1", "owner": "team-a"}
    assert seen["large-2"]["metadata"] == {}
    assert traces["small"].extra["variant_kwargs"] == {"model": "small-1", "api_key": "${SUT_MODEL_KEY}"}
    assert traces["small"].extra["variant_metadata"] == {"prompt_version": "v1", "owner": "team-a"}
    assert traces["large"].extra["variant_kwargs"] == {"model": "large-2", "temperature": 0.7, "api_key": "***"}
    assert "variant_metadata" not in traces["large"].extra
    assert traces["plain"].extra["variant_metadata"] == {"prompt_version": "v9"}  # recorded, not passed
    assert "key-from-env" not in (outcome.run.path / "traces.jsonl").read_text()
    passed = {v.name: v.pass_rate for v in outcome.summary.variants}
    assert passed == {"small": 1.0, "large": 1.0, "plain": 0.0}


def test_a_case_input_key_also_in_kwargs_is_an_adapter_error(project: Project, sut: str) -> None:
    path = project.write(
        {"name": "clash", "variants": [_variant("v", f"{sut}:plain", {"model": "tiny"})]},
        cases=[{"id": "ok", "input": {"question": "q"}}, {"id": "clash", "input": {"question": "q", "model": "x"}}],
    )
    outcome = run_eval(path, runs_dir=project.runs_dir)
    traces = {t.case_id: t for t in outcome.traces}
    assert traces["ok"].error is None and traces["ok"].output.final_answer == "tiny: q"
    error = traces["clash"].error
    assert error is not None and error.type == "adapter_error"
    assert error.message == "case input key 'model' is also set by the variant's config.kwargs; rename one"


@pytest.mark.parametrize(
    ("kwargs", "entry", "problem"),
    [
        ({"modle": "x"}, "variants[0].config.kwargs.modle", "has no keyword parameter 'modle'"),
        ({"variant_metadata": {}}, "variants[0].config.kwargs.variant_metadata", "is reserved"),
        ({"model": "${SUT_UNSET_VARIABLE}"}, "variants[0].config.kwargs.model", "SUT_UNSET_VARIABLE is not set"),
    ],
)
def test_bad_kwargs_stop_the_run_before_any_call(
    project: Project, sut: str, kwargs: dict[str, object], entry: str, problem: str
) -> None:
    path = project.write({"name": "bad", "variants": [_variant("v", f"{sut}:plain", kwargs)]})
    with pytest.raises(RunConfigError) as raised:
        run_eval(path, runs_dir=project.runs_dir)
    assert f"{entry}:" in str(raised.value) and problem in str(raised.value)
    assert sut not in sys.modules or not getattr(sys.modules[sut], "SEEN", [])
