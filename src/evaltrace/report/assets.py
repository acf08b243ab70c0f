"""The report page's inline stylesheet and script (no CDN, no external fonts: the file works offline)."""

from __future__ import annotations

CSS = """
:root{--fg:#1d2330;--muted:#6b7385;--line:#e3e6ee;--bg:#f7f8fb;--card:#fff;--pass:#1a7f37;--fail:#c62828;--error:#b45309;
--llm:#7c4dff;--tool:#0b8bd9;--agent:#e07b00;--workflow:#00897b;--task:#5c6bc0;--evaluation:#8d6e63;--other:#90a4ae}
*{box-sizing:border-box}
body{margin:0;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:var(--fg);background:var(--bg)}
header{padding:18px 28px;background:#1d2330;color:#fff}
header h1{margin:0 0 6px;font-size:20px;font-weight:600}
.meta{display:flex;flex-wrap:wrap;gap:6px 18px;color:#c5cbd8;font-size:13px}
.meta b{color:#fff;font-weight:500}
main{padding:8px 28px 40px;max-width:1400px}
section{background:var(--card);border:1px solid var(--line);border-radius:8px;margin:16px 0;padding:14px 18px}
h2{font-size:15px;margin:0 0 10px;text-transform:uppercase;letter-spacing:.04em;color:var(--muted)}
table{border-collapse:collapse;width:100%}
th,td{text-align:left;padding:5px 8px;border-bottom:1px solid var(--line);vertical-align:top}
th{font-weight:600;color:var(--muted);font-size:12px}
code,pre{font:12px/1.4 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace}
pre{margin:0;white-space:pre-wrap;word-break:break-word;max-height:320px;overflow:auto;background:var(--bg);
padding:6px 8px;border-radius:4px}
.badge{display:inline-block;padding:1px 8px;border-radius:10px;font-size:12px;font-weight:600;color:#fff}
.pass{background:var(--pass)}.fail{background:var(--fail)}.error{background:var(--error)}
.neutral{background:var(--other)}
.kind{display:inline-block;min-width:64px;padding:0 6px;margin-right:6px;border-radius:3px;color:#fff;font-size:11px;
text-align:center}
.k-llm{background:var(--llm)}.k-tool{background:var(--tool)}.k-agent{background:var(--agent)}
.k-workflow{background:var(--workflow)}.k-task{background:var(--task)}.k-evaluation{background:var(--evaluation)}
.k-other{background:var(--other)}
.axis,.span>summary{display:grid;grid-template-columns:minmax(240px,30%) 1fr 70px 112px 82px 190px;gap:8px;
align-items:center}
.no-usage .axis,.no-usage .span>summary{grid-template-columns:minmax(260px,34%) 1fr 86px 190px}
.no-usage .tokens,.no-usage .cost{display:none}
.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap;color:var(--muted);font-size:12px}
.axis{color:var(--muted);font-size:11px;border-bottom:1px solid var(--line);padding-bottom:4px}
.ticks{display:flex;justify-content:space-between}
.span>summary{list-style:none;cursor:pointer;padding:3px 0;border-bottom:1px solid #f0f1f5}
.span>summary::-webkit-details-marker{display:none}
.span>summary:hover{background:#f3f5fa}
.name{white-space:nowrap;overflow:hidden;text-overflow:ellipsis}
.track{position:relative;height:16px;background:repeating-linear-gradient(90deg,transparent 0 24.9%,#eef0f5 24.9% 25%)}
.bar{position:absolute;top:3px;height:10px;border-radius:2px;min-width:2px}
.bar.err{outline:2px solid var(--fail)}
.dur{text-align:right;color:var(--muted);font-variant-numeric:tabular-nums}
.chips .badge{margin:1px 2px;font-weight:500}
.detail{padding:8px 0 12px 24px}
.detail h3{font-size:13px;color:var(--muted);margin:10px 0 4px}
.detail td:first-child{width:30%;color:var(--muted);word-break:break-all}
.err-text{color:var(--fail);font-weight:600}
.msg{border-left:4px solid var(--other);padding:6px 12px;margin:10px 0;background:var(--bg);border-radius:0 6px 6px 0}
.msg.user{border-color:var(--tool)}.msg.assistant{border-color:var(--llm)}.msg.system{border-color:var(--muted)}
.msg.tool{border-color:var(--agent)}
.role{font-size:11px;font-weight:700;text-transform:uppercase;color:var(--muted);margin-bottom:4px}
.content{white-space:pre-wrap;word-break:break-word}
.toolcall{margin-top:6px;border:1px dashed var(--tool);border-radius:6px;padding:6px 8px;background:#fff}
details.thinking>summary{cursor:pointer;color:var(--llm);font-size:12px;font-weight:600}
details.thinking pre{background:#f4f0ff}
.status{font-size:14px;vertical-align:middle}
.verdict-label{font-size:12px;font-weight:400;color:#c5cbd8;margin-left:8px}
.badge.verdict{font-size:13px;padding:2px 12px}
.tags{margin-top:6px}
.tag{display:inline-block;margin:0 4px 0 2px;padding:0 8px;border:1px solid #5d6679;border-radius:10px;color:#fff;
font-size:12px}
.facts{color:var(--muted);margin:4px 0 8px}
.facts b{color:var(--fg);font-weight:500}
details.raw{margin-top:10px}
details.raw>summary{cursor:pointer;color:var(--muted);font-size:12px;font-weight:600}
pre.io{max-height:220px}
.chat{display:flex;flex-direction:column;gap:8px;max-width:980px}
.bubble{max-width:82%;padding:8px 12px;border-radius:10px;background:var(--bg);border:1px solid var(--line);
align-self:flex-start}
.bubble .role{margin-bottom:2px}
.bubble.user{align-self:flex-end;background:#e8f3fc;border-color:#b9dcf4}
.bubble.assistant{background:#f1edff;border-color:#d6cbff}
.bubble.system{max-width:100%;align-self:stretch;background:#f3f4f7;border-style:dashed}
.bubble.tool{background:#fff6eb;border-color:#f5d3a6}
.bubble.out{box-shadow:0 0 0 2px #d6cbff}
.bubble pre{max-height:240px}
.call-head{font-size:12px;color:var(--tool);margin-bottom:2px}
.call-id{color:var(--muted);font-size:11px}
.chat-sep{display:flex;align-items:center;gap:8px;color:var(--muted);font-size:11px;text-transform:uppercase;
letter-spacing:.05em}
.chat-sep::before,.chat-sep::after{content:"";flex:1;border-top:1px solid var(--line)}
.buttons{float:right}
.buttons button{font:inherit;font-size:12px;border:1px solid var(--line);background:#fff;border-radius:4px;padding:2px 8px;
cursor:pointer}
.empty{color:var(--muted);font-style:italic}
footer{color:var(--muted);font-size:12px;padding:0 28px 24px}
"""

JS = """
document.querySelectorAll('[data-toggle]').forEach(function(button){
  button.addEventListener('click', function(){
    var open = button.getAttribute('data-toggle') === 'open';
    document.querySelectorAll('details.span').forEach(function(d){ d.open = open; });
  });
});
document.querySelectorAll('[data-span-link]').forEach(function(link){
  link.addEventListener('click', function(event){
    var target = document.getElementById('span-' + link.getAttribute('data-span-link'));
    if (target) { event.preventDefault(); target.open = true; target.scrollIntoView({block: 'center'}); }
  });
});
document.body.setAttribute('data-report-ready', String(document.querySelectorAll('details.span').length));
"""
