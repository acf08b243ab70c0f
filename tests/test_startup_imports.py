"""``import evaltrace`` stays light: the evaluation engine, pydantic and openai load only when something needs them.

Checked in a fresh interpreter (sys.modules of this one already holds everything the other tests imported).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import evaltrace

HEAVY = ("evaltrace.evaluation", "evaltrace.schema", "pydantic", "openai", "anthropic")


def _loaded_after(code: str) -> list[str]:
    """Run ``code`` in a fresh interpreter; return the heavy modules it left in sys.modules."""
    probe = textwrap.dedent(code) + textwrap.dedent(f"""
        import json, sys
        print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] in {HEAVY!r} or m in {HEAVY!r})))
    """)
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True)
    return list(json.loads(done.stdout.splitlines()[-1]))


def test_import_evaltrace_loads_no_heavy_module() -> None:
    assert _loaded_after("import evaltrace") == []


def test_decorators_and_configure_without_evaluation_load_no_heavy_module() -> None:
    loaded = _loaded_after("""
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
        import evaltrace

        exporter = InMemorySpanExporter()
        handle = evaltrace.configure(exporters=[exporter], local_store=False, evaluation=False, handle_sigterm=False)

        @evaltrace.agent
        def answer(question: str) -> str:
            return question.upper()

        with evaltrace.llm_call(provider="openai", model="gpt-4o-mini") as call:
            call.record(messages=[{"role": "user", "content": "hi"}], output="hello", tool_calls=[
                {"id": "c1", "name": "lookup", "arguments": {"q": "hi"}}
            ])
        answer("hi")
        handle.force_flush()
        assert len(exporter.get_finished_spans()) == 2
        handle.shutdown()
    """)
    assert loaded == []


def test_the_evaluation_engine_loads_when_asked_for() -> None:
    loaded = _loaded_after("import evaltrace; evaltrace.evaluator")
    assert "evaltrace.evaluation" in loaded


def test_lazy_names_resolve_to_their_home_objects() -> None:
    from evaltrace.config import configure
    from evaltrace.context import context
    from evaltrace.evaluation import evaluator

    assert evaltrace.configure is configure
    assert evaltrace.evaluator is evaluator
    assert evaltrace.context is context  # the function, even though evaltrace.context is also a submodule


def test_dir_lists_every_public_name() -> None:
    assert set(evaltrace.__all__) <= set(dir(evaltrace))


def test_unknown_name_is_an_attribute_error() -> None:
    try:
        evaltrace.no_such_name  # type: ignore[attr-defined]  # noqa: B018
    except AttributeError as exc:
        assert "no_such_name" in str(exc)
    else:
        raise AssertionError("expected AttributeError")


def test_configure_with_no_evaluator_loads_no_evaluation_engine_until_one_is_attached() -> None:
    """The default ``configure()`` (evaluation on, no evaluator) loads neither the engine nor a pydantic model.

    Spans go through to the exporter meanwhile; an evaluator a decorator attaches afterwards still runs (the engine
    loads with it) and its result rides on the span.
    """
    loaded = _loaded_after("""
        import sys
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
        import evaltrace

        exporter = InMemorySpanExporter()
        handle = evaltrace.configure(local_store=False, exporters=[exporter], handle_sigterm=False)

        @evaltrace.agent
        def answer(question: str) -> str:
            return question.upper()

        answer("hi")
        with evaltrace.llm_call(provider="openai", model="gpt-4o-mini") as call:
            call.record(messages=[{"role": "user", "content": "hi"}], output="hello")
        handle.force_flush()
        names = sorted(span.name for span in exporter.get_finished_spans())
        assert names == ["chat gpt-4o-mini", "invoke_agent answer"], names
        before = sorted(m for m in sys.modules if m.startswith(("evaltrace.evaluation", "evaltrace.schema", "pydantic")))
        assert before == [], before

        @evaltrace.evaluator(name="shouts")
        def shouts(trace) -> bool:
            return trace.output.final_answer == "HI"

        @evaltrace.agent(evaluators=[shouts])
        def judged(question: str) -> str:
            return question.upper()

        judged("hi")
        assert handle.force_flush()
        last = exporter.get_finished_spans()[-1]
        assert last.attributes["evaltrace.eval.shouts.passed"] is True, dict(last.attributes)
        assert handle.evaluation_processor.stats()["evaluated"] == 1
        handle.shutdown()
    """)
    assert "evaltrace.evaluation" in loaded  # the engine did load, for the attached evaluator


def test_a_deferred_evaluation_processor_exports_every_span_at_shutdown_without_loading_the_engine() -> None:
    """No flush before ``shutdown()``: the export queues behind the stand-in are drained by its shutdown."""
    loaded = _loaded_after("""
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
        import evaltrace

        exporter = InMemorySpanExporter()
        handle = evaltrace.configure(local_store=False, exporters=[exporter], handle_sigterm=False)
        traced = evaltrace.trace(lambda n: n + 1)
        assert [traced(n) for n in range(50)] == list(range(1, 51))
        handle.shutdown()
        assert len(exporter.get_finished_spans()) == 50, len(exporter.get_finished_spans())
    """)
    assert loaded == []


def test_configure_loads_the_local_store_and_redaction_only_when_they_are_asked_for(tmp_path: Path) -> None:
    """Without the local store or redaction, ``configure()`` imports neither (nor sqlite3 / orjson).

    With them, both load and work: the span reaches the store with the e-mail address masked.
    """
    probe = textwrap.dedent(f"""
        import json, sys
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
        import evaltrace

        def store_modules():
            return sorted(m for m in sys.modules if m.startswith(("evaltrace.exporters.local_store",
                "evaltrace.exporters.store_client", "evaltrace.exporters.redaction", "sqlite3", "orjson")))

        handle = evaltrace.configure(local_store=False, exporters=[InMemorySpanExporter()], handle_sigterm=False)
        evaltrace.trace(lambda: None)()
        handle.shutdown()
        without = store_modules()
        handle = evaltrace.configure(local_store={str(tmp_path)!r}, redact=True, handle_sigterm=False)
        evaltrace.trace(lambda text: text, name="echo")("mail me at someone@example.com")
        handle.shutdown()
        from evaltrace.exporters import LocalTraceStore
        store = LocalTraceStore({str(tmp_path)!r})
        traces = store.list_traces()
        text = json.dumps([dict(s.attributes) for t in traces for s in store.spans(t.trace_id)], default=str)
        print(json.dumps({{"without": without, "with": store_modules(), "traces": len(traces),
                          "email kept": "someone@example.com" in text, "echoed": "mail me at" in text}}))
    """)
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    found = json.loads(done.stdout.splitlines()[-1])
    assert found["without"] == []
    assert "evaltrace.exporters.local_store" in found["with"]
    assert "evaltrace.exporters.redaction" in found["with"]
    assert found["traces"] == 1
    assert found["echoed"] and not found["email kept"]
