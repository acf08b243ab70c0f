"""``evaltrace report <run>``: one self-contained page with the case × variant matrix and each cell's trace."""

from __future__ import annotations

import html
import json
import re
import shutil
from pathlib import Path

import pytest

from evaltrace.cli import main
from evaltrace.report.run_model import build_run_report
from evaltrace.report.run_report import render_run_report, write_run_report
from evaltrace.runner import RunDirectory, RunOutcome
from evaltrace.runner.rundir import SUMMARY_FILE, TRACES_FILE
from evaltrace.runner.summary import case_outcomes
from run_report_project import EXPECTED, XSS, run_project


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> RunOutcome:
    return run_project(tmp_path_factory.mktemp("run_report"))


@pytest.fixture(scope="module")
def page(demo: RunOutcome, tmp_path_factory: pytest.TempPathFactory) -> str:
    out = tmp_path_factory.mktemp("page") / "run.html"
    assert main(["report", str(demo.run.path), "-o", str(out)]) == 0
    return out.read_text()


CELL = re.compile(r'<a class="cell [a-z]+" href="#(t-\d+)" data-open="\1" data-outcome="([a-z_]+)" '
                  r'data-case="([^"]*)" data-variant="([^"]*)" title="([^"]*)">')  # fmt: skip


def cells(page: str) -> dict[tuple[str, str], tuple[str, str, str]]:
    """(variant, case) -> (outcome, dialog id, title) of every matrix cell."""
    found = {}
    for dom_id, outcome, case, variant, title in CELL.findall(page):
        found[html.unescape(variant), html.unescape(case)] = (outcome, dom_id, html.unescape(title))
    return found


def test_matrix_cells_have_the_summary_outcomes(demo: RunOutcome, page: str) -> None:
    shown = {key: outcome for key, (outcome, _, _) in cells(page).items()}
    expected = {(v, c): o for v, by_case in EXPECTED.items() for c, o in by_case.items()}
    assert shown == expected
    # The very function summary.yaml is computed with, not a second opinion.
    computed = case_outcomes(demo.traces, demo.results)
    assert shown == {(v, c): o for v, by_case in computed.items() for c, o in by_case.items()}
    # Error and not-evaluated cells are never styled as pass or fail.
    assert 'class="cell error"' in page and 'class="cell neutral"' in page


def test_hover_gives_each_evaluators_verdict_score_and_reason(page: str) -> None:
    by_cell = cells(page)
    assert "contains_text: fail 0.00 - missing: 'alpha'" in by_cell["v2", "ok"][2]
    assert "picky: not evaluated - picky has no opinion" in by_cell["v2", "ok"][2]
    assert "picky: error (exception) - evaluator failed: ZeroDivisionError" in by_cell["v1", "crash"][2]
    assert "system error exception: RuntimeError: v2 exploded" in by_cell["v2", "xss"][2]
    assert "contains_text: pass 1.00 - all texts present" in by_cell["v1", "ok"][2]


def test_each_cell_opens_a_dialog_with_its_trace(demo: RunOutcome, page: str) -> None:
    for (variant, case), (outcome, dom_id, _) in cells(page).items():
        start = page.index(f'<dialog class="trace" id="{dom_id}"')
        dialog = page[start : page.index("</dialog>", start)]
        assert f'data-case="{html.escape(case)}" data-variant="{variant}"' in dialog
        assert f'data-outcome="{outcome}"' in dialog  # its badge
        trace = next(t for t in demo.traces if (t.variant_name, t.case_id) == (variant, case))
        if trace.output.final_answer:
            assert html.escape(trace.output.final_answer) in dialog
        assert str(trace.extra["trace_id"]) in dialog
        assert "traces.jsonl:" in dialog
    ok = page[page.index('data-case="ok" data-variant="v1"', page.index("<dialog")) :]
    ok = ok[: ok.index("</dialog>")]
    assert "lookup" in ok and "alpha" in ok  # the tool call and its result
    assert "all texts present" in ok and "answer_should_include" in ok  # evaluation, and the case's expectations


def test_variant_and_evaluator_figures(page: str) -> None:
    variants = page[page.index('<section id="variants">') : page.index('<section id="evaluators">')]
    row = variants[variants.index('data-variant="v1"') :]
    numbers = re.findall(r'<td class="num">([^<]*)</td>', row[: row.index("</tr>")])
    # cases, pass, fail, error, not evaluated, pass rate, latency, cost, tokens
    assert numbers[:6] == ["5", "1", "2", "1", "1", "33.3%"]
    assert numbers[6].endswith(("ms", "µs", " s")) and numbers[7] == "-"
    evaluators = page[page.index('<section id="evaluators">') :]
    evaluators = evaluators[: evaluators.index("</section>")]
    # v1: ok and crash pass, bad and xss (half the texts: 0.5) fail, skip is skipped.
    assert "<b>contains_text</b></td><td>50.0% (2/4), avg 0.62, 1 not evaluated</td>" in evaluators
    # v2: crash passes, ok and bad fail, skip and xss (the system raised: no answer) are skipped.
    assert "<td>33.3% (1/3), avg 0.33, 2 not evaluated</td></tr>" in evaluators
    assert "<b>picky</b></td><td>1 error(s), 4 not evaluated</td>" in evaluators  # errors are not failures


def test_insights_and_changes_sections(page: str) -> None:
    assert "best variant: <b>v1</b>" in page and "hardest case: <b>bad (failed on 2 variant(s))</b>" in page
    changes = page[page.index('<section id="changes">') :]
    assert "Compared with baseline variant v1" in changes
    assert "contains_text: pass 1.00 - all texts present &rarr; fail 0.00 - missing: &#x27;alpha&#x27;" in changes


def test_page_is_self_contained(page: str) -> None:
    assert page.startswith("<!DOCTYPE html>")
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", page), "the page must not load anything"
    assert "<style>" in page and "<script>" in page and "@import" not in page


def test_user_content_is_escaped(page: str) -> None:
    # The answer, the input, the expectations, the reasons and the system's error all carry XSS: none is markup.
    assert XSS not in page
    assert "<img" not in page and "onerror=alert" not in page.replace("onerror=alert(1)&gt;", "")
    assert html.escape(XSS) in page
    assert page.count("<script>") == 1  # ours
    assert "&lt;/b&gt;never" in page  # an expected text


def test_cli_finds_runs_by_id_and_prefix_and_reports_missing_ones(
    demo: RunOutcome, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = str(demo.run.path.parent)
    out = tmp_path / "by_id.html"
    assert main(["report", demo.run.run_id, "--runs-dir", runs, "-o", str(out)]) == 0
    assert f"Run {demo.run.run_id}" in out.read_text()
    assert main(["report", demo.run.run_id[:10], "--runs-dir", runs, "-o", str(out)]) == 0
    assert main(["report", "ffffffff", "--runs-dir", runs, "-o", str(out), "--store", str(tmp_path)]) == 1
    assert "no trace 'ffffffff'" in capsys.readouterr().err  # not a run: looked up as a trace


def test_run_without_summary_still_reports(demo: RunOutcome, tmp_path: Path) -> None:
    copy = tmp_path / demo.run.run_id
    shutil.copytree(demo.run.path, copy)
    (copy / SUMMARY_FILE).unlink()  # killed during evaluation ...
    traces = copy / TRACES_FILE
    traces.chmod(0o644)
    lines = traces.read_text().splitlines(keepends=True)
    # ... and before one of its cells ran: cells finish in any order (they run concurrently), so the cell taken out
    # is the last written one that is not among those asserted below.
    index = max(i for i, line in enumerate(lines) if json.loads(line)["case_id"] not in ("ok", "crash"))
    last = json.loads(lines[index])
    traces.write_text("".join(lines[:index] + lines[index + 1 :]))
    data = build_run_report(RunDirectory(copy))
    assert {(k, c.outcome) for k, c in data.cells.items()} >= {(("v1", "ok"), "pass"), (("v1", "crash"), "error")}
    missing = data.cells[last["variant_name"], last["case_id"]]
    assert missing.outcome is None and missing.trace is None
    page = render_run_report(data)
    assert "Cases × variants" in page and "never ran" in page and f'id="{missing.dom_id}"' not in page


def test_run_without_traces_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "config.yaml").write_text("name: x\n")
    with pytest.raises(LookupError, match="has no traces.jsonl"):
        write_run_report(RunDirectory(tmp_path / "r"), tmp_path / "x.html")
