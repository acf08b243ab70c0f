"""``traces list`` draws its table without rich, and prints exactly what rich prints (issue 28).

The plain renderer (:mod:`evaltrace.cli.plain_table`) is compared byte for byte with rich's own table for the
same rows: through the command's real entry point with the environment a user has (``COLUMNS``, a terminal
forced by ``FORCE_COLOR``, ``NO_COLOR``), and over seeded random rows (folding names, long words, every
evaluation colour, hidden columns, shortened ids) at widths from 40 to 250. Where it cannot draw exactly (a
character rich may count as two cells, a table too wide even laid out), rich prints, and the output is the same.
"""

from __future__ import annotations

import io
import random
from pathlib import Path

import pytest
from rich.cells import cell_len
from rich.console import Console

from evaltrace.cli import main, trace_table
from evaltrace.cli.plain_table import _SINGLE_CELL
from evaltrace.cli.terminal import Terminal, detect
from evaltrace.exporters.store_query import TraceSummary
from evaltrace.exporters.store_sessions import SessionScoreRow, SessionSummary

START = 1_764_355_200_000_000_000  # 2025-11-28 18:40 UTC

SUMMARIES = [
    TraceSummary(
        trace_id="4bf92f3577b34da6a3ce929d0e0e4736",
        root_name="POST /ask invoke_agent weather-assistant with a long root name that folds",
        start_time=START,
        duration_ms=1_234.5,
        span_count=12,
        error=False,
        service_name="weather-service",
        evaluations={"pass": 3, "fail": 1, "error": 1, "not_evaluated": 2, "pending": 1},
        session_id="session-0001",
        user_id="alice",
        input_tokens=12_345,
        output_tokens=678,
        cost_usd=0.0123,
    ),
    TraceSummary(
        trace_id="4bf92f3577b3ffffa3ce929d0e0e4737",
        root_name="chat gpt-4o-mini",
        start_time=START - 60_000_000_000,
        duration_ms=0.42,
        span_count=1,
        error=True,
        service_name="svc",
        evaluations={"fail": 2},
    ),
    TraceSummary(
        trace_id="00f067aa0ba902b7a3ce929d0e0e4736",
        root_name="a_single_word_longer_than_any_column_can_hold_so_it_folds_inside_its_column",
        start_time=START - 3_600_000_000_000,
        duration_ms=125_000.0,
        span_count=4_000,
        error=False,
        service_name="svc",
        user_id="bob",
        cost_usd=12.5,
    ),
]

WIDTHS = (40, 50, 60, 72, 80, 100, 120, 160, 200)
MODES = {
    "pipe": {},
    "terminal": {"FORCE_COLOR": "1", "TERM": "xterm-256color"},
    "terminal NO_COLOR": {"FORCE_COLOR": "1", "TERM": "xterm-256color", "NO_COLOR": "1"},
}


@pytest.fixture
def environment(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """No colour or size setting of the machine running the tests leaks in."""
    for name in ("FORCE_COLOR", "NO_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE", "LINES", "COLORTERM", "TERM"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("width", WIDTHS)
def test_traces_list_prints_byte_for_byte_what_rich_prints(
    width: int, mode: str, environment: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    environment.setenv("COLUMNS", str(width))
    for name, value in MODES[mode].items():
        environment.setenv(name, value)
    trace_table.render_trace_list(Console(), SUMMARIES, "Traces in .evaltrace")
    by_rich = capsys.readouterr().out

    terminal = detect()
    assert terminal is not None and terminal.width == width and terminal.ansi == (mode != "pipe")
    drawn = trace_table.draw_trace_list(terminal, SUMMARIES, "Traces in .evaltrace")
    plain = capsys.readouterr().out
    assert drawn == (width >= 72)  # narrower, the fixed columns do not fit: rich cuts them, so rich prints
    if drawn:
        assert plain == by_rich
    trace_table.print_trace_list(SUMMARIES, "Traces in .evaltrace")
    assert capsys.readouterr().out == by_rich
    if mode == "terminal" and width == 80:
        assert "\x1b[32m3 pass" in by_rich and "\x1b[31m" in by_rich  # colour really on
        assert "\x1b[1;33m" in by_rich and "\x1b[1mtrace id" in by_rich
    if mode == "terminal NO_COLOR":
        assert "\x1b[32m" not in by_rich and "\x1b[1mtrace id" in by_rich  # bold stays, colours go


def _random_summaries(rng: random.Random, count: int) -> list[TraceSummary]:
    words = ["POST", "/ask", "invoke_agent", "weather-assistant", "x", "a" * 40, "  lead", "trail  ", "µs", "→é"]
    rows = []
    for n in range(count):
        counts = {o: rng.choice([0, 0, 1, 3, 12]) for o in ("pass", "fail", "error", "not_evaluated", "pending")}
        rows.append(
            TraceSummary(
                trace_id=f"{rng.getrandbits(128):032x}",
                root_name=" ".join(rng.choice(words) for _ in range(rng.randint(0, 6))),
                start_time=START + n * 10**12,
                duration_ms=rng.choice([0.0005, 0.5, 1_234.5, 99_999_999.0]),
                span_count=rng.randint(1, 5_000),
                error=rng.random() < 0.3,
                service_name=rng.choice(["", "svc", "my-long-service-name with words"]),
                evaluations=rng.choice([{}, counts]),
                session_id=rng.choice([None, "s-1", "session-" + "x" * 20]),
                user_id=rng.choice([None, "bob"]),
                input_tokens=rng.choice([0, 123_456]),
                output_tokens=rng.choice([0, 20]),
                cost_usd=rng.choice([0.0, 0.0012, 12.5]),
            )
        )
    return rows


@pytest.mark.parametrize("seed", range(2))
def test_the_plain_renderer_matches_rich_on_random_rows_at_every_width(seed: int) -> None:
    rng = random.Random(seed)
    drawn = 0
    for _ in range(4):
        summaries = _random_summaries(rng, rng.randint(1, 25))
        for width in (40, 50, 60, 72, 80, 100, 120, 160, 200, 250):
            for ansi, no_color in ((False, False), (True, False), (True, True)):
                expected = io.StringIO()
                console = Console(
                    file=expected,
                    width=width,
                    force_terminal=ansi,
                    color_system="standard" if ansi else None,
                    no_color=no_color,
                )
                trace_table.render_trace_list(console, summaries, "Traces in .evaltrace/a store")
                out = io.StringIO()
                if trace_table.draw_trace_list(
                    Terminal(out, width, ansi, no_color), summaries, "Traces in .evaltrace/a store"
                ):
                    drawn += 1
                    assert out.getvalue() == expected.getvalue(), (width, ansi, no_color)
                else:
                    assert out.getvalue() == ""  # nothing half-printed before rich takes over
    assert drawn >= 60  # most of the 120 tables are drawn without rich (the rest are the narrowest)


def test_a_cell_rich_may_measure_differently_is_printed_by_rich(
    environment: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    environment.setenv("COLUMNS", "80")
    wide = [TraceSummary("4bf92f3577b34da6a3ce929d0e0e4736", "天気エージェント 👍🏽", START, 1.0, 1, False, "svc")]
    terminal = detect()
    assert terminal is not None
    assert trace_table.draw_trace_list(terminal, wide, "Traces") is False
    assert capsys.readouterr().out == ""
    trace_table.print_trace_list(wide, "Traces")
    shown = capsys.readouterr().out
    trace_table.render_trace_list(Console(), wide, "Traces")
    assert shown == capsys.readouterr().out and "天気エージェント" in shown


def test_every_character_drawn_plainly_is_one_cell_for_rich() -> None:
    assert all(cell_len(character) == 1 for character in _SINGLE_CELL)


@pytest.mark.parametrize(
    "settings",
    [
        {},
        {"COLUMNS": "132"},
        {"COLUMNS": "132", "LINES": "40"},
        {"FORCE_COLOR": "1"},
        {"FORCE_COLOR": ""},
        {"FORCE_COLOR": "1", "NO_COLOR": "1"},
        {"TTY_COMPATIBLE": "1"},
        {"TTY_COMPATIBLE": "0", "FORCE_COLOR": "1"},
        {"NO_COLOR": ""},
    ],
)
def test_the_terminal_is_read_as_rich_reads_it(
    settings: dict[str, str], environment: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name, value in settings.items():
        environment.setenv(name, value)
    terminal = detect()
    console = Console()
    assert terminal is not None
    assert (terminal.width, terminal.ansi, terminal.no_color) == (console.width, console.is_terminal, console.no_color)


def test_a_dumb_terminal_is_left_to_rich(environment: pytest.MonkeyPatch) -> None:
    environment.setenv("FORCE_COLOR", "1")
    environment.setenv("TERM", "dumb")
    assert detect() is None


def test_traces_list_on_a_real_store_prints_what_rich_prints(
    tmp_path: Path, environment: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The command itself, on spans written by the real exporter, at 80 columns in a pipe and a colour terminal."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    from evaltrace.exporters import LocalStoreExporter
    from evaltrace.exporters.store_reader import LocalTraceStore

    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(LocalStoreExporter(tmp_path, writer="thread")))
    tracer = provider.get_tracer("test")
    for n in range(3):
        with tracer.start_as_current_span(f"invoke_agent assistant number {n} with a name that folds at 80"):
            with tracer.start_as_current_span("chat gpt-4o-mini", attributes={"gen_ai.usage.input_tokens": 12}):
                pass
    provider.shutdown()
    environment.setenv("COLUMNS", "80")
    for colour in ({}, {"FORCE_COLOR": "1", "TERM": "xterm"}):
        for name, value in colour.items():
            environment.setenv(name, value)
        assert main(["traces", "list", "--store", str(tmp_path)]) == 0
        shown = capsys.readouterr().out
        trace_table.render_trace_list(Console(), LocalTraceStore(tmp_path).list_traces(), f"Traces in {tmp_path}")
        assert shown == capsys.readouterr().out
        assert shown.count("invoke_agent") == 3


def _sessions() -> list[SessionSummary]:
    def score(evaluator: str, outcome: str | None, value: float | None = None) -> SessionScoreRow:
        return SessionScoreRow(evaluator, 1, outcome, value, None, None, "2025-11-28T18:40:00Z", "s")

    return [
        SessionSummary(
            "chat-42 a session id long enough to fold",
            "ada",
            3,
            START - 600_000_000_000,
            START,
            1_234,
            56,
            0.0042,
            0,
            [score("polite", "fail"), score("helpful", "pass"), score("tone", None, 0.75)],
        ),
        SessionSummary("chat-43", None, 1, START, START, 0, 0, 0.0, 1, [score("polite", "pass")]),
    ]


def _sessions_by_rich(summaries: list[SessionSummary], title: str) -> None:
    """``sessions list`` as rich drew it before issue 28 (its row-building code, unchanged)."""
    from rich.text import Text

    from evaltrace.cli._untrusted import plain
    from evaltrace.cli.format import format_money
    from evaltrace.cli.sessions import _LIST_COLUMNS, _OUTCOME_STYLES, _time, _tokens
    from evaltrace.cli.tables import fit_table, print_fitted

    rows = []
    for s in summaries:
        verdicts = Text()
        for score in s.scores:
            shown = score.outcome or (f"{score.value:g}" if score.value is not None else score.label or "?")
            if verdicts:
                verdicts.append(", ")
            verdicts.append(plain(f"{score.evaluator} ", single_line=True))
            verdicts.append(shown, style=_OUTCOME_STYLES.get(score.outcome or "", ""))
        rows.append(
            [
                plain(s.session_id, single_line=True),
                plain(s.user_id or "", single_line=True),
                str(s.turns),
                _time(s.first_time),
                _time(s.last_time),
                _tokens(s.input_tokens, s.output_tokens),
                format_money(s.cost_usd or None),
                verdicts,
            ]
        )
    console = Console()
    print_fitted(console, fit_table(console.width, _LIST_COLUMNS, rows, plain(title)))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("width", (40, 60, 80, 120))
def test_sessions_list_prints_what_rich_printed(
    width: int, mode: str, environment: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``sessions list`` shares the table code: the same rows give the same bytes as its former rich table."""
    from evaltrace.cli.list_output import print_list
    from evaltrace.cli.sessions import _LIST_COLUMNS, _list_rows

    environment.setenv("COLUMNS", str(width))
    for name, value in MODES[mode].items():
        environment.setenv(name, value)
    _sessions_by_rich(_sessions(), "Sessions in .evaltrace")
    by_rich = capsys.readouterr().out
    if width >= 80:  # wide enough for the plain renderer: rich's table must not be the one drawing
        environment.setattr("evaltrace.cli.tables.fit_table", lambda *args: pytest.fail("rich drew the table"))
    print_list(_LIST_COLUMNS, _list_rows(_sessions()), "Sessions in .evaltrace")
    assert capsys.readouterr().out == by_rich
    assert "polite " in by_rich and ("\x1b[31mfail" in by_rich) == (mode == "terminal")
