"""Run insights and explanations (issue 29): least accurate and slowest variant, best and worst context retrieval,
the retrieval-versus-generation split of failures, and the heatmap leaderboard of the run report.

One real offline run (:mod:`.insights_project`: its table gives every expected figure), read through
summary.yaml, ``evaltrace runs show`` and ``evaltrace report``.
"""

from __future__ import annotations

import datetime as dt
import html
import re

import pytest

from evaltrace.cli import main
from evaltrace.report.run_insights_html import heatmap_leaderboard
from evaltrace.runner import RunOutcome
from evaltrace.runner.summary import summarise_run
from evaltrace.schema import EvaluationResult, Trace

from .insights_project import run_project


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> RunOutcome:
    return run_project(tmp_path_factory.mktemp("insights"))


@pytest.fixture(scope="module")
def page(demo: RunOutcome, tmp_path_factory: pytest.TempPathFactory) -> str:
    out = tmp_path_factory.mktemp("insights_page") / "run.html"
    assert main(["report", str(demo.run.path), "-o", str(out)]) == 0
    return out.read_text()


def test_summary_yaml_names_least_accurate_slowest_and_retrieval_extremes(demo: RunOutcome) -> None:
    insights = demo.run.read_summary().insights
    assert insights is not None
    assert insights.best_variant == "fast"
    assert insights.least_accurate_variant == "slow"  # 2/7 judged cases passed against 6/8
    assert insights.slowest_variant == "slow"  # sleeps 0.4 s per case
    assert insights.best_retrieval_variant == "fast"
    assert insights.worst_retrieval_variant == "slow"
    assert insights.retrieval_average_by_variant == pytest.approx({"fast": 6.4 / 8, "slow": 5.3 / 8})


def test_failures_are_split_between_retrieval_generation_and_both(demo: RunOutcome) -> None:
    insights = demo.run.read_summary().insights
    assert insights is not None and insights.failure_split is not None
    split = insights.failure_split
    # fast c4 (context only); fast c6, slow c3, slow c7 (answer only); slow c1, c5, c6 (both). slow c8 errored.
    assert (split.retrieval, split.generation, split.both, split.system) == (1, 3, 3, 0)


def test_each_insight_is_explained_with_its_figures(demo: RunOutcome) -> None:
    insights = demo.run.read_summary().insights
    assert insights is not None
    text = "\n".join(insights.explanations)
    assert "slow is the least accurate variant: pass rate 28.6% (2/7 judged cases)." in text
    assert "fast is the most accurate variant: pass rate 75.0% (6/8 judged cases)." in text
    assert re.search(r"slow is the slowest variant: \d+ ms per case on average \(fastest: fast, \d+ ms\)", text)
    assert "fast retrieves context best (average context score 0.80); slow worst (0.66)." in text
    assert "Of 7 failed case(s): 1 retrieval only, 3 generation only, 3 both, 0 system error(s)." in text


def test_runs_show_prints_the_insights(demo: RunOutcome, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["runs", "show", str(demo.run.path)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "least accurate slow" in out and "slowest slow" in out
    assert "best retrieval fast" in out and "worst retrieval slow" in out
    assert "1 retrieval only, 3 generation only, 3 both" in out


def _row(page: str, section: str, variant: str) -> str:
    start = page.index(f'<section id="{section}">')
    body = page[start : page.index("</section>", start)]
    row = body[body.index(f'<tr data-variant="{variant}"') :]
    return row[: row.index("</tr>")]


def test_report_has_a_heatmap_leaderboard_ranked_by_pass_rate(page: str) -> None:
    start = page.index('<section id="leaderboard">')
    board = page[start : page.index("</section>", start)]
    ranks = re.findall(r'<tr data-variant="([^"]+)" data-rank="(\d)"', board)
    assert ranks == [("fast", "1"), ("slow", "2")]
    fast, slow = _row(page, "leaderboard", "fast"), _row(page, "leaderboard", "slow")
    # Pass rate, then each evaluator's average score: the value and a colour from red (0) to green (1).
    assert re.findall(r'data-value="([0-9.]+)"', fast) == ["0.7500", "0.7375", "0.8000"]
    assert re.findall(r'data-value="([0-9.]+)"', slow) == ["0.2857", "0.4125", "0.6625"]
    assert "background:hsl(90,70%,82%)" in fast and "background:hsl(34,70%,82%)" in slow
    assert "flaky on slow: not judged" in slow  # an evaluator that never judged is never coloured


def test_report_insights_section_shows_the_new_insights(page: str) -> None:
    start = page.index('<section id="insights">')
    section = html.unescape(page[start : page.index("</section>", start)])
    for fact in ("least accurate variant: <b>slow", "slowest variant: <b>slow", "best context retrieval: <b>fast",
                 "worst context retrieval: <b>slow"):  # fmt: skip
        assert fact in section
    assert re.search(r'data-split="retrieval">retrieval <b>1</b>.*data-split="generation">generation <b>3</b>'
                     r'.*data-split="both">both <b>3</b>', section)  # fmt: skip
    assert "slow is the least accurate variant: pass rate 28.6% (2/7 judged cases)." in section


def test_leaderboard_escapes_names_from_the_run() -> None:
    now = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    name = "<b>x</b>"
    traces = [Trace(case_id="c", variant_name=name, started_at=now, finished_at=now, run_id="r")]
    results = [EvaluationResult(evaluator="<i>e</i>", variant_name=name, case_id="c", passed=True, score=1.0)]
    summary, _ = summarise_run(run_id="r", started_at=now, finished_at=now, config_path="", config_hash="",
                               variant_names=[name], traces=traces, results=results)  # fmt: skip
    board = heatmap_leaderboard(summary)
    assert "<b>x</b>" not in board.replace("<b>&lt;b&gt;x&lt;/b&gt;</b>", "") and "&lt;i&gt;e&lt;/i&gt;" in board


def test_report_has_the_evaluation_analytics(page: str) -> None:
    start = page.index('<section id="analytics">')
    section = html.unescape(page[start : page.index("</section>", start)])
    for fact in ("evaluations: <b>48", "completed: <b>32", "errored: <b>1<", "not evaluated: <b>15",
                 "success rate: <b>97.0%", "evaluator agreement: <b>75.0% of 16 cell(s)",
                 "confidence: <b>high 50.0%, medium 50.0%, low 0.0%"):  # fmt: skip
        assert fact in section, fact


def test_leaderboard_colours_a_lower_is_better_score_the_other_way() -> None:
    now = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    traces = [Trace(case_id="c", variant_name=v, started_at=now, finished_at=now, run_id="r") for v in ("a", "b")]
    results = [
        EvaluationResult(evaluator="error_rate", variant_name="a", case_id="c", passed=True, score=0.0),
        EvaluationResult(evaluator="error_rate", variant_name="b", case_id="c", passed=False, score=0.9),
    ]
    summary, _ = summarise_run(run_id="r", started_at=now, finished_at=now, config_path="", config_hash="",
                               variant_names=["a", "b"], traces=traces, results=results)  # fmt: skip
    board = heatmap_leaderboard(summary, frozenset({"error_rate"}))
    a = board[board.index('<tr data-variant="a"') :]
    b = board[board.index('<tr data-variant="b"') :]
    assert 'data-value="1.0000" style="background:hsl(120,70%,82%)" title="error_rate on a: avg 0.00 (lower' in a
    assert 'data-value="0.1000" style="background:hsl(12,70%,82%)" title="error_rate on b: avg 0.90 (lower' in b
