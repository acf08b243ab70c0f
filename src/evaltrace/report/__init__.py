"""Static, self-contained HTML report of one trace (``evaltrace report <trace_id> -o report.html``).

The page has a header (session, user, tags, token and cost totals, the evaluation badge), the scores
(``gen_ai.evaluation.result`` events, ``evaltrace.eval.*`` attributes and late ``evaluation`` spans), the
waterfall (tokens and cost per span; model calls unfold as a chat, every span keeps its raw attributes), the
final answer, reasoning, tool calls and the conversation, with inline CSS and JavaScript only, so it can be
attached to a ticket or opened offline.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from opentelemetry.sdk.trace import ReadableSpan

from evaltrace._internal.private_files import make_private_dirs, private_opener
from evaltrace.exporters.local_store import DEFAULT_DIRECTORY, LocalTraceStore
from evaltrace.report.html import render_html
from evaltrace.report.model import ReportData, ScoreRow, SpanRow, build_report

__all__ = ["ReportData", "ScoreRow", "SpanRow", "build_report", "render_html", "report_from_spans", "write_report"]


def report_from_spans(spans: Sequence[ReadableSpan]) -> str:
    """Return the HTML report of the trace made of ``spans``.

    The conversation comes from :func:`evaltrace.mapping.trace_from_spans`; if mapping fails the page still
    shows the waterfall and the scores, and says why the conversation is missing.
    """
    from evaltrace.mapping import trace_from_spans

    try:
        trace, error = trace_from_spans(spans), None
    except Exception as exc:  # a report of a malformed trace is still useful
        trace, error = None, f"{type(exc).__name__}: {exc}"
    return render_html(build_report(spans, trace, error))


def write_report(trace_id: str, output: str | Path, store: str | Path = DEFAULT_DIRECTORY) -> Path:
    """Write the report of ``trace_id`` (or a unique prefix, or ``last``) from the local store to ``output``.

    Raises:
        LookupError: No such trace, or the prefix matches several.
    """
    reader = LocalTraceStore(store)
    if trace_id == "last":
        newest = reader.list_traces(limit=1)
        if not newest:
            raise LookupError(f"the local store {Path(store)} holds no traces")
        trace_id = newest[0].trace_id
    spans = reader.spans(trace_id)
    if not spans:
        raise LookupError(f"no trace {trace_id!r} in the local store {Path(store)}")
    path = Path(output)
    make_private_dirs(path.parent)
    with open(path, "w", encoding="utf-8", opener=private_opener) as handle:  # 0600: it shows prompts and outputs
        handle.write(report_from_spans(spans))
    return path
