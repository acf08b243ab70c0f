"""``evaltrace evaluate --json``: stdout holds one JSON object, whatever the evaluators write, and on an error too.

A real ``evaltrace evaluate`` process (stdout and stderr real pipes) over a real local store, with evaluators that
``print`` (from the backfill's threads) and that write to file descriptor 1 with ``os.write`` (as C code does).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from evaltrace.cli import main as cli_main
from evaltrace.exporters.store_db import DB_NAME

from .stored import build_store
from .test_backfill_report import HERE, _cli

NOISY = ("-e", "backfill_evaluators:noisy", "-e", "backfill_evaluators:fd_writer")


@pytest.mark.parametrize(("extra", "status"), [((), 0), (("--fail-on-fail",), 1)])
def test_json_stdout_is_the_report_alone_when_evaluators_write_to_stdout(
    tmp_path: Path, extra: tuple[str, ...], status: int
) -> None:
    """The evaluators' lines go to stderr (both kinds, one per trace each); the exit status is the one without them
    (``noisy`` fails the traces that answer "ok": 1 with ``--fail-on-fail``)."""
    store = tmp_path / "store"
    build_store(store, 4)
    printed = _cli("evaluate", "--store", str(store), *NOISY, "--json", *extra)
    assert printed.returncode == status, printed.stderr
    report = json.loads(printed.stdout)  # the whole of stdout: nothing before or after the object
    assert report["outcomes"] == {"fail": 2, "pass": 6}
    assert printed.stdout.count("\n") == 1
    # Counted in the text: a print (text, then its newline) and a thread's os.write may interleave on one line.
    assert (printed.stderr.count("noisy: judging "), printed.stderr.count("fd_writer: judging ")) == (4, 4)


def test_without_json_what_evaluators_print_stays_on_stdout(tmp_path: Path) -> None:
    """Only ``--json`` moves them: the human summary is for a terminal, where the lines belong with it."""
    store = tmp_path / "store"
    build_store(store, 2)
    shown = _cli("evaluate", "--store", str(store), *NOISY, "--no-progress")
    assert shown.returncode == 0, shown.stderr
    assert (shown.stdout.count("noisy: judging "), shown.stdout.count("fd_writer: judging ")) == (2, 2)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (("--service", "nope"), "no traces in {store} match this selection; nothing to judge"),
        (("--concurrency", "0"), "--concurrency: expected a whole number >= 1, got 0"),
    ],
)
def test_json_errors_are_a_json_object_on_stdout_and_the_message_on_stderr(
    tmp_path: Path, arguments: tuple[str, ...], message: str
) -> None:
    store = tmp_path / "store"
    build_store(store, 2)
    printed = _cli("evaluate", "--store", str(store), "-e", "backfill_evaluators:noisy", *arguments, "--json")
    expected = message.format(store=store)
    assert printed.returncode == 2
    assert json.loads(printed.stdout) == {"error": expected}
    assert printed.stderr.splitlines() == [f"error: {expected}"]


def test_a_store_error_with_json_keeps_exit_status_1(tmp_path: Path) -> None:
    """An error of the run itself (the store is not one), not of usage: exit 1, as without ``--json``."""
    store = tmp_path / "store"
    store.mkdir()
    (store / DB_NAME).write_text("not a database")
    plain = _cli("evaluate", "--store", str(store), "-e", "backfill_evaluators:noisy")
    printed = _cli("evaluate", "--store", str(store), "-e", "backfill_evaluators:noisy", "--json")
    assert printed.returncode == plain.returncode == 1, (plain.stderr, printed.stderr)
    (line,) = [line for line in plain.stderr.splitlines() if line.startswith("error: ")]
    assert "unreadable or corrupt" in line
    assert json.loads(printed.stdout) == {"error": line.removeprefix("error: ")}
    assert line in printed.stderr.splitlines()


def test_stdout_is_given_back_after_the_run(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """In process: the evaluators' writes go to stderr during the run; once the command returned, descriptor 1
    and ``sys.stdout`` write to stdout again."""
    monkeypatch.syspath_prepend(str(HERE))  # the evaluators' module, as the subprocess has it on PYTHONPATH
    store = tmp_path / "store"
    build_store(store, 2)
    assert cli_main(["evaluate", "--store", str(store), *NOISY, "--json"]) == 0
    print("after: print")
    os.write(1, b"after: fd 1\n")
    captured = capfd.readouterr()
    out = captured.out.splitlines()
    assert json.loads(out[0])["outcomes"] == {"fail": 1, "pass": 3}
    assert out[1:] == ["after: print", "after: fd 1"]
    assert (captured.err.count("noisy: judging "), captured.err.count("fd_writer: judging ")) == (2, 2)
