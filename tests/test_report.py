"""``evaltrace report``: a self-contained page with waterfall, messages, tool calls, thinking and scores."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from evaltrace.cli import main
from evaltrace.exporters import LocalTraceStore
from evaltrace.report import build_report, report_from_spans
from report_trace import ANSWER, build_demo_trace


@pytest.fixture
def store(tmp_path: Path) -> tuple[Path, str]:
    from evaltrace import config

    try:
        trace_id = build_demo_trace(tmp_path / "store")
    finally:
        handle = config.current_handle()
        if handle is not None:
            handle.shutdown()
    return tmp_path / "store", trace_id


def test_cli_writes_a_self_contained_page(store: tuple[Path, str], tmp_path: Path) -> None:
    directory, trace_id = store
    out = tmp_path / "report.html"
    assert main(["report", trace_id[:10], "-o", str(out), "--store", str(directory)]) == 0
    page = out.read_text()
    assert page.startswith("<!DOCTYPE html>")
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", page), "the page must not load anything"
    assert "<style>" in page and "<script>" in page
    for expected in (
        trace_id,
        "invoke_agent weather",
        "execute_tool get_weather",
        "chat gpt-4o-mini",
        ANSWER,
        "The user wants the weather; call get_weather.",  # thinking
        "sunny, 24C",  # tool result
        "timezone service did not answer",  # the failed tool span's error
        "mentions_city",
        "concise",
    ):
        assert expected in page, expected
    assert "&lt;b&gt;bold?&lt;/b&gt;" in page and "<b>bold?</b>" not in page  # trace content is never markup


def test_scores_come_from_events_and_attributes(store: tuple[Path, str]) -> None:
    directory, trace_id = store
    spans = LocalTraceStore(directory).spans(trace_id)
    data = build_report(spans, None)
    scores = {s.name: s for s in data.scores}
    assert scores["mentions_city"].passed is True
    assert scores["concise"].passed is False and scores["concise"].score == 0.5
    assert {s.span_name for s in data.scores} == {"invoke_agent weather"}
    assert [row.name for row in data.spans][:2] == ["request", "invoke_agent weather"]
    assert [row.depth for row in data.spans][:3] == [0, 1, 2]
    errors = [row for row in data.spans if row.error]
    assert [row.name for row in errors] == ["execute_tool lookup_timezone"]


def test_last_and_missing_traces(store: tuple[Path, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    directory, trace_id = store
    out = tmp_path / "last.html"
    assert main(["report", "last", "-o", str(out), "--store", str(directory)]) == 0
    assert trace_id in out.read_text()
    assert main(["report", "ffffffff", "-o", str(out), "--store", str(directory)]) == 1
    assert "no trace 'ffffffff'" in capsys.readouterr().err


def test_last_names_the_file_after_the_trace(
    store: tuple[Path, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    directory, trace_id = store
    monkeypatch.chdir(tmp_path)
    assert main(["report", "last", "--store", str(directory)]) == 0
    written = tmp_path / f"evaltrace-{trace_id[:16]}.html"  # not evaltrace-last.html, overwritten by the next one
    assert trace_id in written.read_text()
    assert str(written.name) in capsys.readouterr().out
    assert main(["report", "last", "--store", str(tmp_path / "empty")]) == 1
    assert "holds no traces" in capsys.readouterr().err


def test_a_trace_that_cannot_be_mapped_still_renders(store: tuple[Path, str]) -> None:
    directory, trace_id = store
    spans = LocalTraceStore(directory).spans(trace_id)
    page = report_from_spans(spans[1:])  # no root: mapping may complain, the waterfall must not
    assert "invoke_agent weather" in page
