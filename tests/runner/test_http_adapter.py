"""The http adapter against a real HTTP server on 127.0.0.1: answers, 5xx, 4xx, timeouts, templates, headers."""

from __future__ import annotations

import pytest

from evaltrace.runner import run_eval

from .conftest import HttpSystem, Project


def _variant(name: str, url: str, **config: object) -> dict[str, object]:
    return {"name": name, "adapter": "http", "config": {"url": url, **config}}


def test_http_outcomes(project: Project, http_system: HttpSystem) -> None:
    url = http_system.url
    path = project.write(
        {
            "name": "http",
            "variants": [
                _variant("ok", f"{url}/answer"),
                _variant("text", f"{url}/text"),
                _variant("fail", f"{url}/fail"),
                _variant("missing", f"{url}/missing"),
                _variant("slow", f"{url}/slow", timeout_s=0.2),
            ],
            "evaluators": [{"name": "contains_text", "args": ["alpha"]}],
            "concurrency": 8,
        },
        cases=[{"id": "c1", "input": {"question": "q1"}}],
    )
    outcome = run_eval(path, runs_dir=project.runs_dir)
    traces = {t.variant_name: t for t in outcome.traces}
    assert traces["ok"].error is None
    assert traces["ok"].output.final_answer == "q1: alpha"
    assert traces["ok"].output.structured == {"answer": "q1: alpha", "echo": {"question": "q1"}}
    assert traces["text"].output.final_answer == "plain q1"
    assert traces["fail"].error is not None and traces["fail"].error.type == "http_5xx"
    assert "500" in traces["fail"].error.message
    assert traces["missing"].error is not None and traces["missing"].error.type == "adapter_error"
    assert traces["slow"].error is not None and traces["slow"].error.type == "timeout"
    # The case input went out as the JSON body.
    assert {r["path"]: r["body"] for r in http_system.requests}["/answer"] == {"question": "q1"}
    passed = {v.name: v.pass_rate for v in outcome.summary.variants}
    assert passed == {"ok": 1.0, "text": 0.0, "fail": 0.0, "missing": 0.0, "slow": 0.0}


def test_http_body_template_and_env_headers(
    project: Project, http_system: HttpSystem, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SUT_API_TOKEN", "tok-987")
    path = project.write(
        {
            "name": "tmpl",
            "variants": [
                _variant(
                    "ok",
                    f"{http_system.url}/answer",
                    headers={"Authorization": "Bearer ${SUT_API_TOKEN}", "X-Api-Key": "hard-coded-secret"},
                    body_template={
                        "question": "{{input.question}}",
                        "all": "{{input}}",
                        "note": "ask {{input.question}}",
                    },
                )
            ],
        },
        cases=[{"id": "c1", "input": {"question": "q1"}}],
    )
    outcome = run_eval(path, runs_dir=project.runs_dir)
    (request,) = http_system.requests
    assert request["body"] == {"question": "q1", "all": {"question": "q1"}, "note": "ask q1"}
    assert request["headers"]["Authorization"] == "Bearer tok-987"
    config_text = (outcome.run.path / "config.yaml").read_text()
    assert "tok-987" not in config_text and "${SUT_API_TOKEN}" in config_text
    assert "hard-coded-secret" not in config_text
