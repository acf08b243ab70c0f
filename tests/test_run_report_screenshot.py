"""The run report in a real headless Chromium, driven over the DevTools protocol (tests/cdp_pipe.py).

Checked like a user would see it: no console error and no request beyond the file itself, every matrix cell
painted in its outcome's colour and laid out as a grid, a click on a cell opening that cell's trace, the XSS
payloads of the demo run inert. Skips (with the reason) when no Chromium is installed, except under CI
(``CI=true``), where it fails. Install on Debian: ``apt-get install chromium``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cdp_pipe import Browser
from evaltrace.report.run_report import write_run_report
from evaltrace.runner.rundir import TRACES_FILE
from run_report_project import EXPECTED, run_project
from test_report_screenshot import (
    ERROR_RGB,
    FAIL_RGB,
    HEADER_RGB,
    NEUTRAL_RGB,
    PAGE_RGB,
    PASS_RGB,
    chromium,
    decode_png,
    pixel,
)

WIDTH, HEIGHT = 1280, 900
COLOURS = {"pass": PASS_RGB, "fail": FAIL_RGB, "error": ERROR_RGB, "not_evaluated": NEUTRAL_RGB}
CELLS_JS = """Array.from(document.querySelectorAll('a.cell')).map(function(a){
  var r = a.getBoundingClientRect();
  return {id: a.getAttribute('data-open'), outcome: a.getAttribute('data-outcome'), case: a.getAttribute('data-case'),
          variant: a.getAttribute('data-variant'), x: r.left, y: r.top, w: r.width, h: r.height};
})"""


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("run_report_browser")
    outcome = run_project(root)
    return write_run_report(outcome.run, root / "run.html")


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Browser]:
    session = Browser(chromium(), tmp_path / "profile")
    try:
        yield session
    finally:
        session.close()


def _cells(browser: Browser) -> list[dict[str, Any]]:
    cells: list[dict[str, Any]] = browser.evaluate(CELLS_JS)
    return cells


def test_page_loads_clean_and_the_matrix_is_painted_as_a_grid(report: Path, browser: Browser) -> None:
    browser.open(report.as_uri(), WIDTH, HEIGHT)
    assert browser.evaluate("document.body.getAttribute('data-report-ready')") == "10"  # the inline script ran
    assert browser.console_errors() == []
    assert browser.requests() == [report.as_uri()], "the page must fetch nothing but itself"
    assert browser.evaluate("typeof window.__pwned") == "undefined"  # the run's <script> payloads are text
    assert browser.evaluate("document.documentElement.scrollWidth") <= WIDTH  # no horizontal overflow

    cells = _cells(browser)
    assert {(c["variant"], c["case"]): c["outcome"] for c in cells} == {
        (v, case): o for v, by_case in EXPECTED.items() for case, o in by_case.items()
    }
    # A grid: one row per case (same top), one column per variant (same left), v1 left of v2.
    rows: dict[str, set[float]] = {}
    columns: dict[str, set[float]] = {}
    for c in cells:
        rows.setdefault(c["case"], set()).add(round(c["y"]))
        columns.setdefault(c["variant"], set()).add(round(c["x"]))
    assert all(len(tops) == 1 for tops in rows.values()) and all(len(lefts) == 1 for lefts in columns.values())
    assert min(columns["v1"]) < min(columns["v2"])
    tops = [next(iter(rows[case])) for case in EXPECTED["v1"]]
    assert tops == sorted(tops), "rows follow the dataset order"

    _, height, shot = decode_png(browser.screenshot())
    assert height == HEIGHT
    assert pixel(shot, 5, 5) == HEADER_RGB, "the inline stylesheet was not applied"
    assert pixel(shot, 5, HEIGHT - 5) == PAGE_RGB
    for c in cells:
        assert c["y"] + c["h"] < HEIGHT, f"cell {c['case']} × {c['variant']} is below the fold"
        # A pixel inside the cell, left of its centred text, carries the outcome's colour.
        x, y = int(c["x"] + 4), int(c["y"] + c["h"] / 2)
        assert pixel(shot, x, y) == COLOURS[c["outcome"]], (c, pixel(shot, x, y))


def test_clicking_a_cell_opens_that_cells_trace(report: Path, browser: Browser) -> None:
    browser.open(report.as_uri(), WIDTH, HEIGHT)
    target = next(c for c in _cells(browser) if (c["variant"], c["case"]) == ("v2", "ok"))
    browser.click(target["x"] + target["w"] / 2, target["y"] + target["h"] / 2)
    opened = browser.evaluate("Array.from(document.querySelectorAll('dialog[open]')).map(function(d){return d.id})")
    assert opened == [target["id"]]
    dialog = f"document.getElementById('{target['id']}')"
    assert (
        browser.evaluate(f"{dialog}.getAttribute('data-case') + '/' + {dialog}.getAttribute('data-variant')") == "ok/v2"
    )
    assert "missing: 'alpha'" in browser.evaluate(f"{dialog}.innerText")  # its evaluation
    assert "nothing" in browser.evaluate(f"{dialog}.querySelector('.content').innerText")  # its answer

    head = browser.evaluate(
        f"(function(r){{return [r.left, r.top, r.width]}})({dialog}.querySelector('.dhead').getBoundingClientRect())"
    )
    _, _, shot = decode_png(browser.screenshot())
    assert pixel(shot, int(head[0] + 4), int(head[1] + 4)) == HEADER_RGB  # the dialog is on top, its header shown
    assert pixel(shot, 5, HEIGHT - 5) != PAGE_RGB  # the page behind is dimmed by the backdrop
    assert head[2] > WIDTH / 2

    close = browser.evaluate(
        f"(function(r){{return [r.left + r.width / 2, r.top + r.height / 2]}})"
        f"({dialog}.querySelector('[data-close]').getBoundingClientRect())"
    )
    browser.click(*close)
    assert browser.evaluate("document.querySelectorAll('dialog[open]').length") == 0

    # The XSS cell's trace: its answer, input and error are shown as text and never run.
    xss = next(c for c in _cells(browser) if (c["variant"], c["case"]) == ("v1", "xss"))
    browser.click(xss["x"] + xss["w"] / 2, xss["y"] + xss["h"] / 2)
    text = browser.evaluate(f"document.getElementById('{xss['id']}').innerText")
    assert "<script>window.__pwned = 1</script>" in text
    assert browser.evaluate("typeof window.__pwned") == "undefined"
    assert browser.evaluate(f"document.getElementById('{xss['id']}').querySelectorAll('img, script').length") == 0
    assert browser.console_errors() == []


def test_a_link_to_a_cell_opens_its_trace(report: Path, browser: Browser) -> None:
    browser.open(report.as_uri() + "#t-3", WIDTH, HEIGHT)
    assert browser.evaluate("document.body.getAttribute('data-open-trace')") == "t-3"
    assert browser.evaluate("document.getElementById('t-3').open") is True
    assert browser.console_errors() == []


def test_each_terminal_trace_reference_opens_that_cell(report: Path, browser: Browser) -> None:
    """``traces.jsonl:N`` (what ``evaltrace run`` prints) and ``run.html#t-N`` name the same case and variant."""
    lines = (report.parent / "runs").glob(f"*/{TRACES_FILE}")
    traces = next(lines).read_text(encoding="utf-8").splitlines()
    assert len(traces) == 10
    for number, line in enumerate(traces, start=1):
        recorded = json.loads(line)
        browser.open(report.as_uri() + f"#t-{number}", WIDTH, HEIGHT)
        opened = browser.evaluate(
            "(function(d){return d && d.open ? [d.id, d.getAttribute('data-case'), d.getAttribute('data-variant')]"
            " : null})(document.querySelector('dialog[open]'))"
        )
        assert opened == [f"t-{number}", recorded["case_id"], recorded["variant_name"]], (number, opened)
    assert browser.console_errors() == []


WATERFALL_JS = """Array.from(document.querySelectorAll('dialog.trace')).map(function(d){
  return {id: d.id, case: d.getAttribute('data-case'), variant: d.getAttribute('data-variant'),
          rows: Array.from(d.querySelectorAll('.waterfall-cell .wf-row')).map(function(r){
            return [r.getAttribute('data-kind'), r.querySelector('.wf-name').innerText.trim()];
          })};
})"""


def test_each_cell_shows_its_span_waterfall(report: Path, browser: Browser) -> None:
    browser.open(report.as_uri(), WIDTH, HEIGHT)
    dialogs = browser.evaluate(WATERFALL_JS)
    assert len(dialogs) == 10
    for dialog in dialogs:
        kinds_names = dialog["rows"]
        assert kinds_names[0] == ["task", "taskevaltrace.case"], dialog  # the case's own span is the root
        assert ["agent", "agentinvoke_agent sut"] in kinds_names, dialog
        # Every answer but the two that return early went through the tool: its span is in the waterfall.
        early = (dialog["case"], dialog["variant"]) in {("xss", "v1"), ("ok", "v2"), ("xss", "v2")}
        assert (["tool", "toolexecute_tool lookup"] in kinds_names) is not early, dialog
    # Opened, the rows are drawn: each bar has a width and sits inside its track.
    browser.open(report.as_uri() + "#t-1", WIDTH, HEIGHT)
    bars = browser.evaluate(
        "Array.from(document.querySelectorAll('#t-1 .wf-row')).map(function(r){"
        "var b = r.querySelector('.wf-bar').getBoundingClientRect(), t = r.querySelector('.wf-track')"
        ".getBoundingClientRect(); return [b.width, b.left >= t.left - 0.5, b.right <= t.right + 0.5];})"
    )
    assert bars and all(width > 0 and inside_left and inside_right for width, inside_left, inside_right in bars), bars
    assert browser.console_errors() == []


def test_answers_are_side_by_side_per_case(report: Path, browser: Browser) -> None:
    browser.open(report.as_uri() + "#side-by-side", WIDTH, HEIGHT)
    cells = browser.evaluate(
        "Array.from(document.querySelectorAll('#side-by-side td.answer')).map(function(td){var r ="
        " td.getBoundingClientRect(); return {case: td.getAttribute('data-case'), variant:"
        " td.getAttribute('data-variant'), text: td.innerText, x: r.left, y: r.top, h: r.height};})"
    )
    by_cell = {(c["case"], c["variant"]): c for c in cells}
    assert set(by_cell) == {(case, v) for v, by_case in EXPECTED.items() for case in by_case}
    assert "ok: alpha" in by_cell["ok", "v1"]["text"] and "nothing" in by_cell["ok", "v2"]["text"]
    assert "RuntimeError: v2 exploded" in by_cell["xss", "v2"]["text"]  # the system's error, where the answer was
    for case in EXPECTED["v1"]:
        left, right = by_cell[case, "v1"], by_cell[case, "v2"]
        assert round(left["y"]) == round(right["y"]) and left["x"] < right["x"], case  # one row, v1 then v2
        assert left["h"] > 0
    assert browser.evaluate("typeof window.__pwned") == "undefined"
    assert browser.console_errors() == []


HEAT_JS = """Array.from(document.querySelectorAll('#leaderboard td.heat[data-value]')).map(function(td){
  var m = getComputedStyle(td).backgroundColor.match(/\\d+/g).map(Number);
  return {value: parseFloat(td.getAttribute('data-value')), r: m[0], g: m[1], b: m[2]};
})"""


def test_the_leaderboard_is_painted_as_a_heatmap(report: Path, browser: Browser) -> None:
    browser.open(report.as_uri(), WIDTH, HEIGHT)
    cells: list[dict[str, float]] = browser.evaluate(HEAT_JS)
    assert len(cells) >= 4  # two variants: pass rate and contains_text each
    # Red at 0, green at 1: the higher a cell's value, the greener it is painted (green minus red grows).
    ordered = sorted(cells, key=lambda c: c["value"])
    greenness = [c["g"] - c["r"] for c in ordered]
    assert greenness == sorted(greenness) and greenness[0] < 0 < greenness[-1], ordered
