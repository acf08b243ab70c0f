"""The terminal waterfall and the HTML report show error and "not evaluated" apart from pass and fail (issue 11).

Traces are recorded through the real pipeline into a real local store (``outcome_trace``); the report is also
checked on spans as evaltrace wrote them before outcomes existed (``passed=False`` for an errored evaluation).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.trace import SpanContext, StatusCode, TraceFlags

from evaltrace import config
from evaltrace.cli import main
from evaltrace.exporters import LocalTraceStore
from evaltrace.report import build_report, report_from_spans
from outcome_trace import ALL_SKIPPED, MIXED, record_trace, relevance


def _record(store: Path, evaluators: tuple[object, ...]) -> str:
    try:
        return record_trace(store, evaluators)
    finally:
        handle = config.current_handle()
        if handle is not None:
            handle.shutdown()


@pytest.fixture
def mixed(tmp_path: Path) -> tuple[Path, str]:
    return tmp_path / "store", _record(tmp_path / "store", MIXED)


@pytest.fixture
def skipped(tmp_path: Path) -> tuple[Path, str]:
    return tmp_path / "skipped", _record(tmp_path / "skipped", ALL_SKIPPED)


def _show(store: Path, trace_id: str, capsys: pytest.CaptureFixture[str], *extra: str) -> str:
    assert main(["traces", "show", trace_id, "--store", str(store), *extra]) == 0
    return " ".join(capsys.readouterr().out.split())  # rich wraps long cells: compare on collapsed whitespace


def test_waterfall_marks_error_and_not_evaluated(
    mixed: tuple[Path, str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "240")
    shown = _show(*mixed, capsys)
    assert "relevance=0.82 pass" in shown and "concise=0.50 fail" in shown
    assert "judge=ERROR(ConnectionError)" in shown
    assert "faithful=not evaluated (no reference answer)" in shown
    assert "evaluations: 1 pass · 1 fail · 1 error · 1 not evaluated" in shown
    assert "judge=fail" not in shown and "faithful=fail" not in shown
    details = _show(*mixed, capsys, "--details")
    assert "evaluation judge=ERROR(ConnectionError) evaluator failed: ConnectionError: judge unreachable" in details


def test_waterfall_of_a_trace_nothing_judged_says_not_evaluated(
    skipped: tuple[Path, str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "240")
    shown = _show(*skipped, capsys)
    assert "faithful=not evaluated (no reference answer)" in shown
    assert "grounded=not evaluated (no retrieved documents)" in shown
    assert "evaluations: 2 not evaluated" in shown
    assert "pass" not in shown


def _header(page: str) -> str:
    match = re.search(r"<header>(.*?)</header>", page, re.S)
    assert match is not None
    return match.group(1)


def test_report_header_counts_outcomes_and_never_says_ok(mixed: tuple[Path, str]) -> None:
    store, trace_id = mixed
    spans = LocalTraceStore(store).spans(trace_id)
    data = build_report(spans, None)
    rows = {row.name: row for row in data.scores}
    assert {name: row.outcome for name, row in rows.items()} == {
        "relevance": "pass",
        "concise": "fail",
        "judge": "error",
        "faithful": "not_evaluated",
    }
    assert rows["judge"].passed is None and rows["judge"].error_type == "ConnectionError"
    assert rows["faithful"].passed is None and rows["faithful"].explanation == "no reference answer"
    page = report_from_spans(spans)
    header = _header(page)
    assert re.search(r'data-outcome="pass">1 pass<', header)
    assert re.search(r'data-outcome="fail">1 fail<', header)
    assert re.search(r'class="badge error" data-outcome="error">1 error<', header)
    assert re.search(r'data-outcome="not_evaluated">1 not evaluated<', header)
    assert ">ok<" not in header and "passed" not in header
    assert "Scores &middot; 1 pass &middot; 1 fail &middot; 1 error &middot; 1 not evaluated" in page
    assert '<span class="badge error">error: ConnectionError</span>' in page
    assert '<span class="badge neutral">not evaluated</span></td><td>no reference answer</td>' in page


def test_report_of_a_trace_nothing_judged_says_not_evaluated(skipped: tuple[Path, str]) -> None:
    store, trace_id = skipped
    page = report_from_spans(LocalTraceStore(store).spans(trace_id))
    header = _header(page)
    assert 'data-outcome="not_evaluated">2 not evaluated<' in header
    assert not re.search(r">\d+ (pass|fail|error)<", header) and ">ok<" not in header
    assert "Scores &middot; 2 not evaluated</h2>" in page
    assert "no reference answer" in page and "no retrieved documents" in page


def test_report_of_a_trace_without_evaluations_says_not_evaluated(tmp_path: Path) -> None:
    trace_id = _record(tmp_path / "none", ())
    header = _header(report_from_spans(LocalTraceStore(tmp_path / "none").spans(trace_id)))
    assert 'data-outcome="none">not evaluated<' in header and ">ok<" not in header


def test_report_reads_errors_right_on_traces_written_before_outcomes() -> None:
    """Before outcomes, an errored evaluation was written as passed=False with error.type on its event."""
    context = SpanContext(0x1F, 0x2F, is_remote=False, trace_flags=TraceFlags(TraceFlags.SAMPLED))
    event = Event(
        "gen_ai.evaluation.result",
        {"gen_ai.evaluation.name": "judge", "gen_ai.evaluation.score.label": "fail", "error.type": "timeout"},
        timestamp=2,
    )
    skipped = Event(
        "gen_ai.evaluation.result",
        {"gen_ai.evaluation.name": "ref", "gen_ai.evaluation.score.label": "skipped"},
        timestamp=2,
    )
    span = ReadableSpan(
        name="chat",
        context=context,
        attributes={"evaltrace.eval.judge.passed": False, "evaltrace.eval.failed": True},
        events=[event, skipped],
        start_time=1,
        end_time=2,
    )
    rows = {row.name: row for row in build_report([span], None).scores}
    assert (rows["judge"].outcome, rows["judge"].passed) == ("error", None)
    assert (rows["ref"].outcome, rows["ref"].passed) == ("not_evaluated", None)


def test_a_late_evaluation_error_is_no_application_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The late ``evaluation`` span is ERROR (its operation failed), but the trace is not shown as failing."""
    store = tmp_path / "late"
    try:
        trace_id = record_trace(store, (relevance,), late=True)
    finally:
        handle = config.current_handle()
        if handle is not None:
            handle.shutdown()
    spans = LocalTraceStore(store).spans(trace_id)
    (child,) = [s for s in spans if s.name == "evaluation late_judge"]
    assert child.status.status_code is StatusCode.ERROR
    monkeypatch.setenv("COLUMNS", "240")
    assert main(["traces", "list", "--store", str(store)]) == 0
    listed = capsys.readouterr().out
    assert "ERROR" not in listed and " ok " in listed
    header = _header(report_from_spans(spans))
    assert "span error" not in header
    assert 'data-outcome="error">1 error<' in header and 'data-outcome="pass">1 pass<' in header
    shown = _show(store, trace_id, capsys)
    assert "late_judge=ERROR(ConnectionError)" in shown and "evaluations: 1 pass · 1 error" in shown
