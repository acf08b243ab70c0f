"""The run report's inline stylesheet and script, on top of the trace report's (no CDN: the file works offline)."""

from __future__ import annotations

from evaltrace.report.assets import CSS as TRACE_CSS

__all__ = ["CSS", "JS"]

CSS = (
    TRACE_CSS
    + """
.matrix{width:auto;min-width:50%}
.matrix th.case{font-weight:500;color:var(--fg);font-size:13px;white-space:nowrap;max-width:320px;overflow:hidden;
text-overflow:ellipsis}
.matrix td{padding:3px 4px;border-bottom:1px solid #f0f1f5}
a.cell{display:block;min-width:110px;padding:4px 8px;border-radius:4px;color:#fff;text-decoration:none;font-size:12px;
font-weight:600;text-align:center;white-space:nowrap}
a.cell:hover,a.cell:focus{outline:3px solid #1d2330;outline-offset:1px}
a.cell .sc{font-weight:400;opacity:.9;margin-left:4px}
.cell.none{background:#fff;color:var(--muted);border:1px dashed var(--line)}
.num{text-align:right;font-variant-numeric:tabular-nums}
.legend{color:var(--muted);font-size:12px;margin:8px 0 0}
ul.plain{margin:4px 0;padding-left:18px}
dialog.trace{width:min(1100px,94vw);max-height:90vh;border:none;border-radius:8px;padding:0;background:var(--bg)}
dialog.trace::backdrop{background:rgba(20,24,33,.55)}
dialog.trace:target:not([open]){display:block;position:static;margin:16px auto}
.dhead{position:sticky;top:0;z-index:1;background:#1d2330;color:#fff;padding:12px 18px}
.dhead h2{color:#fff;text-transform:none;letter-spacing:0;font-size:17px;margin:0 0 4px}
.dhead button{float:right;font:inherit;font-size:13px;border:none;border-radius:4px;padding:3px 10px;cursor:pointer}
.dbody{padding:0 18px 12px}
.wf-row{display:grid;grid-template-columns:minmax(160px,36%) 1fr 70px;gap:8px;align-items:center;font-size:12px;
padding:2px 0;border-bottom:1px solid #f0f1f5}
.wf-name{white-space:nowrap;overflow:hidden;text-overflow:ellipsis}
.wf-track{position:relative;height:10px;background:#f3f4f8;border-radius:2px}
.wf-bar{position:absolute;top:0;height:10px;border-radius:2px;background:var(--other)}
.wf-row[data-kind=llm] .wf-bar{background:var(--llm)}.wf-row[data-kind=tool] .wf-bar{background:var(--tool)}
.wf-row[data-kind=agent] .wf-bar{background:var(--agent)}.wf-row[data-kind=task] .wf-bar{background:var(--task)}
.wf-row.err .wf-bar{outline:2px solid #d32f2f}
.wf-dur{text-align:right;font-variant-numeric:tabular-nums;color:var(--muted)}
table.sbs td.answer{vertical-align:top;white-space:pre-wrap;max-width:420px;font-size:13px}
table.sbs td.answer a{font-size:11px;font-weight:600}
span.tag{float:right;display:inline-block;margin:2px 0 0 6px;padding:0 6px;border-radius:8px;background:#eef1f8;color:var(--muted);
font-size:11px;font-weight:400}
table.heatmap{width:auto}
table.heatmap td.heat{text-align:center;font-variant-numeric:tabular-nums;min-width:70px}
table.heatmap td.heat.none{color:var(--muted)}
"""
)

JS = """
function openTrace(id){
  var d = document.getElementById(id);
  if (!d || typeof d.showModal !== 'function') { return false; }
  if (!d.open) { d.showModal(); }
  document.body.setAttribute('data-open-trace', id);
  return true;
}
document.querySelectorAll('a[data-open]').forEach(function(a){
  a.addEventListener('click', function(event){
    if (openTrace(a.getAttribute('data-open'))) { event.preventDefault(); }
  });
});
document.querySelectorAll('dialog.trace').forEach(function(d){
  d.addEventListener('click', function(event){ if (event.target === d) { d.close(); } });
  d.addEventListener('close', function(){ document.body.removeAttribute('data-open-trace'); });
});
document.querySelectorAll('[data-close]').forEach(function(b){
  b.addEventListener('click', function(){ b.closest('dialog').close(); });
});
if (location.hash.length > 1) { openTrace(location.hash.slice(1)); }
document.body.setAttribute('data-report-ready', String(document.querySelectorAll('a.cell[data-open]').length));
"""
