"""Workspaces of filesystem evals: the variant's source, a pristine copy of it per run, a fresh copy per cell.

A variant with ``workspace: {kind, path, ignore}`` runs each case in its own copy of ``path`` (relative to the
eval.yaml), so cells running at once never see each other's changes and the source is never written:

* ``tempdir_snapshot``: ``path`` is copied once per run into a pristine temporary directory (symbolic links kept
  as links, never followed), and each cell gets a copy of that pristine copy.
* ``git_branch``: ``path`` must be the top level of a git work tree with at least one commit. Its ``HEAD`` commit
  is read when the run starts; the pristine copy and each cell are ``git worktree add --detach`` checkouts of that
  commit (uncommitted changes are not in them), removed with ``git worktree remove --force`` afterwards. Worktree
  commands run one at a time: concurrent ``worktree add`` calls race on git's lock files.

Temporary directories are made under ``TMPDIR`` and removed when the cell (or the run) ends; a killed run may
leave some behind, and ``git worktree prune`` unregisters its worktrees. The system finds its copy through the
adapter (``workspace=`` for a function, ``{{workspace}}`` in an HTTP ``body_template``), never through the working
directory, which stays the run's own.
"""

from __future__ import annotations

import inspect
import json
import os
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from evaltrace.runner.adapters import WORKSPACE_PARAMETER, Adapter, FunctionAdapter, HttpAdapter
from evaltrace.runner.errors import RunConfigError
from evaltrace.schema import RunVariant, WorkspaceSpec

__all__ = [
    "WORKSPACE_PARAMETER",
    "WORKSPACE_PLACEHOLDER",
    "SourceCopies",
    "WorkspaceError",
    "WorkspaceSource",
    "prepare_workspaces",
]

WORKSPACE_PLACEHOLDER = "{{workspace}}"
"""An HTTP ``body_template`` placeholder replaced by the workspace's absolute path."""
_GIT_TIMEOUT_S = 120.0
_git_lock = threading.Lock()
_GIT_LOCATION_VARIABLES = frozenset({"GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_COMMON_DIR"})


class WorkspaceError(Exception):
    """A workspace could not be made or removed (the message says which command or path failed)."""


@dataclass(frozen=True)
class WorkspaceSource:
    """A variant's validated workspace: what each of its cells gets a copy of.

    Attributes:
        variant: The variant's name.
        kind: ``tempdir_snapshot`` or ``git_branch``.
        path: The source directory (absolute); for ``git_branch`` the repository's top level.
        ignore: Globs left out of the manifests.
        commit: ``git_branch`` only: the commit every cell checks out (``HEAD`` when the run started).
    """

    variant: str
    kind: Literal["tempdir_snapshot", "git_branch"]
    path: Path
    ignore: tuple[str, ...] = ()
    commit: str | None = None


def _git_env() -> dict[str, str]:
    # Set by git hooks and some CI steps, these would point every command at another repository than ``cwd``.
    return {k: v for k, v in os.environ.items() if k not in _GIT_LOCATION_VARIABLES}


def _git(args: Sequence[str], cwd: Path) -> str:
    """Run git in ``cwd`` and return its output; a failure raises WorkspaceError with git's message."""
    try:
        done = subprocess.run(
            ["git", *args], cwd=cwd, env=_git_env(), capture_output=True, text=True, timeout=_GIT_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise WorkspaceError(f"git {' '.join(args)}: {exc}") from None
    if done.returncode != 0:
        raise WorkspaceError(f"git {' '.join(args)}: {done.stderr.strip() or f'exit status {done.returncode}'}")
    return done.stdout.strip()


def _git_source(spec: WorkspaceSpec, source: Path, config_path: Path, entry: str) -> str:
    """Check that ``source`` is a git work tree's top level with a commit; return that commit."""
    if shutil.which("git") is None:
        raise RunConfigError(config_path, f"{entry}.kind", "git_branch needs git, and git is not on PATH")
    try:
        top = Path(_git(["rev-parse", "--show-toplevel"], source)).resolve()
    except WorkspaceError:
        raise RunConfigError(
            config_path, f"{entry}.path", f"{spec.path!r} ({source}) is not a git repository"
        ) from None
    if top != source:
        problem = f"{spec.path!r} is inside the git repository {top}, not its top level; point path at {top}"
        raise RunConfigError(config_path, f"{entry}.path", problem)
    try:
        return _git(["rev-parse", "--verify", "HEAD^{commit}"], source)
    except WorkspaceError:
        raise RunConfigError(config_path, f"{entry}.path", f"the git repository {source} has no commit yet") from None


def _source(variant: RunVariant, spec: WorkspaceSpec, config_path: Path, entry: str) -> WorkspaceSource:
    source = (config_path.parent / spec.path).resolve()
    if not source.is_dir():
        raise RunConfigError(config_path, f"{entry}.path", f"{spec.path!r} ({source}) is not a directory")
    commit = _git_source(spec, source, config_path, entry) if spec.kind == "git_branch" else None
    return WorkspaceSource(variant.name, spec.kind, source, tuple(spec.ignore), commit)


def _check_adapter(adapter: Adapter, variant: RunVariant, config_path: Path, entry: str) -> None:
    """The adapter must be able to tell the system where its workspace is; else the run could not mean anything."""
    if isinstance(adapter, FunctionAdapter):
        if WORKSPACE_PARAMETER in adapter.kwargs:
            problem = f"{WORKSPACE_PARAMETER!r} is reserved: the variant's workspace is passed under it"
            raise RunConfigError(config_path, f"{entry}.config.kwargs.{WORKSPACE_PARAMETER}", problem)
        if not adapter.takes_workspace():
            target = variant.config.get("target")
            problem = f"{target!r} declares no {WORKSPACE_PARAMETER!r} parameter, so it cannot know where its copy is"
            raise RunConfigError(config_path, f"{entry}.workspace", problem)
    elif isinstance(adapter, HttpAdapter):
        if WORKSPACE_PLACEHOLDER not in json.dumps(adapter.body_template):
            problem = f"send the workspace's path to the endpoint: put {WORKSPACE_PLACEHOLDER} in the body_template"
            raise RunConfigError(config_path, f"{entry}.config.body_template", problem)
    elif not _accepts_workspace(adapter):
        raise RunConfigError(
            config_path, f"{entry}.workspace", f"adapter {variant.adapter!r} cannot run in a workspace"
        )


def _accepts_workspace(adapter: Any) -> bool:
    try:
        return WORKSPACE_PARAMETER in inspect.signature(adapter.call).parameters
    except (TypeError, ValueError):
        return False


def prepare_workspaces(
    variants: Sequence[RunVariant], adapters: Sequence[Adapter], config_path: Path, *, key: str = "variants"
) -> dict[str, WorkspaceSource]:
    """Validate the ``workspace`` of every variant that has one, before anything runs.

    Args:
        variants: The variants, in config order.
        adapters: Their adapters (built already).
        config_path: The eval.yaml (``path`` is relative to its directory).
        key: The key the variants were written under (``systems`` or ``variants``), for messages.

    Returns:
        Variant name -> its workspace source, for the variants with a workspace.

    Raises:
        RunConfigError: The path is not a directory; ``git_branch`` without git, outside a repository or without a
            commit; or an adapter that cannot pass the workspace to the system.
    """
    sources: dict[str, WorkspaceSource] = {}
    for index, (variant, adapter) in enumerate(zip(variants, adapters, strict=True)):
        entry = f"{key}[{index}]"
        if variant.workspace is None:
            if isinstance(adapter, HttpAdapter) and WORKSPACE_PLACEHOLDER in json.dumps(adapter.body_template):
                problem = f"{WORKSPACE_PLACEHOLDER} needs a workspace, and this system has none"
                raise RunConfigError(config_path, f"{entry}.config.body_template", problem)
            continue
        _check_adapter(adapter, variant, config_path, entry)
        sources[variant.name] = _source(variant, variant.workspace, config_path, f"{entry}.workspace")
    return sources


def _remove_tree(path: Path) -> None:
    # A system abandoned after its timeout may still be writing: what cannot be removed now is left to TMPDIR.
    shutil.rmtree(path, ignore_errors=True)


class SourceCopies:
    """The pristine copy of one variant's source for a run, and the cells' copies cut from it.

    The pristine copy is made on first use, so all cells start from the same tree even if the source changes
    during the run; before-contents of changed files are read from it. Methods block (copying, git): call them on
    a worker thread. They are thread-safe.
    """

    def __init__(self, source: WorkspaceSource) -> None:
        self.source = source
        self._lock = threading.Lock()
        self._pristine: Path | None = None

    def pristine(self) -> Path:
        """Return the pristine copy, making it on first call.

        Raises:
            WorkspaceError: The copy or checkout failed.
        """
        with self._lock:
            if self._pristine is None:
                self._pristine = self._checkout("pristine", self.source.path)
            return self._pristine

    def open_cell(self) -> Path:
        """Return a fresh copy of the pristine tree for one cell.

        Raises:
            WorkspaceError: The copy or checkout failed.
        """
        return self._checkout("cell", self.pristine())

    def close_cell(self, path: Path) -> None:
        """Remove a cell's copy (and, for git, its worktree registration)."""
        if self.source.kind == "git_branch":
            with _git_lock:
                try:
                    _git(["worktree", "remove", "--force", str(path)], self.source.path)
                except WorkspaceError:
                    pass  # removed below; `git worktree prune` forgets a registration left behind
        _remove_tree(path.parent)

    def close(self) -> None:
        """Remove the pristine copy."""
        with self._lock:
            pristine, self._pristine = self._pristine, None
        if pristine is not None:
            self.close_cell(pristine)

    def _checkout(self, role: str, origin: Path) -> Path:
        """Copy ``origin`` (git: check out the commit) into a new temporary directory, named like the source."""
        holder = Path(tempfile.mkdtemp(prefix=f"evaltrace-{self.source.variant}-{role}-"))
        target = holder / self.source.path.name
        try:
            if self.source.kind == "git_branch":
                with _git_lock:
                    _git(["worktree", "add", "--detach", str(target), str(self.source.commit)], self.source.path)
            else:
                shutil.copytree(origin, target, symlinks=True)
        except (OSError, shutil.Error) as exc:
            _remove_tree(holder)
            raise WorkspaceError(f"cannot copy the workspace {self.source.path}: {exc}") from None
        except WorkspaceError:
            _remove_tree(holder)
            raise
        return target
