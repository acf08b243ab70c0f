"""A child forked after ``configure()`` (gunicorn ``--preload``, ``multiprocessing`` with ``fork``) works on its own.

Each test runs a real script in a fresh Python process (so the test runner's threads are not forked): it
configures evaltrace with an exporter and a score sink that write what each process exports to files named by
its pid, creates spans with live evaluators, forks, and has the child create spans of its own. The test then
checks, per process, what was exported and scored.
"""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import textwrap
import weakref
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from evaltrace._internal import forks

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")

N = 10

PRELUDE = """
import asyncio, json, os, sys, threading, time, warnings
warnings.filterwarnings("ignore", ".*multi-threaded.*fork", DeprecationWarning)  # Python 3.12+

from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

import evaltrace
from evaltrace.evaluation.sinks.base import SinkResult
from evaltrace.exporters.span_json import span_to_dict


class PidFileExporter(SpanExporter):
    # Appends what this process exports to spans-<pid>.jsonl. Clearing `gate` holds the parent's export thread
    # inside export() (the child's copy never waits: it is not the owner).
    def __init__(self):
        self.owner = os.getpid()
        self.gate = threading.Event()
        self.gate.set()
        self.entered = threading.Event()

    def export(self, spans):
        if os.getpid() == self.owner and not self.gate.is_set():
            self.entered.set()
            self.gate.wait(30)
        with open(f"spans-{os.getpid()}.jsonl", "a") as handle:
            handle.write("".join(json.dumps(span_to_dict(s), default=str) + "\\n" for s in spans))
        return SpanExportResult.SUCCESS


class PidFileSink:
    name = "pidfile"

    def export(self, batch):
        with open(f"scores-{os.getpid()}.jsonl", "a") as handle:
            handle.write("".join(score.model_dump_json() + "\\n" for score in batch))
        return SinkResult.success()

    def force_flush(self, timeout_millis=30_000):
        return True

    def shutdown(self):
        pass


@evaltrace.evaluator
def quick(trace, case=None) -> bool:
    time.sleep(0.01)  # on the daemon pool: the parent's pool has idle threads at the fork
    return "answer" in (trace.output.final_answer or "")


@evaltrace.evaluator
async def judge_like(trace, case=None) -> float:
    await asyncio.sleep(0.01)  # on the user loop
    return 0.9


exporter = PidFileExporter()
handle = evaltrace.configure(service_name="fork-test", local_store=False, exporters=[exporter], sinks=[PidFileSink()])


@evaltrace.agent(evaluators=[quick, judge_like])
def answer(q: str) -> str:
    return "the answer to " + q


def wait_for(pid, started, timeout=20.0):
    # The child's exit status and how long after the fork it was gone (SIGKILLed when it hangs).
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() - started > timeout:
            os.kill(pid, 9)
            _, status = os.waitpid(pid, 0)
            break
        time.sleep(0.01)
    with open("result.json", "w") as handle:
        json.dump({"parent": os.getpid(), "child": pid, "exit": os.waitstatus_to_exitcode(status),
                   "seconds": time.monotonic() - started}, handle)
"""

# The parent's pool has idle threads at the fork (a child that believed them would wait for ever), and its
# last spans are still being evaluated and queued for export.
BEFORE_FORK = """
for i in range({n}):
    answer(f"parent-{{i}}")
assert handle.force_flush(10_000)
for i in range({n}):
    answer(f"parent-queued-{{i}}")
"""

FORK = (
    BEFORE_FORK
    + """
started = time.monotonic()
pid = os.fork()
if pid == 0:
    for i in range({n}):
        answer(f"child-{{i}}")
{child_exit}
else:
    for i in range({n}):
        answer(f"parent-after-{{i}}")
    wait_for(pid, started)
"""
)

CHILD_EXITS = {
    "sys.exit": "    sys.exit(0)",
    "end of script": "    pass",
    "os._exit after shutdown": "    handle.shutdown()\n    os._exit(0)",
    "os._exit after force_flush": (
        "    assert handle.force_flush(10_000)\n"
        "    with open('child-stats.json', 'w') as f:\n"
        "        json.dump(handle.evaluation_processor.stats(), f, default=str)\n"
        "    os._exit(0)"
    ),
}

MULTIPROCESSING = (
    """
import multiprocessing

def work():
    for i in range({n}):
        answer(f"child-{{i}}")
"""
    + BEFORE_FORK
    + """
started = time.monotonic()
process = multiprocessing.get_context("fork").Process(target=work)
process.start()  # the child runs work(), then threading's exit hooks (our drain), then os._exit
for i in range({n}):
    answer(f"parent-after-{{i}}")
wait_for(process.pid, started)
"""
)

MID_EXPORT = """
exporter.gate.clear()
answer("parent-0")
assert exporter.entered.wait(10)  # the parent's export thread is now inside export(), holding parent-0
answer("parent-1")  # still being evaluated or queued at the fork
started = time.monotonic()
pid = os.fork()
if pid == 0:
    for i in range({n}):
        answer(f"child-{{i}}")
    sys.exit(0)
exporter.gate.set()
wait_for(pid, started)
"""

SHUT_BEFORE_FORK = """
answer("parent-0")
handle.shutdown()
started = time.monotonic()
pid = os.fork()
if pid == 0:
    from opentelemetry.sdk.trace import TracerProvider

    provider = TracerProvider()
    provider.add_span_processor(handle.evaluation_processor)  # the shut pipeline, fed directly
    with provider.get_tracer("test").start_as_current_span("late"):
        pass
    with open("child.json", "w") as f:
        json.dump({{"threads": [t.name for t in threading.enumerate()], "stats": handle.evaluation_processor.stats()}}, f)
    handle = evaltrace.configure(service_name="again", local_store=False, exporters=[exporter], sinks=[PidFileSink()])
    for i in range({n}):
        answer(f"child-{{i}}")
    sys.exit(0)
wait_for(pid, started)
"""


def _run(tmp_path: Path, body: str) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "app.py"
    script.write_text(textwrap.dedent(PRELUDE) + body)
    env = {k: v for k, v in os.environ.items() if k != "EVALTRACE_RAISE_INTERNAL_ERRORS"}
    return subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=90
    )


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def _questions(spans: list[dict[str, Any]]) -> Counter[str]:
    return Counter(json.loads(s["attributes"]["input.value"])["q"] for s in spans if s["name"] == "invoke_agent answer")


def _check_process(tmp_path: Path, pid: int, questions: list[str], stderr: str) -> None:
    """``pid`` exported each of ``questions`` exactly once (and nothing else), evaluated, with both scores."""
    spans = _lines(tmp_path / f"spans-{pid}.jsonl")
    exported = _questions(spans)
    assert exported == Counter(questions), (pid, exported, stderr)
    for span in spans:
        assert span["attributes"]["evaltrace.eval.quick.passed"] is True, span["attributes"]
        assert span["attributes"]["evaltrace.eval.judge_like.passed"] is True, span["attributes"]
    scores = _lines(tmp_path / f"scores-{pid}.jsonl")
    pairs = Counter((s["trace_id"], s["name"]) for s in scores)
    assert set(pairs.values()) <= {1}, pairs  # no score delivered twice
    assert pairs.keys() == {(s["trace_id"], name) for s in spans for name in ("quick", "judge_like")}, stderr


def _result(tmp_path: Path, done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert done.returncode == 0, done.stderr
    for trouble in ("Traceback", "Exception ignored", "destroyed but it is pending", "internal error"):
        assert trouble not in done.stderr, done.stderr
    result: dict[str, Any] = json.loads((tmp_path / "result.json").read_text())
    assert result["exit"] == 0, done.stderr
    assert result["seconds"] < 5, result  # the child drained and exited; it did not wait out a deadline
    assert {p.name for p in tmp_path.glob("spans-*.jsonl")} <= {
        f"spans-{result['parent']}.jsonl",
        f"spans-{result['child']}.jsonl",
    }
    return result


@pytest.mark.parametrize("child_exit", list(CHILD_EXITS))
def test_a_forked_child_exports_evaluates_and_scores_its_own_spans_once(tmp_path: Path, child_exit: str) -> None:
    done = _run(tmp_path, FORK.format(n=N, child_exit=CHILD_EXITS[child_exit]))
    result = _result(tmp_path, done)
    _check_process(tmp_path, result["child"], [f"child-{i}" for i in range(N)], done.stderr)
    parent = [f"parent-{kind}{i}" for kind in ("", "queued-", "after-") for i in range(N)]
    _check_process(tmp_path, result["parent"], parent, done.stderr)  # the child exported none of them again
    if child_exit == "os._exit after force_flush":  # the child's stats count the child's work only
        stats = json.loads((tmp_path / "child-stats.json").read_text())
        assert stats["enqueued"] == N and stats["queued"] == 0, stats
        assert stats["evaluated"] == 2 * N and stats["passed"] == 2 * N, stats
        assert stats["exporters"]["custom[0]"]["exported"] == stats["exporters"]["custom[0]"]["received"] == N
        assert stats["exporters"]["custom[0]"]["lost"] == 0, stats
        assert stats["sinks"]["pidfile"]["submitted"] == stats["sinks"]["pidfile"]["successes"] == 2 * N


def test_a_multiprocessing_fork_child_drains_its_pipeline_at_exit(tmp_path: Path) -> None:
    done = _run(tmp_path, MULTIPROCESSING.format(n=N))
    result = _result(tmp_path, done)
    _check_process(tmp_path, result["child"], [f"child-{i}" for i in range(N)], done.stderr)
    parent = [f"parent-{kind}{i}" for kind in ("", "queued-", "after-") for i in range(N)]
    _check_process(tmp_path, result["parent"], parent, done.stderr)


def test_a_fork_during_an_export_does_not_deadlock_the_child(tmp_path: Path) -> None:
    done = _run(tmp_path, MID_EXPORT.format(n=N))
    result = _result(tmp_path, done)
    _check_process(tmp_path, result["child"], [f"child-{i}" for i in range(N)], done.stderr)
    # The batch the parent was exporting at the fork, and the span it still held, went out once, from the parent.
    _check_process(tmp_path, result["parent"], ["parent-0", "parent-1"], done.stderr)


def test_a_pipeline_shut_down_before_the_fork_stays_shut_down_in_the_child(tmp_path: Path) -> None:
    done = _run(tmp_path, SHUT_BEFORE_FORK.format(n=N))
    result = _result(tmp_path, done)
    child = json.loads((tmp_path / "child.json").read_text())
    assert child["threads"] == ["MainThread"], child  # nothing restarted
    assert child["stats"]["exporters"]["custom[0]"] == {
        "exported": 0, "export_failed": 0, "dropped_queue_full": 0, "dropped_queue_bytes": 0, "dropped_shutdown": 1,
        "queued": 0, "received": 1, "lost": 1, "queued_bytes": 0,
    }  # fmt: skip
    # configure() again in the child gives it a working pipeline.
    _check_process(tmp_path, result["child"], [f"child-{i}" for i in range(N)], done.stderr)
    _check_process(tmp_path, result["parent"], ["parent-0"], done.stderr)


def test_the_fork_registry_holds_components_weakly() -> None:
    class Component:
        def _reinit_after_fork(self) -> None:
            raise AssertionError("a collected component must never be re-initialised")

    component = Component()
    forks.reinit_after_fork(component)
    ref = weakref.ref(component)
    del component
    gc.collect()
    assert ref() is None
    assert not any(isinstance(c, Component) for c in forks._components.values())


def test_a_provider_made_before_the_thread_pool_module_does_not_hang_a_forked_child() -> None:
    """OTel SDK >= 1.44 re-detects resources on a ThreadPoolExecutor in each provider's fork hook; if the pool
    module (whose own hook releases its submit lock in the child) were imported after the provider (a provider
    given its resource runs no detector, so nothing imported it), the child would wait on that lock for ever.
    Loading evaltrace's fork module imports the pool module first."""
    script = textwrap.dedent(
        """
        import os
        from evaltrace._internal import forks  # noqa: F401
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        provider = TracerProvider(resource=Resource({"service.name": "s"}))  # no detector run: no pool yet
        import concurrent.futures.thread  # noqa: F401  # as asyncio or httpx would, later
        pid = os.fork()
        if pid == 0:
            os._exit(7)
        _, status = os.waitpid(pid, 0)
        print(os.waitstatus_to_exitcode(status))
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "7"
