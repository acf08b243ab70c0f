"""Money, durations and id prefixes as the terminal prints them; tables that fit; --version and --help examples."""

from __future__ import annotations

import pytest
from rich.cells import cell_len
from rich.console import Console
from rich.text import Text

from evaltrace import __version__
from evaltrace.cli import build_parser, main
from evaltrace.cli.examples import walk_commands
from evaltrace.cli.format import format_duration_ms, format_duration_ns, format_money, unique_prefixes
from evaltrace.cli.tables import Column, fit_table, print_fitted


@pytest.mark.parametrize(
    ("usd", "shown"),
    [
        (4.185e-05, "$0.000042"),
        (0.0123, "$0.0123"),
        (0.5, "$0.50"),
        (0.0, "$0.00"),
        (1234.567, "$1,234.57"),
        (1e-9, "<$0.000001"),
        (5e-7, "<$0.000001"),  # rounds to $0.000000: decided on the printed digits, not a threshold
        (-5e-7, "-<$0.000001"),
        (-0.0, "$0.00"),  # negative zero is zero
        (0.999_999_6, "$1.00"),
        (-0.25, "-$0.25"),
        (None, ""),
        (float("nan"), ""),
    ],
)
def test_money_is_never_in_exponent_form(usd: float | None, shown: str) -> None:
    assert format_money(usd) == shown


@pytest.mark.parametrize(
    ("ns", "shown"),
    [
        (420, "420 ns"),
        (850_000, "850 µs"),
        (999_700, "1.00 ms"),  # rounded before the unit is chosen: never "1000 µs"
        (12_340_000, "12.3 ms"),
        (1_244_900_000, "1.24 s"),
        (59_990_000_000, "1m00s"),
        (125_000_000_000, "2m05s"),
        (3_725_000_000_000, "1h02m"),
        (90_000_000_000_000, "1d01h"),
        (-5, "0 ns"),
        (None, ""),
    ],
)
def test_durations_read_as_people_say_them(ns: float | None, shown: str) -> None:
    assert format_duration_ns(ns) == shown


def test_duration_in_ms() -> None:
    assert format_duration_ms(6243.0) == "6.24 s" and format_duration_ms(None) == ""


def test_prefixes_are_unique_and_at_least_twelve_digits() -> None:
    ids = ["5f2b8c1e9d3a47b6a0c4", "5f2b8c1e9d3a47ff0011", "0a1b2c3d4e5f60718293", "0a1b2c3d4e5f60718293"]
    prefixes = unique_prefixes(ids)
    assert prefixes == {
        "5f2b8c1e9d3a47b6a0c4": "5f2b8c1e9d3a47b",
        "5f2b8c1e9d3a47ff0011": "5f2b8c1e9d3a47f",
        "0a1b2c3d4e5f60718293": "0a1b2c3d4e5f",
    }
    for full, short in prefixes.items():
        assert [i for i in set(ids) if i.startswith(short)] == [full]


def _render(width: int, columns: list[Column], rows: list[list[Text | str]]) -> str:
    console = Console(width=width, color_system=None, record=True, file=None)
    with console.capture() as captured:
        print_fitted(console, fit_table(width, columns, rows, "title"))
    return captured.get()


COLUMNS = [
    Column("id"),
    Column("name", fold=True, min_width=8),
    Column("empty", drop=9),
    Column("detail", fold=True, min_width=8, drop=1),
    Column("cost", justify="right", drop=2),
]
ROWS: list[list[Text | str]] = [
    [Text("0a1b2c3d4e5f60718293a4b5c6d7e8f9"), Text("a long span name that folds"), "", "reason " * 8, "$0.000042"],
    [Text("5f2b8c1e9d3a47b6a0c4e8f1d2b3a4c5"), Text("short"), "", "", "$1.20"],
]


@pytest.mark.parametrize("width", [50, 60, 80, 120])
def test_fixed_cells_are_never_cut_and_lines_fit(width: int) -> None:
    shown = _render(width, COLUMNS, ROWS)
    assert "…" not in shown
    assert all(cell_len(line) <= width for line in shown.splitlines())
    assert "0a1b2c3d4e5f60718293a4b5c6d7e8f9" in shown and "5f2b8c1e9d3a47b6a0c4e8f1d2b3a4c5" in shown
    assert "empty" not in shown  # a column with nothing in it is not shown at all, nor announced


def test_narrow_tables_drop_optional_columns_in_order_and_say_so() -> None:
    wide = fit_table(200, COLUMNS, ROWS)
    assert [str(c.header) for c in wide.table.columns] == ["id", "name", "detail", "cost"] and not wide.hidden
    narrow = fit_table(50, COLUMNS, ROWS)
    assert [str(c.header) for c in narrow.table.columns] == ["id", "name"]
    assert narrow.hidden == ["detail", "cost"]
    assert "not shown at this width: detail, cost" in " ".join(_render(50, COLUMNS, ROWS).split())


def test_recorded_header_is_not_markup() -> None:
    shown = _render(80, [Column("[bold]x[/bold]")], [["1"]])
    assert "[bold]x[/bold]" in shown


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out.strip() == f"evaltrace {__version__}"


def test_every_command_help_has_an_example() -> None:
    commands = list(walk_commands(build_parser()))
    assert {"traces list", "traces show", "runs show", "compare", "scores replay", "worker"} <= {p for p, _ in commands}
    for path, parser in commands:
        shown = parser.format_help()
        assert "example" in shown, f"`evaltrace {path} --help` has no example"
        assert "\n  evaltrace " in shown or f"\n    evaltrace {path}" in shown, path  # kept on lines of their own
