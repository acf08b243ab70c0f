"""Files evaltrace writes hold prompts and outputs: each writer creates them 0600 and its folders 0700.

The tests run under a permissive umask (0o022), so a writer that relied on the default would leave 0644 files
and 0755 folders and fail here.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from evaltrace.evaluation.sinks import JsonlScoreSink, write_dead_letters
from evaltrace.exporters.local_store import LocalStoreExporter
from evaltrace.report import write_report
from evaltrace.report.run_report import write_run_report
from evaltrace.runner import RunDirectory, promote_run, run_eval
from evaltrace.runner.artifacts import store_artifact
from evaltrace.runner.file_changes import build_manifest
from evaltrace.runner.sqlite_store import SqliteRunStore
from evaltrace.schema import Score, score_id

from .conftest import Project

TRACE = "0af7651916cd43dd8448eb211c80319c"


@pytest.fixture(autouse=True)
def permissive_umask() -> Iterator[None]:
    previous = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(previous)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _assert_private(root: Path, created_below: Path) -> None:
    """Every folder from ``created_below`` down is 0700; every file under it has no group or other bit."""
    assert _mode(created_below) == 0o700, created_below
    for path in [created_below, *created_below.rglob("*")]:
        if path.is_symlink():
            continue
        if path.is_dir():
            assert _mode(path) == 0o700, path
        else:
            assert _mode(path) & 0o077 == 0, f"{path} is {oct(_mode(path))}"
            assert _mode(path) in (0o600, 0o400), f"{path} is {oct(_mode(path))}"


def _score() -> Score:
    span = "00f067aa0ba902b7"
    return Score(
        id=score_id(TRACE, span, "quality", "v1"), name="quality", value=0.5, trace_id=TRACE, observation_id=span
    )


def _local_store(tmp: Path, project: Project) -> Path:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(LocalStoreExporter(tmp / "store")))
    with provider.get_tracer("test").start_as_current_span("chat secret prompt"):
        pass
    provider.shutdown()
    return tmp / "store"


def _trace_report(tmp: Path, project: Project) -> Path:
    store = _local_store(tmp, project)
    write_report("last", tmp / "reports" / "trace.html", store)
    return tmp / "reports"


def _jsonl_sink(tmp: Path, project: Project) -> Path:
    sink = JsonlScoreSink(tmp / "scores" / "nested" / "scores.jsonl")
    assert sink.export([_score()]).failed == ()
    return tmp / "scores"


def _dead_letters(tmp: Path, project: Project) -> Path:
    write_dead_letters(tmp / "dead-letter" / "langfuse.jsonl", "langfuse", [_score()], "HTTP 500")
    return tmp / "dead-letter"


def _run(project: Project) -> RunDirectory:
    config = {
        "name": "private",
        "variants": [{"name": "v", "adapter": "python_function", "config": {"target": project.target("answer")}}],
        "evaluators": [{"name": "contains_text"}],
    }
    return run_eval(project.write(config), runs_dir=project.runs_dir).run


def _run_directory(tmp: Path, project: Project) -> Path:
    run = _run(project)
    names = {p.name for p in run.path.iterdir()}
    assert {"traces.jsonl", "results.jsonl", "summary.yaml", "config.yaml", "cases.jsonl", "run_meta.json"} <= names
    return project.runs_dir


def _run_report(tmp: Path, project: Project) -> Path:
    write_run_report(_run(project), tmp / "html" / "run.html")
    return tmp / "html"


def _baseline(tmp: Path, project: Project) -> Path:
    run = _run(project)
    os.chmod(project.runs_dir, 0o755)  # a runs folder the user opened up: baselines/ is still created 0700
    promote_run(run, project.runs_dir)
    return project.runs_dir / "baselines"


def _artifacts(tmp: Path, project: Project) -> Path:
    before, after = tmp / "before", tmp / "after"
    for root, text in ((before, "old secret"), (after, "new secret")):
        (root / "src").mkdir(parents=True)
        (root / "src" / "app.py").write_text(text)
        (root / "src" / "app.py").chmod(0o644)
    run_path = tmp / "run"
    run_path.mkdir(mode=0o700)
    store_artifact(
        run_path,
        case_id="c1",
        variant="v",
        kind="tempdir_snapshot",
        before_root=before,
        after_root=after,
        before=build_manifest(before),
        after=build_manifest(after),
    )
    return run_path / "artifacts"


def _sqlite(tmp: Path, project: Project) -> Path:
    folder = tmp / "db"
    folder.mkdir(mode=0o700, parents=True)
    with SqliteRunStore(folder / "runs.db") as store:
        store.list_runs()
    return folder


WRITERS: dict[str, Callable[[Path, Project], Path]] = {
    "local store": _local_store,
    "trace HTML report": _trace_report,
    "jsonl score sink": _jsonl_sink,
    "dead-letter file": _dead_letters,
    "run directory": _run_directory,
    "run HTML report": _run_report,
    "promoted baseline": _baseline,
    "workspace artifacts": _artifacts,
    "sqlite store": _sqlite,
}


@pytest.mark.parametrize("writer", list(WRITERS), ids=list(WRITERS))
def test_each_writer_creates_owner_only_files_and_folders(writer: str, tmp_path: Path, project: Project) -> None:
    created = WRITERS[writer](tmp_path / "out", project)
    files = [p for p in created.rglob("*") if p.is_file()]
    assert files, f"{writer} wrote nothing under {created}"
    _assert_private(tmp_path, created)


def test_an_existing_folder_given_by_the_user_keeps_its_mode(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o755)
    shared.chmod(0o755)
    JsonlScoreSink(shared / "scores.jsonl").export([_score()])
    assert _mode(shared) == 0o755  # the user's folder: not ours to change
    assert _mode(shared / "scores.jsonl") == 0o600
