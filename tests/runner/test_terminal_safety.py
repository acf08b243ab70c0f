"""Recorded text never drives the terminal: every CLI output escapes rich markup and control sequences.

A span name, case id, evaluator reason or error message holding an OSC 8 hyperlink, a CSI sequence (clear screen),
a C1 control, a bell, or rich markup (``[link=...]``) is printed as visible text. Output is captured from a console
forced into terminal mode (rich then emits its own colours and links), so a leak would show as an escape sequence.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.trace import Status, StatusCode

from evaltrace.cli import main
from evaltrace.cli._untrusted import clean, markup_safe, plain
from evaltrace.exporters.local_store import LocalStoreExporter
from evaltrace.runner import run_eval

from .conftest import Project

MARKUP = "[link=https://evil.example]click[/link]"
HOSTILE = f"\x1b]8;;https://evil.example\x1b\\x\x1b]8;;\x1b\\ {MARKUP} \x1b[2J\x9b2J\x07\u202egnp.exe"
# What rich itself may write on a terminal: colours/styles (SGR) only, never a link, a cursor move or a bell.
_RICH_SGR = re.compile(r"\x1b\[[0-9;]*m")

EVALUATOR_SOURCE = """
from pathlib import Path

from evaltrace.schema import EvaluationResult

HOSTILE = {hostile!r}
PASS_FLAG = Path(__file__).with_name("pass")  # present: the evaluator passes (a regression when it goes)


class Hostile:
    name = "hostile"
    version = "1"

    def evaluate(self, trace, case):
        return EvaluationResult(evaluator=self.name, passed=PASS_FLAG.exists(), reason=HOSTILE)


def system(question: str, key: str = "a") -> str:
    if question == "boom":
        raise RuntimeError(HOSTILE)
    return "fine"
"""


def _assert_inert(output: str) -> None:
    """No control character but rich's own colours reached the terminal, and the markup shows as text."""
    leftover = _RICH_SGR.sub("", output)
    assert "\x1b" not in leftover, repr(leftover)
    assert not re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202e]", leftover.replace("\r\n", "\n")), repr(leftover)
    assert "\x1b]8;" not in output  # no OSC 8 hyperlink, ours or theirs
    assert "[link=https:" in leftover and "click[" in leftover  # markup shown as text, not swallowed


@pytest.fixture
def terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FORCE_COLOR", "1")
    monkeypatch.setenv("COLUMNS", "400")
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.delenv("TTY_COMPATIBLE", raising=False)


def _store(root: Path) -> Path:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(LocalStoreExporter(root / "store")))
    tracer = provider.get_tracer("test")
    with tracer.start_as_current_span(HOSTILE, attributes={"input.value": HOSTILE, "evaltrace.span.kind": HOSTILE}):
        with tracer.start_as_current_span("child " + HOSTILE) as child:
            child.set_attribute("output.value", HOSTILE)
            child.set_status(Status(StatusCode.ERROR, HOSTILE))
    provider.shutdown()
    return root / "store"


def _run(project: Project, runs_dir: Path | None = None) -> Path:
    module = f"{project.module}_hostile"
    (project.root / f"{module}.py").write_text(textwrap.dedent(EVALUATOR_SOURCE.format(hostile=HOSTILE)))
    config = {
        "name": "hostile",
        "variants": [{"name": "v", "adapter": "python_function", "config": {"target": f"{module}:system"}}],
        "evaluators": [{"import": f"{module}:Hostile"}],
    }
    cases = [{"id": f"case {HOSTILE}", "input": {"question": "q"}}, {"id": "c2", "input": {"question": "boom"}}]
    path = project.write(config, cases)
    return run_eval(path, runs_dir=runs_dir or project.runs_dir).run.path


def _traces_list(tmp: Path, project: Project) -> list[str]:
    return ["traces", "list", "--store", str(_store(tmp))]


def _traces_show(tmp: Path, project: Project) -> list[str]:
    return ["traces", "show", "last", "--details", "--store", str(_store(tmp))]


def _run_command(tmp: Path, project: Project) -> list[str]:
    _run(project)  # imports the module and writes eval.yaml; the CLI run below prints its summary and details
    return ["run", str(project.eval_path), "--runs-dir", str(project.runs_dir), "--no-progress"]


def _re_evaluate(tmp: Path, project: Project) -> list[str]:
    return ["re-evaluate", str(_run(project)), "--no-progress"]


def _compare(tmp: Path, project: Project) -> list[str]:
    (project.root / "pass").touch()
    first = _run(project)
    (project.root / "pass").unlink()
    second = _run(project)  # the hostile case regressed: its id and reason are printed
    return ["compare", str(first), str(second), "--runs-dir", str(project.runs_dir)]


def _runs_list(tmp: Path, project: Project) -> list[str]:
    runs_dir = tmp / ("runs " + HOSTILE.replace("/", "|"))  # a folder name is recorded text too (a cloned repo)
    _run(project, runs_dir)
    return ["runs", "list", "--runs-dir", str(runs_dir)]


def _error_message(tmp: Path, project: Project) -> list[str]:
    return ["compare", f"run {HOSTILE}", "--runs-dir", str(tmp)]


def _report_error(tmp: Path, project: Project) -> list[str]:
    return ["report", HOSTILE, "--runs-dir", str(tmp)]


def _scores_replay(tmp: Path, project: Project) -> list[str]:
    tmp.mkdir(parents=True, exist_ok=True)
    return [
        "scores",
        "replay",
        str(tmp / f"dead {HOSTILE.replace('/', '|')}.jsonl"),
        "--sink",
        "jsonl",
        "--output",
        str(tmp / "o"),
    ]


COMMANDS: dict[str, Callable[[Path, Project], list[str]]] = {
    "traces list": _traces_list,
    "traces show --details": _traces_show,
    "run": _run_command,
    "re-evaluate": _re_evaluate,
    "compare": _compare,
    "runs list": _runs_list,
    "error message": _error_message,
    "report error": _report_error,
    "scores replay": _scores_replay,
}


@pytest.mark.parametrize("command", list(COMMANDS), ids=list(COMMANDS))
def test_recorded_text_is_printed_inert(
    command: str, tmp_path: Path, project: Project, terminal: None, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = COMMANDS[command](tmp_path / "work", project)
    capsys.readouterr()
    main(argv)
    captured = capsys.readouterr()
    output = captured.out + captured.err
    _assert_inert(output)


@pytest.mark.parametrize(
    ("recorded", "shown"),
    [
        ("\x1b[31mred", "\\x1b[31mred"),
        ("\x1b]8;;https://e\x1b\\x", "\\x1b]8;;https://e\\x1b\\x"),
        ("bell\x07 del\x7f c1\x9b", "bell\\x07 del\\x7f c1\\x9b"),
        ("rtl\u202eoverride", "rtl\\u202eoverride"),
        ("keeps\nlines\tand tabs", "keeps\nlines\tand tabs"),
        ("carriage\rreturn", "carriage\\x0dreturn"),
    ],
)
def test_control_characters_are_shown_escaped(recorded: str, shown: str) -> None:
    assert clean(recorded) == shown
    assert plain(recorded).plain == shown


def test_single_line_text_escapes_line_breaks_and_markup_is_escaped() -> None:
    assert clean("a\nb\tc", single_line=True) == "a\\x0ab\\x09c"
    assert markup_safe(MARKUP) == "\\[link=https://evil.example]click\\[/link]"
