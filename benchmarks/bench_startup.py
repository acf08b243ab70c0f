"""Start-up cost: ``import evaltrace`` and ``instrument_openai()`` in fresh processes, medians over runs.

Run: python benchmarks/bench_startup.py [--runs 15] [--only "OTel SDK + evaltrace,configure()"]

Each scenario runs in a new interpreter that times its own steps with ``perf_counter`` (one step after the
other: the OTel SDK, openai, evaltrace, instrumenting, the client's first ``chat.completions`` access, which is
where openai and the hooks load the chat resource). Scenarios are interleaved run by run so machine noise hits
them alike. Also shown: the whole process's wall time, and the same steps for the official
opentelemetry-instrumentation-openai-v2 (``pip install -e '.[bench]'``) when installed.
Budgets (issue 17): ``import evaltrace`` <= 30 ms and ``instrument_openai()`` <= 50 ms on top of the OTel SDK
and ``import openai``. Every process reads bytecode from one cache, filled by an untimed run of each scenario
first, as an installed package's ``.pyc`` files are (where ``PYTHONDONTWRITEBYTECODE`` is set, evaltrace's
modules were compiled from source in every run while the packages it is compared with read theirs).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

_STEPS = {
    "otel_sdk": "import opentelemetry.sdk.trace, opentelemetry.sdk.trace.export",
    "openai": "import openai",
    "evaltrace": "import evaltrace",
    "instrument_openai": "evaltrace.instrument_openai()",
    "official_import": "from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor",
    "official_instrument": "OpenAIInstrumentor().instrument()",
    "configure": "evaltrace.configure(local_store=False, exporters=[InMemorySpanExporter()], handle_sigterm=False)",
    "first_chat_access": "openai.OpenAI(api_key='x').chat.completions",
}
_PRELUDE = {"configure": "from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter"}

SCENARIOS = {
    "bare python": [],
    "OTel SDK": ["otel_sdk"],
    "OTel SDK + evaltrace": ["otel_sdk", "evaltrace"],
    "OTel SDK + evaltrace + configure()": ["otel_sdk", "evaltrace", "configure"],
    "OTel SDK + openai": ["otel_sdk", "openai", "first_chat_access"],
    "+ evaltrace + instrument_openai()": ["otel_sdk", "openai", "evaltrace", "instrument_openai", "first_chat_access"],
    "+ official openai-v2 instrument()": [
        "otel_sdk",
        "openai",
        "official_import",
        "official_instrument",
        "first_chat_access",
    ],
}


def _script(steps: list[str]) -> str:
    lines = ["import json, time", "t = {}"]
    for step in steps:
        if step in _PRELUDE:
            lines.append(_PRELUDE[step])
        lines += ["s = time.perf_counter()", _STEPS[step], f"t[{step!r}] = time.perf_counter() - s"]
    lines.append("import sys; t['modules'] = len(sys.modules)")  # how much the steps loaded
    lines.append("print(json.dumps(t))")
    return "\n".join(lines)


_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
_ENV["PYTHONPYCACHEPREFIX"] = tempfile.mkdtemp(prefix="bench-startup-pycache-")


def _run(steps: list[str]) -> dict[str, float]:
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", _script(steps)], capture_output=True, text=True, timeout=120, env=_ENV)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-2000:])
    return {**json.loads(done.stdout.splitlines()[-1]), "process": wall}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--only", default="", help="comma-separated scenario names (or parts of them) to run")
    args = parser.parse_args()
    scenarios = dict(SCENARIOS)
    if importlib.util.find_spec("opentelemetry.instrumentation.openai_v2") is None:
        del scenarios["+ official openai-v2 instrument()"]
    if args.only:
        wanted = [part.strip() for part in args.only.split(",") if part.strip()]
        scenarios = {name: steps for name, steps in scenarios.items() if any(w in name for w in wanted)}
        if not scenarios:
            parser.error(f"--only {args.only!r} matches none of: {', '.join(SCENARIOS)}")
    samples: dict[str, list[dict[str, float]]] = {name: [] for name in scenarios}
    for steps in scenarios.values():
        _run(steps)  # untimed: fills the bytecode cache
    for _ in range(args.runs):
        for name, steps in scenarios.items():
            samples[name].append(_run(steps))

    def median(name: str, key: str) -> float:
        return statistics.median(run[key] for run in samples[name]) * 1000

    print(f"fresh processes, {args.runs} runs each, medians in ms")
    for name, steps in scenarios.items():
        parts = ", ".join(f"{step} {median(name, step):.1f}" for step in steps)
        modules = statistics.median(run["modules"] for run in samples[name])
        print(f"{name:36} process {median(name, 'process'):6.1f}  modules {modules:4.0f}  {parts}")
    if "OTel SDK + evaltrace" in samples:
        imp = median("OTel SDK + evaltrace", "evaltrace")
        print(f"budget import evaltrace <= 30 ms: {imp:.1f} ms {'OK' if imp <= 30 else 'OVER'}")
    if "+ evaltrace + instrument_openai()" in samples:
        inst = median("+ evaltrace + instrument_openai()", "instrument_openai")
        print(f"budget instrument_openai() <= 50 ms: {inst:.1f} ms {'OK' if inst <= 50 else 'OVER'}")


if __name__ == "__main__":
    main()
