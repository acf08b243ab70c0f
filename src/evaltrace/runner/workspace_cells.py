"""Running one (case, variant) in its own workspace copy and recording what it did to the files.

For a variant with a workspace, a cell goes: fresh copy (:class:`~evaltrace.runner.workspace.SourceCopies`) ->
before manifest -> the system runs under tracing with the copy's path -> after manifest -> diff and
``artifacts/<case>/<variant>/`` (:mod:`evaltrace.runner.artifacts`) -> the copy is removed. The copy and the
manifests are made before the case's span starts and after it ends, so ``latency_ms`` is the system's alone.
A system that fails still gets its artifact (it may have changed files before failing); a workspace that
cannot be made is the cell's ``adapter_error`` and the system is not called. Blocking work (copies, hashing,
git) runs on worker threads, so cells of other variants go on meanwhile.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol, cast

from evaltrace.evaluators.files import ARTIFACT_ERROR_KEY, ARTIFACT_PATH_KEY
from evaltrace.runner.adapters import Adapter, AdapterFailure
from evaltrace.runner.artifacts import store_artifact
from evaltrace.runner.capture import CaseCapture
from evaltrace.runner.file_changes import build_manifest
from evaltrace.runner.workspace import SourceCopies, WorkspaceError, WorkspaceSource
from evaltrace.schema import EvalCase, FileManifest, Trace

__all__ = ["WorkspaceCells"]


class _TakesWorkspace(Protocol):
    async def call(self, case_input: dict[str, Any], *, workspace: Path) -> Any: ...


class _Delegating:
    """Reads every other attribute (``trace_extra``, ...) from the variant's adapter, as capture would."""

    def __init__(self, adapter: Adapter) -> None:
        self._adapter = adapter

    def __getattr__(self, name: str) -> Any:
        return getattr(self._adapter, name)

    async def aclose(self) -> None:
        """The variant's adapter is closed by the run."""


class _InWorkspace(_Delegating):
    """The variant's adapter, calling the system with the cell's workspace."""

    def __init__(self, adapter: Adapter, workspace: Path) -> None:
        super().__init__(adapter)
        self._workspace = workspace

    async def call(self, case_input: dict[str, Any]) -> Any:
        # prepare_workspaces() checked that the adapter takes ``workspace``.
        return await cast(_TakesWorkspace, self._adapter).call(case_input, workspace=self._workspace)


class _NoWorkspace(_Delegating):
    """Stands in for the adapter when the cell's workspace could not be made: the system is not called."""

    def __init__(self, adapter: Adapter, problem: str) -> None:
        super().__init__(adapter)
        self._problem = problem

    async def call(self, case_input: dict[str, Any]) -> Any:
        raise AdapterFailure("adapter_error", f"workspace: {self._problem}")


class WorkspaceCells:
    """Runs cells, each in its own workspace copy when its variant has a workspace, and stores the artifacts.

    Args:
        sources: Variant name -> workspace source (:func:`~evaltrace.runner.workspace.prepare_workspaces`).
        run_path: The run directory, where ``artifacts/`` goes.
    """

    def __init__(self, sources: Mapping[str, WorkspaceSource], run_path: Path) -> None:
        self._copies = {name: SourceCopies(source) for name, source in sources.items()}
        self._run_path = run_path

    async def execute(self, capture: CaseCapture, adapter: Adapter, case: EvalCase, variant: str, run_id: str) -> Trace:
        """Run ``case`` through ``adapter`` (in a fresh workspace copy when the variant has one).

        Returns:
            The trace; with a workspace, ``extra["artifact_path"]`` names its ``artifact.json`` (or
            ``extra["artifact_error"]`` says why none could be written).
        """
        copies = self._copies.get(variant)
        if copies is None:
            return await capture.execute(adapter, case, variant, run_id)
        try:
            cell = await asyncio.to_thread(copies.open_cell)
        except WorkspaceError as exc:
            return await self._without_workspace(capture, adapter, case, variant, run_id, str(exc))
        try:
            try:
                before = await asyncio.to_thread(build_manifest, cell, copies.source.ignore)
            except OSError as exc:
                problem = f"cannot list {cell}: {exc}"
                return await self._without_workspace(capture, adapter, case, variant, run_id, problem)
            trace = await capture.execute(_InWorkspace(adapter, cell), case, variant, run_id)
            extra = await asyncio.to_thread(self._record, copies, case.id, variant, cell, before)
        finally:
            await asyncio.to_thread(copies.close_cell, cell)
        return trace.model_copy(update={"extra": {**trace.extra, **extra}})

    @staticmethod
    async def _without_workspace(
        capture: CaseCapture, adapter: Adapter, case: EvalCase, variant: str, run_id: str, problem: str
    ) -> Trace:
        """The cell's error trace; the file evaluators report the missing workspace as an error, not a skip."""
        trace = await capture.execute(_NoWorkspace(adapter, problem), case, variant, run_id)
        extra = {**trace.extra, ARTIFACT_ERROR_KEY: f"no workspace copy was made: {problem}"}
        return trace.model_copy(update={"extra": extra})

    def _record(
        self, copies: SourceCopies, case_id: str, variant: str, cell: Path, before: FileManifest
    ) -> dict[str, str]:
        """Take the after manifest and store the artifact; return the trace's ``extra`` keys that point at it."""
        try:
            after = build_manifest(cell, copies.source.ignore)
            _, path = store_artifact(
                self._run_path,
                case_id=case_id,
                variant=variant,
                kind=copies.source.kind,
                before_root=copies.pristine(),
                after_root=cell,
                before=before,
                after=after,
            )
        except (OSError, WorkspaceError) as exc:
            return {ARTIFACT_ERROR_KEY: f"the file changes could not be recorded: {exc}"}
        return {ARTIFACT_PATH_KEY: path}

    async def aclose(self) -> None:
        """Remove the pristine copies."""
        await asyncio.gather(*(asyncio.to_thread(c.close) for c in self._copies.values()))
