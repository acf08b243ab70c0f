"""A judge that is down, refuses its key or has none, during live tracing: one WARNING per outage naming the
evaluator, the judge's URL and the cause; `evaltrace traces list --eval-errors` finds the traces affected."""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace as otel_trace

import evaltrace
from evaltrace._internal import settings, tracing
from evaltrace.cli import main
from evaltrace.evaluators import Judge, LLMJudge, _outages

from .fake_openai import FakeOpenAI

OUTAGE = "cannot use its judge"
VERDICT = json.dumps({"score": 1, "reason": "answers it"})
REFUSED = {"status": 401, "message": "Incorrect API key provided"}


@pytest.fixture(autouse=True)
def reset_configuration() -> Iterator[None]:
    saved = settings.current
    yield
    from evaltrace import config

    handle = config.current_handle()
    if handle is not None:
        handle.shutdown()
    tracing.set_tracer_provider(None)
    settings.replace(saved)


@pytest.fixture(autouse=True)
def fresh_outages(monkeypatch: pytest.MonkeyPatch) -> None:
    # Each test starts with no outage in progress; no interval, so a second outage within the test warns again.
    monkeypatch.setattr(_outages, "_current", {})
    monkeypatch.setattr(_outages, "_last_warning", {})
    monkeypatch.setattr(_outages, "_unannounced", {})
    monkeypatch.setattr(_outages, "WARNING_INTERVAL_S", 0.0)


@pytest.fixture
def no_openai_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "EVALTRACE_JUDGE_MODEL"):
        monkeypatch.delenv(name, raising=False)


def closed_port_url() -> str:
    with socket.socket() as sock:  # bound then closed: nothing listens there
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


@evaltrace.agent
def answer(question: str) -> str:
    # Distinct answers: the judge's cache never serves one judgement for another.
    return f"the answer to {question}"


def traced_answer(question: str) -> str:
    """Run the agent; return its trace id."""
    ids: list[str] = []

    @evaltrace.trace
    def run() -> None:
        ids.append(format(otel_trace.get_current_span().get_span_context().trace_id, "032x"))
        answer(question)

    run()
    return ids[0]


def outage_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and OUTAGE in r.getMessage()]


def listed_with_eval_errors(store: Path, capsys: pytest.CaptureFixture[str]) -> set[str]:
    capsys.readouterr()
    assert main(["traces", "list", "--eval-errors", "--json", "--store", str(store)]) == 0
    return {row["trace_id"] for row in json.loads(capsys.readouterr().out)}


def configure_with(judge: Judge, store: Path) -> tuple[Any, LLMJudge]:
    judged = LLMJudge(rubric="Answers the question", judge=judge)
    handle = evaltrace.configure(
        service_name="outages", local_store=store, evaluators=[judged], evaluation_options={"dead_letter_dir": None}
    )
    return handle, judged


def test_an_unauthorised_judge_warns_once_per_outage_and_its_traces_are_listed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    reply: dict[str, Any] = {"now": REFUSED}
    server = FakeOpenAI(responder=lambda body: reply["now"])
    server.start()
    try:
        judge = Judge("judge-model", base_url=server.url, api_key="sk-wrong", max_retries=0)
        store = tmp_path / "store"
        handle, judged = configure_with(judge, store)
        caplog.set_level(logging.INFO, logger="evaltrace")

        refused = [traced_answer(f"refused {i}") for i in range(3)]
        assert handle.force_flush(30_000)
        (warning,) = outage_warnings(caplog)
        assert judged.name in warning and server.url in warning
        assert "HTTP 401 (the API key was refused)" in warning and "Incorrect API key provided" in warning

        reply["now"] = VERDICT  # the key is fixed: the outage ends, quietly (INFO)
        healthy = [traced_answer(f"healthy {i}") for i in range(2)]
        assert handle.force_flush(30_000)
        assert len(outage_warnings(caplog)) == 1
        recovered = [r for r in caplog.records if "answers again" in r.getMessage()]
        assert [r.levelno for r in recovered] == [logging.INFO]
        assert "3 evaluation(s) failed" in recovered[0].getMessage()

        reply["now"] = REFUSED  # a later outage warns again
        refused += [traced_answer(f"refused again {i}") for i in range(2)]
        assert handle.force_flush(30_000)
        assert len(outage_warnings(caplog)) == 2
        handle.shutdown()
    finally:
        server.stop()

    listed = listed_with_eval_errors(store, capsys)
    assert listed == set(refused)
    assert not listed & set(healthy)


def test_a_judge_that_is_down_warns_once_naming_url_and_cause(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    url = closed_port_url()
    judge = Judge("judge-model", base_url=url, api_key="sk-test", max_retries=0, timeout=10)
    store = tmp_path / "store"
    handle, judged = configure_with(judge, store)
    caplog.set_level(logging.INFO, logger="evaltrace")
    down = [traced_answer(f"question {i}") for i in range(4)]
    assert handle.force_flush(30_000)
    handle.shutdown()
    (warning,) = outage_warnings(caplog)
    assert judged.name in warning and url in warning and "cannot connect (ConnectError" in warning
    assert "Connection error." not in warning  # openai's bare message is replaced by what failed
    assert listed_with_eval_errors(store, capsys) == set(down)


@pytest.mark.usefixtures("no_openai_env")
@pytest.mark.parametrize("endpoint", ["openai", "local"])
def test_a_judge_without_an_api_key_names_the_missing_key(
    endpoint: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # "openai": the default endpoint. No call is made (it could only be refused), so nothing leaves the machine.
    # "local": an endpoint of the user's that refuses the placeholder key with 401.
    server = FakeOpenAI(responder=lambda body: REFUSED)
    server.start()
    try:
        judge = Judge("judge-model", max_retries=0) if endpoint == "openai" else Judge(base_url=server.url)
        handle, judged = configure_with(judge, tmp_path / "store")
        caplog.set_level(logging.INFO, logger="evaltrace")
        for i in range(3):
            traced_answer(f"question {i}")
        assert handle.force_flush(30_000)
        handle.shutdown()
    finally:
        server.stop()
    (warning,) = outage_warnings(caplog)
    assert judged.name in warning
    assert "no API key: OPENAI_API_KEY is not set and no api_key= was given" in warning
    if endpoint == "openai":
        assert "https://api.openai.com/v1" in warning
    else:
        assert server.url in warning and "HTTP 401" in warning
        assert len(server.chat_requests) == 3


def test_the_warning_reaches_stderr_without_any_logging_setup(tmp_path: Path) -> None:
    # A new user's script: no logging configuration, no key, the default judge. The one line is on stderr.
    script = textwrap.dedent(
        """
        import evaltrace
        from evaltrace.evaluators import LLMJudge

        handle = evaltrace.configure(local_store="store", evaluators=[LLMJudge(rubric="helpfulness")])

        @evaltrace.agent
        def answer(question: str) -> str:
            return "answer to " + question

        for i in range(3):
            answer(str(i))
        handle.force_flush()
        """
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "EVALTRACE_"))}
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stderr.splitlines() if OUTAGE in line]
    assert len(lines) == 1, done.stderr
    assert "llm_judge" in lines[0] and "OPENAI_API_KEY is not set" in lines[0]
    assert "Traceback" not in done.stderr


def test_a_judge_url_holding_credentials_is_logged_without_them(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # A proxy base URL with a token in its userinfo, and one with a key in its query string (Azure-style).
    reply: dict[str, Any] = {"now": REFUSED}
    server = FakeOpenAI(responder=lambda body: reply["now"])
    server.start()
    try:
        with_userinfo = server.url.replace("http://", "http://proxy-user:userinfo-s3cret@")
        down_with_query = closed_port_url() + "?api-key=query-s3cret"
        handle = evaltrace.configure(
            service_name="outages",
            local_store=tmp_path / "store",
            evaluators=[
                LLMJudge(rubric="a", name="by_proxy", judge=Judge("m", base_url=with_userinfo, api_key="sk-test")),
                LLMJudge(rubric="b", name="by_query", judge=Judge("m", base_url=down_with_query, api_key="sk-test")),
            ],
            evaluation_options={"dead_letter_dir": None},
        )
        caplog.set_level(logging.INFO, logger="evaltrace")
        traced_answer("refused")
        assert handle.force_flush(30_000)
        reply["now"] = VERDICT  # the proxy's judge answers again: its INFO line names the URL too
        traced_answer("answered")
        assert handle.force_flush(30_000)
        handle.shutdown()
    finally:
        server.stop()
    lines = [r.getMessage() for r in caplog.records if r.name == "evaltrace"]
    by_proxy = [line for line in lines if "by_proxy" in line]
    by_query = [line for line in lines if "by_query" in line]
    assert any(OUTAGE in line for line in by_proxy) and any("answers again" in line for line in by_proxy)
    assert any(OUTAGE in line for line in by_query)
    assert all("s3cret" not in line for line in lines), lines
    host = server.url.removeprefix("http://")
    assert all(f"http://***@{host}" in line for line in by_proxy)  # still says where the calls went
    down_at = down_with_query.split("?")[0]  # the client adds a "/" to the path
    assert all(f"{down_at}/?***" in line for line in by_query)
