"""evaltrace inside the application's own pytest suite: a bug of ours is logged, never fails the user's test.

Under pytest ``PYTEST_CURRENT_TEST`` is always set, so it cannot mean "evaltrace's own tests": only the switch
``EVALTRACE_RAISE_INTERNAL_ERRORS=1`` (set by evaltrace's tests/conftest.py) re-raises our errors. This runs a user's
test file with pytest in a fresh process, without the switch and without evaltrace's conftest, and makes the
instrumented Ollama call (the real client, replaying the recorded chat on 127.0.0.1) hit an internal error in the
engine's response recording and, separately, in its span start.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

_TESTS = Path(__file__).resolve().parent

_USER_TESTS = """
import logging
import sys

sys.path[:0] = [{tests!r}, {instrumentation!r}]

import pytest

import evaltrace
from evaltrace.instrumentation.ollama.codec import OllamaCodec
from ollama_replay import MODEL, client_of, recorded
from cassettes import ReplayServer


def _broken(*args, **kwargs):
    raise RuntimeError("bug in evaltrace")


@pytest.mark.parametrize("where", ["finish", "server_of"])
def test_users_own_test(where, monkeypatch, caplog):
    monkeypatch.setattr(OllamaCodec, where, _broken)  # before instrumenting: the wrappers bind the codec's methods
    evaltrace.instrument_ollama()
    try:
        with caplog.at_level(logging.ERROR, logger="evaltrace"):
            with ReplayServer(recorded("test_chat.yaml")) as server, client_of(server.url) as client:
                answer = client.chat(MODEL, [{{"role": "user", "content": "hi"}}])
    finally:
        evaltrace.uninstrument_ollama()
    assert answer.message.content  # the user's call returned the SDK's answer
    assert "bug in evaltrace" in caplog.text  # and our bug was logged, with its traceback
    assert "evaltrace internal error" in caplog.text
"""


def _run_user_suite(tmp_path: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    user_tests = tmp_path / "test_user_app.py"
    user_tests.write_text(
        textwrap.dedent(_USER_TESTS.format(tests=str(_TESTS), instrumentation=str(_TESTS / "instrumentation")))
    )
    # rootdir tmp_path with an empty ini: neither evaltrace's conftest nor its pyproject addopts (xdist) apply.
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(user_tests)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )


def test_an_internal_error_in_an_instrumented_call_never_fails_the_users_pytest_run(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "EVALTRACE_RAISE_INTERNAL_ERRORS"}
    done = _run_user_suite(tmp_path, env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 passed" in done.stdout


def test_the_switch_makes_our_errors_raise_under_pytest(tmp_path: Path) -> None:
    """The same user tests with EVALTRACE_RAISE_INTERNAL_ERRORS=1: our bug surfaces (how our own suite runs)."""
    done = _run_user_suite(tmp_path, {**os.environ, "EVALTRACE_RAISE_INTERNAL_ERRORS": "1"})
    assert done.returncode == 1, done.stdout + done.stderr
    assert "2 failed" in done.stdout and "RuntimeError: bug in evaltrace" in done.stdout
