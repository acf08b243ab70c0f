"""Shared fixtures: the real OTel SDK with an in-memory exporter, and the recorded OpenAI traffic."""

from __future__ import annotations

# Before any test's TracerProvider: see the comment on this import in src/evaltrace/_internal/forks.py (a forked
# child of the test process would otherwise hang in the SDK's fork hook).
import concurrent.futures.thread  # noqa: F401
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

# evaltrace's own suite fails loudly on evaltrace's bugs: the error boundary (evaltrace._internal.errors) re-raises
# them with this switch instead of logging them. Set here, not read from PYTEST_CURRENT_TEST, because applications
# run evaltrace inside their own pytest suites, where our bug must never fail their test. Tests that act as
# production delete it; child processes inherit it.
os.environ.setdefault("EVALTRACE_RAISE_INTERNAL_ERRORS", "1")
# Prices the suite looks up go to a file of its own (one per worker), never the user's ~/.cache/evaltrace
# (src/evaltrace/_internal/price_cache.py); child processes inherit it.
os.environ.setdefault("EVALTRACE_PRICE_CACHE", str(Path(tempfile.mkdtemp(prefix="evaltrace-prices-")) / "prices.json"))

REPO_ROOT = Path(__file__).resolve().parent.parent
CASSETTE_DIR = Path(
    os.environ.get("EVALTRACE_CASSETTE_DIR", REPO_ROOT / "tests" / "fixtures" / "openai-cassettes" / "otel-contrib")
)


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """Workers for ``-n auto`` (pyproject's addopts): two per CPU this process may use.

    Most of the suite's wall time is spent waiting (child processes starting and stopping, servers, deadlines), not
    computing; twice as many workers as CPUs keeps the CPUs busy. ``PYTEST_XDIST_AUTO_NUM_WORKERS`` overrides it.
    """
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS", "").isdigit():
        return int(os.environ["PYTEST_XDIST_AUTO_NUM_WORKERS"])
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return 2 * cpus


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Keep ``--dist loadgroup`` grouping (pyproject's addopts) on pytest 9.2, where xdist 3.8 silently stopped it.

    xdist tells its scheduler an item's ``xdist_group`` by appending ``@<group>`` to the item's node id, written to
    ``Item._nodeid``; pytest 9.2 reads node ids from a structured ``_id`` instead, so the suffix never appears and
    grouped tests are dealt like any other (pytest-dev/pytest-xdist#1386, open). The Ray modules then started a
    two-node cluster in every worker that drew one of their tests, several at once. This writes the suffix where
    pytest 9.2 reads it, on the workers (where ``loadgroup`` is set), and does nothing once xdist has written it.
    The suffix shows in reports, as it did with older xdist; for a parametrized grouped test pytest's summary and
    junit names read ``test[x]@group]`` (its node-id parser takes the suffix into the parameters): cosmetic only,
    ``--lf`` and selection by node id work.
    """
    if not getattr(config.option, "loadgroup", False):
        return
    try:
        from _pytest.nodeid import coerce_node_id
    except ImportError:  # a pytest before 9.2: xdist's own suffix works there
        return
    for item in items:
        groups = {
            str(m.args[0] if m.args else m.kwargs.get("name", "default")) for m in item.iter_markers("xdist_group")
        }
        suffix = "@" + "_".join(sorted(groups))
        if groups and not item.nodeid.endswith(suffix) and hasattr(item, "_id"):
            item._id = coerce_node_id(item.nodeid + suffix)


@pytest.fixture(autouse=True)
def _lazy_mapping_checked(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """In a module that imported ``trace_from_spans``, every call also proves the lazy mapping equal to it.

    See tests/lazy_mapping.py: every mapping test input is then a test of the lazily mapped Trace as well.
    """
    module = request.module
    if module is None or not hasattr(module, "trace_from_spans"):
        return
    from evaltrace.mapping import trace_from_spans

    if module.trace_from_spans is trace_from_spans:
        from lazy_mapping import checked_trace_from_spans

        monkeypatch.setattr(module, "trace_from_spans", checked_trace_from_spans)


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
def provider(exporter: InMemorySpanExporter) -> Iterator[TracerProvider]:
    """A real TracerProvider exporting synchronously to the in-memory exporter.

    It is installed as evaltrace's provider (not the global one, which OTel lets be set only once).
    """
    from evaltrace._internal import tracing

    tp = TracerProvider()
    tp.add_span_processor(SimpleSpanProcessor(exporter))
    previous = tracing.set_tracer_provider(tp)
    try:
        yield tp
    finally:
        tracing.set_tracer_provider(previous)
        tp.shutdown()


@pytest.fixture
def judge_tracing_defaults(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Judge tracing at its default (the environment variable unset); the test's ``configure()`` undone after."""
    from evaltrace._internal import settings, tracing

    monkeypatch.delenv("EVALTRACE_TRACE_JUDGES", raising=False)
    saved = settings.current
    yield
    from evaltrace import config

    handle = config.current_handle()
    if handle is not None:
        handle.shutdown()
    tracing.set_tracer_provider(None)
    settings.replace(saved)
