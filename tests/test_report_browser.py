"""The trace report in a real headless Chromium, driven over the DevTools protocol (tests/cdp_pipe.py).

Checked on the DOM the browser renders, as a user would see it: the header's session, user, tags and
evaluation badge; a click on an LLM span unfolds its chat (roles in order, tool call with its arguments,
reasoning folded until clicked, raw attributes folded); money, never exponents; recorded ``<script>`` inert;
no console error and no request beyond the file itself. Skips (with the reason) when no Chromium is installed,
except under CI (``CI=true``), where it fails.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cdp_pipe import Browser
from evaltrace import config
from evaltrace.report import write_report
from outcome_trace import ALL_SKIPPED, MIXED, judge, record_trace, relevance
from report_trace import SCRIPT, SESSION, USER_ID, build_demo_trace
from test_report_screenshot import chromium

WIDTH, HEIGHT = 1280, 900


def _shutdown() -> None:
    handle = config.current_handle()
    if handle is not None:
        handle.shutdown()


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("trace_report_browser")
    try:
        trace_id = build_demo_trace(root / "store")
    finally:
        _shutdown()
    return write_report(trace_id, root / "report.html", root / "store")


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Browser]:
    session = Browser(chromium(), tmp_path / "profile")
    try:
        yield session
    finally:
        session.close()


def _text(browser: Browser, selector: str) -> Any:
    return browser.evaluate(f"document.querySelector({json.dumps(selector)}).innerText")


def _visible(browser: Browser, element: str) -> Any:
    # checkVisibility() knows that the content of a closed <details> is not rendered (getClientRects does not).
    return browser.evaluate(f"{element}.checkVisibility()")


def _centre(browser: Browser, element: str) -> tuple[float, float]:
    box = browser.evaluate(
        f"(function(e){{e.scrollIntoView({{block: 'center'}}); var r = e.getBoundingClientRect();"
        f" return [r.left + r.width / 2, r.top + r.height / 2]}})({element})"
    )
    return box[0], box[1]


def test_header_shows_who_and_the_evaluation_badge(report: Path, browser: Browser) -> None:
    browser.open(report.as_uri(), WIDTH, HEIGHT)
    assert browser.evaluate("document.body.getAttribute('data-report-ready')") == "6"  # the inline script ran
    assert _text(browser, "header .badge.verdict") == "fail"
    assert browser.evaluate("document.querySelector('header .badge.verdict').dataset.verdict") == "fail"
    counts = browser.evaluate("Array.from(document.querySelectorAll('header .evals .badge')).map(b => b.innerText)")
    assert counts == ["1 pass", "1 fail"]
    assert _text(browser, "[data-field=session]") == SESSION and _text(browser, "[data-field=user]") == USER_ID
    tags = browser.evaluate("Array.from(document.querySelectorAll('header .tag')).map(t => t.innerText)")
    assert tags == ["beta", "<i>vip</i>"]
    assert browser.evaluate("document.querySelectorAll('header i, main img').length") == 0
    assert _text(browser, "[data-field=tokens]") == "149 in / 43 out"
    assert _text(browser, "[data-field=cost]") == "$0.000042"
    assert "e-05" not in browser.evaluate("document.body.innerText")  # raw values stay folded away
    assert browser.evaluate("document.documentElement.scrollWidth") <= WIDTH  # no horizontal overflow
    assert browser.console_errors() == []
    assert browser.requests() == [report.as_uri()], "the page must fetch nothing but itself"


def test_clicking_an_llm_span_shows_its_chat(report: Path, browser: Browser) -> None:
    browser.open(report.as_uri(), WIDTH, HEIGHT)
    span = "document.querySelectorAll('details.span[data-kind=llm]')[0]"
    assert browser.evaluate(f"{span}.querySelector('.num.cost').innerText") == "$0.000042"
    assert browser.evaluate(f"{span}.querySelector('.num.tokens').innerText") == "52 → 31"
    assert not _visible(browser, f"{span}.querySelector('.bubble')")
    browser.click(*_centre(browser, f"{span}.querySelector('summary')"))
    assert browser.evaluate(f"{span}.open") is True

    roles = browser.evaluate(f"Array.from({span}.querySelectorAll('.bubble')).map(b => b.dataset.role)")
    assert roles == ["system", "user", "assistant"]
    assert _visible(browser, f"{span}.querySelector('.bubble.user')")
    user_text = browser.evaluate(f"{span}.querySelector('.bubble.user .content').innerText")
    assert SCRIPT in user_text  # shown as text ...
    assert browser.evaluate("typeof window.__pwned") == "undefined"  # ... and never run
    call = f"{span}.querySelector('.bubble.assistant .toolcall')"
    assert browser.evaluate(f"{call}.dataset.tool") == "get_weather"
    assert json.loads(browser.evaluate(f"{call}.querySelector('pre').innerText")) == {"city": "Paris"}

    thinking = f"{span}.querySelector('.bubble.assistant details.thinking')"
    assert browser.evaluate(f"{thinking}.open") is False
    assert not _visible(browser, f"{thinking}.querySelector('pre')")
    assert "The user wants the weather" not in browser.evaluate(f"{span}.innerText")
    browser.click(*_centre(browser, f"{thinking}.querySelector('summary')"))
    assert browser.evaluate(f"{thinking}.querySelector('pre').innerText") == (
        "The user wants the weather; call get_weather."
    )
    assert _visible(browser, f"{thinking}.querySelector('pre')")

    raw = f"{span}.querySelector('details.raw')"
    assert browser.evaluate(f"{raw}.open") is False
    assert browser.evaluate(f"{raw}.querySelector('summary').innerText").startswith("Raw attributes (")
    browser.click(*_centre(browser, f"{raw}.querySelector('summary')"))
    assert "gen_ai.input.messages" in browser.evaluate(f"{raw}.innerText")
    assert browser.console_errors() == []


@pytest.mark.parametrize(
    ("evaluators", "verdict", "text"),
    [
        ((relevance,), "pass", "pass"),
        (MIXED, "fail", "fail"),
        ((relevance, judge), "error", "error"),
        (ALL_SKIPPED, "not_evaluated", "not evaluated"),
    ],
)
def test_the_badge_each_outcome_renders(
    tmp_path: Path, browser: Browser, evaluators: tuple[object, ...], verdict: str, text: str
) -> None:
    try:
        trace_id = record_trace(tmp_path / "store", evaluators)
    finally:
        _shutdown()
    page = write_report(trace_id, tmp_path / "report.html", tmp_path / "store")
    browser.open(page.as_uri(), WIDTH, HEIGHT)
    badge = "document.querySelector('header .badge.verdict')"
    assert browser.evaluate(f"[{badge}.dataset.verdict, {badge}.innerText]") == [verdict, text]
    assert browser.console_errors() == []
