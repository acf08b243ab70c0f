"""Filesystem evals end to end: `run_eval` with `workspace:` variants on real directories and real git repositories,
the artifacts directory, the file evaluators' verdicts, and `re_evaluate` from the artifacts on disk."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from evaltrace.runner import RunConfigError, RunDirectory, re_evaluate, resume_run, run_eval
from evaltrace.schema import EvaluationResult, FilesystemArtifact

from .conftest import Project

AGENT_SOURCE = """
import asyncio
import threading
from pathlib import Path

SEEN = []  # (task, workspace, notes.txt as the system found it)
_lock = threading.Lock()
ACTIVE = [0, 0]


def agent(task: str, workspace: Path) -> str:
    SEEN.append((task, str(workspace), (workspace / "notes.txt").read_text()))
    if task in ("fix", "fix_and_touch_secrets", "crash"):
        (workspace / "src" / "app.py").write_text("def main():\\n    return 42\\n")
    if task == "fix_and_touch_secrets":
        (workspace / "config" / "secrets.env").write_text("TOKEN=leaked\\n")
    if task == "report":
        (workspace / "out").mkdir(exist_ok=True)
        (workspace / "out" / "report.md").write_text("# Report\\n")
        (workspace / "logo.png").write_bytes(b"\\x89PNG\\x00\\x01new")
    if task == "crash":
        (workspace / "config" / "secrets.env").unlink()
        raise RuntimeError("agent crashed half way")
    return f"did {task}"


async def agent_async(task: str, workspace: Path) -> str:
    with _lock:
        ACTIVE[0] += 1
        ACTIVE[1] = max(ACTIVE)
    before = (workspace / "notes.txt").read_text()
    (workspace / "notes.txt").write_text(before + task + "\\n")
    await asyncio.sleep(0.05)  # the other cells run meanwhile, each on its own copy
    SEEN.append((task, str(workspace), (workspace / "notes.txt").read_text()))
    with _lock:
        ACTIVE[0] -= 1
    return "ok"


def no_workspace(task: str) -> str:
    return task
"""


@pytest.fixture
def agent_module(project: Project) -> Iterator[str]:
    name = f"fs_agent_{project.module.rsplit('_', 1)[1]}"
    (project.root / f"{name}.py").write_text(textwrap.dedent(AGENT_SOURCE))
    yield name
    sys.modules.pop(name, None)


def _source(root: Path) -> Path:
    source = root / "repo"
    (source / "src").mkdir(parents=True)
    (source / "config").mkdir()
    (source / "src" / "app.py").write_text("def main():\n    return 0\n")
    (source / "config" / "secrets.env").write_text("TOKEN=abc\n")
    (source / "notes.txt").write_text("start\n")
    (source / "logo.png").write_bytes(b"\x89PNG\x00\x01old")
    (source / "readme-link").symlink_to("notes.txt")
    return source


def _digest(root: Path) -> dict[str, str]:
    """Every file under root (links by target) -> sha256: to prove a tree was not touched."""
    found = {}
    for path in sorted(root.rglob("*")):
        if path.is_symlink():
            found[path.relative_to(root).as_posix()] = "link:" + os.readlink(path)
        elif path.is_file() and ".git" not in path.relative_to(root).parts:
            found[path.relative_to(root).as_posix()] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


@pytest.fixture(autouse=True)
def own_temp_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Workspaces of this test's runs go to a temp dir of its own, so ``_leftovers`` sees only theirs.

    The suite runs in parallel: another test's run may hold a workspace in the shared temp dir at that moment.
    """
    own = tmp_path / "tmp"
    own.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(own))


def _leftovers() -> set[str]:
    return {p.name for p in Path(tempfile.gettempdir()).glob("evaltrace-fs*")}


def _config(module: str, *, function: str = "agent", kind: str = "tempdir_snapshot", **extra: Any) -> dict[str, Any]:
    return {
        "name": "fs_eval",
        "variants": [
            {
                "name": "fs",
                "adapter": "python_function",
                "config": {"target": f"{module}:{function}"},
                "workspace": {"kind": kind, "path": "repo", "ignore": ["**/*.pyc"]},
            }
        ],
        "evaluators": [{"name": "files_changed"}],
        **extra,
    }


FILE_CASES: list[dict[str, Any]] = [
    {
        "id": "fix_ok",
        "input": {"task": "fix"},
        "expected": {"must_modify_files": ["src/**/*.py"], "must_not_modify_files": ["config/**"]},
    },
    {
        "id": "fix_touches_secrets",
        "input": {"task": "fix_and_touch_secrets"},
        "expected": {"must_modify_files": ["src/app.py"], "must_not_modify_files": ["config/**"]},
    },
    {"id": "report_created", "input": {"task": "report"}, "expected": {"must_create_files": ["out/*.md"]}},
    {"id": "report_missing", "input": {"task": "fix"}, "expected": {"must_create_files": ["out/*.md"]}},
    {"id": "no_expectation", "input": {"task": "fix"}},
    {"id": "crash", "input": {"task": "crash"}, "expected": {"must_not_modify_files": ["config/**"]}},
]


def _results(outcome: Any) -> dict[str, EvaluationResult]:
    return {r.case_id: r for r in outcome.results}


def test_forbidden_change_fails_and_expected_changes_pass(project: Project, agent_module: str) -> None:
    source = _source(project.root)
    untouched = _digest(source)
    outcome = run_eval(project.write(_config(agent_module, concurrency=3), cases=FILE_CASES), runs_dir=project.runs_dir)
    results = _results(outcome)
    assert results["fix_ok"].passed and results["fix_ok"].status == "completed"
    assert results["fix_ok"].evaluator == "files_changed"
    # The case that changes a forbidden file fails, naming the file.
    bad = results["fix_touches_secrets"]
    assert not bad.passed and bad.status == "completed" and bad.score == 0.5
    assert bad.reason == "forbidden files changed: config/secrets.env (modified)"
    assert bad.detail["forbidden_changes"] == ["config/secrets.env"]
    assert results["report_created"].passed
    missing = results["report_missing"]
    assert not missing.passed and missing.reason == "no added file matches out/*.md"
    skipped = results["no_expectation"]
    assert skipped.status == "skipped" and "names no must_modify_files" in skipped.reason
    # A system that fails half way still has its changes recorded and judged.
    crash = results["crash"]
    assert not crash.passed and crash.reason == "forbidden files changed: config/secrets.env (removed)"
    traces = {t.case_id: t for t in outcome.traces}
    assert traces["crash"].error is not None and "agent crashed" in traces["crash"].error.message
    assert traces["fix_ok"].extra["artifact_path"] == "artifacts/fix_ok/fs/artifact.json"
    assert "filesystem_artifact" not in traces["fix_ok"].extra  # attached for evaluation only, never persisted
    summary = outcome.summary.variants[0]
    assert (summary.cases_passed, summary.cases_failed) == (2, 3)
    # The source directory was never written, and every copy was removed.
    assert _digest(source) == untouched
    assert not any(Path(seen).exists() for _, seen, _ in sys.modules[agent_module].SEEN)


def test_artifacts_directory_holds_diff_manifests_and_changed_files(project: Project, agent_module: str) -> None:
    source = _source(project.root)
    outcome = run_eval(
        project.write(_config(agent_module), cases=[FILE_CASES[1], FILE_CASES[2]]), runs_dir=project.runs_dir
    )
    cell = outcome.run.path / "artifacts" / "report_created" / "fs"
    artifact = FilesystemArtifact.model_validate_json((cell / "artifact.json").read_bytes())
    assert (artifact.case_id, artifact.variant_name, artifact.workspace_kind) == (
        "report_created",
        "fs",
        "tempdir_snapshot",
    )
    assert artifact.artifacts_path == "artifacts/report_created/fs"
    assert artifact.diff.added == ["out/report.md"] and artifact.diff.modified == ["logo.png"]
    # Manifests: every file of the source with its size, mode and sha256 (links by their target).
    before = artifact.before_manifest.files
    assert sorted(before) == ["config/secrets.env", "logo.png", "notes.txt", "readme-link", "src/app.py"]
    for name in ("src/app.py", "logo.png"):
        data = (source / name).read_bytes()
        assert before[name].sha256 == hashlib.sha256(data).hexdigest() and before[name].size == len(data)
        assert before[name].mode == (source / name).stat().st_mode
    assert before["readme-link"].sha256 == hashlib.sha256(b"notes.txt").hexdigest()
    assert artifact.after_manifest.files["out/report.md"].sha256 == hashlib.sha256(b"# Report\n").hexdigest()
    # diff.txt: the text diff in full, the binary file by name only.
    text = (cell / "diff.txt").read_text()
    assert "--- /dev/null\n+++ b/out/report.md\n@@ -0,0 +1 @@\n+# Report\n" in text
    assert "not diffed (binary, or over 1048576 bytes): logo.png" in text and "PNG" not in text
    assert (cell / "before" / "logo.png").read_bytes() == b"\x89PNG\x00\x01old"
    assert (cell / "after" / "logo.png").read_bytes() == b"\x89PNG\x00\x01new"
    assert not (cell / "before" / "notes.txt").exists()  # unchanged files are in the manifests only
    other = outcome.run.path / "artifacts" / "fix_touches_secrets" / "fs"
    assert "-TOKEN=abc\n+TOKEN=leaked\n" in (other / "diff.txt").read_text()
    assert (other / "before" / "config" / "secrets.env").read_text() == "TOKEN=abc\n"


def test_concurrent_cells_each_get_a_fresh_copy(project: Project, agent_module: str) -> None:
    source = _source(project.root)
    untouched = _digest(source)
    cases = [{"id": f"c{i}", "input": {"task": f"t{i}"}} for i in range(6)]
    config = _config(agent_module, function="agent_async", concurrency=6)
    run_eval(project.write(config, cases=cases), runs_dir=project.runs_dir)
    module = sys.modules[agent_module]
    assert module.ACTIVE[1] > 1  # the cells did overlap
    # Each cell saw the source's notes.txt plus only its own line, in a copy of its own.
    assert sorted(notes for _, _, notes in module.SEEN) == sorted(f"start\nt{i}\n" for i in range(6))
    assert len({workspace for _, workspace, _ in module.SEEN}) == 6
    assert all(Path(workspace).name == "repo" for _, workspace, _ in module.SEEN)
    assert _digest(source) == untouched
    assert _leftovers() == set()


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


def _git_repo(root: Path) -> Path:
    repo = _source(root)
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@example.com", "add", "-A")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "initial")
    return repo


def test_git_branch_runs_each_cell_in_a_worktree_and_removes_it(project: Project, agent_module: str) -> None:
    repo = _git_repo(project.root)
    head = _git(repo, "rev-parse", "HEAD").strip()
    (repo / "notes.txt").write_text("uncommitted\n")  # not in the commit: cells do not see it
    config = _config(agent_module, kind="git_branch", concurrency=3)
    outcome = run_eval(project.write(config, cases=FILE_CASES[:3]), runs_dir=project.runs_dir)
    results = _results(outcome)
    assert results["fix_ok"].passed and not results["fix_touches_secrets"].passed
    assert "config/secrets.env (modified)" in results["fix_touches_secrets"].reason
    seen = sys.modules[agent_module].SEEN
    assert {notes for _, _, notes in seen} == {"start\n"}
    artifact = FilesystemArtifact.model_validate_json(
        (outcome.run.path / "artifacts" / "fix_ok" / "fs" / "artifact.json").read_bytes()
    )
    assert artifact.workspace_kind == "git_branch" and artifact.diff.modified == ["src/app.py"]
    assert ".git" not in artifact.before_manifest.files  # the worktree's .git file is left out
    # Every worktree is gone, the repository is where it was, and no branch was added.
    assert _git(repo, "worktree", "list", "--porcelain").count("worktree ") == 1
    assert _git(repo, "rev-parse", "HEAD").strip() == head
    assert _git(repo, "branch", "--list").split() == ["*", "main"]
    assert (repo / "notes.txt").read_text() == "uncommitted\n"
    assert not any(Path(workspace).exists() for _, workspace, _ in seen)
    assert _leftovers() == set()


def test_git_branch_config_errors_stop_the_run_before_it_starts(
    project: Project, agent_module: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    _source(project.root)  # a plain directory, not a repository
    path = project.write(_config(agent_module, kind="git_branch"), cases=FILE_CASES[:1])
    with pytest.raises(RunConfigError, match=r"variants\[0\]\.workspace\.path: 'repo' .* is not a git repository"):
        run_eval(path, runs_dir=project.runs_dir)
    (project.root / "repo" / "sub").mkdir()
    _git(project.root, "init", "-q")
    with pytest.raises(RunConfigError, match=r"is inside the git repository .*, not its top level"):
        run_eval(path, runs_dir=project.runs_dir)
    monkeypatch.setenv("PATH", str(project.root / "no-bin"))
    with pytest.raises(RunConfigError, match=r"variants\[0\]\.workspace\.kind: git_branch needs git"):
        run_eval(path, runs_dir=project.runs_dir)
    assert not project.runs_dir.exists()
    assert sys.modules.get(agent_module) is None or not sys.modules[agent_module].SEEN


def test_config_errors_name_the_key(project: Project, agent_module: str) -> None:
    config = _config(agent_module)
    path = project.write(config, cases=FILE_CASES[:1])
    with pytest.raises(RunConfigError, match=r"variants\[0\]\.workspace\.path: 'repo' .* is not a directory"):
        run_eval(path, runs_dir=project.runs_dir)
    _source(project.root)
    config["variants"][0]["config"]["target"] = f"{agent_module}:no_workspace"
    with pytest.raises(RunConfigError, match=r"variants\[0\]\.workspace: .*declares no 'workspace' parameter"):
        run_eval(project.write(config), runs_dir=project.runs_dir)
    config["variants"][0] = {
        "name": "web",
        "adapter": "http",
        "config": {"url": "http://127.0.0.1:9/agent", "body_template": {"task": "{{input.task}}"}},
        "workspace": {"kind": "tempdir_snapshot", "path": "repo"},
    }
    with pytest.raises(RunConfigError, match=r"variants\[0\]\.config\.body_template: .*\{\{workspace\}\}"):
        run_eval(project.write(config), runs_dir=project.runs_dir)
    config["variants"][0]["config"]["body_template"] = {"task": "{{input.task}}", "where": "in {{workspace}}"}
    del config["variants"][0]["workspace"]
    with pytest.raises(RunConfigError, match=r"body_template: \{\{workspace\}\} needs a workspace"):
        run_eval(project.write(config), runs_dir=project.runs_dir)
    assert not project.runs_dir.exists()


class _FileWritingSystem(BaseHTTPRequestHandler):
    """An HTTP agent: writes the file it is asked to into the workspace path it is sent."""

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        target = Path(body["workspace"]) / body["file"]
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(body["note"])
        payload = json.dumps({"answer": f"wrote {body['file']} under {Path(body['workspace']).name}"}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


@pytest.fixture
def writing_system() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _FileWritingSystem)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/agent"
    finally:
        server.shutdown()
        server.server_close()


def test_http_system_gets_its_workspace_through_the_body_template(project: Project, writing_system: str) -> None:
    source = _source(project.root)
    untouched = _digest(source)
    config = {
        "name": "fs_http",
        "variants": [
            {
                "name": "web",
                "adapter": "http",
                "config": {
                    "url": writing_system,
                    "body_template": {
                        "workspace": "{{workspace}}",
                        "file": "{{input.file}}",
                        "note": "in {{workspace}}",
                    },
                },
                "workspace": {"kind": "tempdir_snapshot", "path": "repo"},
            }
        ],
        "evaluators": [
            {"name": "must_create_files", "args": ["out/**"]},
            {"name": "must_not_modify_files", "args": ["config/**"]},
        ],
    }
    cases = [{"id": "ok", "input": {"file": "out/a/b.txt"}}, {"id": "bad", "input": {"file": "config/x.env"}}]
    outcome = run_eval(project.write(config, cases=cases), runs_dir=project.runs_dir)
    verdicts = {(r.case_id, r.evaluator): r.passed for r in outcome.results}
    assert verdicts == {
        ("ok", "must_create_files"): True,
        ("ok", "must_not_modify_files"): True,
        ("bad", "must_create_files"): False,
        ("bad", "must_not_modify_files"): False,
    }
    trace = next(t for t in outcome.traces if t.case_id == "ok")
    assert trace.output.final_answer == "wrote out/a/b.txt under repo"
    artifact = FilesystemArtifact.model_validate_json(
        (outcome.run.path / "artifacts" / "ok" / "web" / "artifact.json").read_bytes()
    )
    # The whole-string placeholder and the embedded one both carried the copy's absolute path.
    note = artifact.diff.text_diffs["out/a/b.txt"]
    assert "+in /" in note and str(source) not in note
    assert _digest(source) == untouched


def test_variant_without_workspace_is_not_evaluated(project: Project, agent_module: str) -> None:
    config = _config(agent_module, function="no_workspace")
    del config["variants"][0]["workspace"]
    outcome = run_eval(project.write(config, cases=FILE_CASES[:1]), runs_dir=project.runs_dir)
    (result,) = outcome.results
    assert result.status == "skipped" and "the variant has no workspace" in result.reason
    assert not (outcome.run.path / "artifacts").exists()


def test_re_evaluate_judges_the_artifacts_on_disk_without_the_system(project: Project, agent_module: str) -> None:
    _source(project.root)
    first = run_eval(project.write(_config(agent_module), cases=FILE_CASES[:2]), runs_dir=project.runs_dir)
    module = sys.modules[agent_module]
    calls = len(module.SEEN)
    again = re_evaluate(first.run)
    assert len(module.SEEN) == calls  # the system was not called
    assert [(r.case_id, r.passed, r.reason) for r in again.results] == [
        (r.case_id, r.passed, r.reason) for r in first.results
    ]
    # The verdict comes from the files on disk: a lost artifact is an evaluation error, never a pass.
    (first.run.path / "artifacts" / "fix_touches_secrets" / "fs" / "artifact.json").unlink()
    lost = _results(re_evaluate(first.run))["fix_touches_secrets"]
    assert lost.status == "failed" and lost.error is not None
    assert "cannot read the filesystem artifact" in lost.error.message


def test_a_workspace_that_cannot_be_copied_fails_its_cases_without_calling_the_system(
    project: Project, agent_module: str
) -> None:
    source = _source(project.root)
    os.mkfifo(source / "pipe")  # copytree refuses named pipes (it would block reading one)
    outcome = run_eval(project.write(_config(agent_module), cases=FILE_CASES[:2]), runs_dir=project.runs_dir)
    for trace in outcome.traces:
        assert trace.error is not None and trace.error.type == "adapter_error"
        assert trace.error.message.startswith("workspace: cannot copy the workspace") and "pipe" in trace.error.message
        assert "artifact_path" not in trace.extra
    assert sys.modules[agent_module].SEEN == []
    # Nothing could be judged: the file evaluator errs (naming why), it neither passes nor skips.
    for result in outcome.results:
        assert result.status == "failed" and result.error is not None
        assert "no workspace copy was made: cannot copy the workspace" in result.error.message
    assert _leftovers() == set()


def test_resume_runs_the_missing_cell_in_a_fresh_copy_and_judges_the_earlier_ones_from_disk(
    project: Project, agent_module: str
) -> None:
    _source(project.root)
    first = run_eval(project.write(_config(agent_module), cases=FILE_CASES[:2]), runs_dir=project.runs_dir)
    run = first.run.path
    # As if killed after the first cell: its trace and artifact are on disk, the second cell never finished.
    traces = run / "traces.jsonl"
    kept, lost = traces.read_text().splitlines(keepends=True)
    lost_case = json.loads(lost)["case_id"]
    traces.chmod(0o644)
    traces.write_text(kept)
    for name in ("results.jsonl", "summary.yaml"):
        (run / name).unlink()
    module = sys.modules[agent_module]
    module.SEEN.clear()
    outcome = resume_run(RunDirectory(run))
    tasks = {case["id"]: case["input"]["task"] for case in FILE_CASES}
    assert [task for task, _, _ in module.SEEN] == [tasks[lost_case]]  # only the unfinished cell ran again
    assert [(r.case_id, r.passed) for r in outcome.results] == [(r.case_id, r.passed) for r in first.results]
    assert (run / "artifacts" / lost_case / "fs" / "artifact.json").is_file()
