"""Filesystem artifacts in the run directory: ``artifacts/<case_id>/<variant>/{before/, after/, diff.txt, artifact.json}``.

``before/`` holds the files as they were for every removed or modified path, ``after/`` the files as they are for
every added or modified path (symbolic links stay links); unchanged files are in neither, since the manifests in
``artifact.json`` already list them with their sha256. ``diff.txt`` is the human-readable diff
(:func:`evaltrace.runner.file_changes.render_diff`) and ``artifact.json`` the
:class:`~evaltrace.schema.FilesystemArtifact`, whose ``artifacts_path`` is the cell's directory relative to the
run directory. The trace points at it through ``Trace.extra["artifact_path"]``; :func:`attach_artifacts` loads it
back for evaluation (a run, a resume or ``re-evaluate``), so evaluators never touch the disk.

Everything here is owner-only (``0600`` files, ``0700`` folders; copied files keep only their owner bits).

A case id or variant name that is not a plain file name (``/``, ``..``, a leading dot, other characters than
letters, digits, ``_ - .``) is percent-encoded in the directory name.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

from pydantic import ValidationError

from evaltrace._internal.private_files import make_private_dirs, private_opener
from evaltrace.evaluators.files import ARTIFACT_DIR_KEY, ARTIFACT_ERROR_KEY, ARTIFACT_KEY, ARTIFACT_PATH_KEY
from evaltrace.runner.file_changes import TEXT_DIFF_MAX_BYTES, compare_manifests, render_diff, with_text_diffs
from evaltrace.runner.rundir import ARTIFACTS_DIR
from evaltrace.schema import FileManifest, FilesystemArtifact, Trace, WorkspaceKind

__all__ = ["ARTIFACT_FILE", "DIFF_FILE", "artifact_dir", "attach_artifacts", "store_artifact"]

ARTIFACT_FILE = "artifact.json"
DIFF_FILE = "diff.txt"
_PLAIN = re.compile(r"^[A-Za-z0-9_-][A-Za-z0-9_.-]*$")


def _segment(name: str) -> str:
    return name if _PLAIN.match(name) else quote(name, safe="").replace(".", "%2E")


def artifact_dir(run_path: Path, case_id: str, variant: str) -> Path:
    """Return the artifacts directory of one (case, variant) of the run at ``run_path``."""
    return run_path / ARTIFACTS_DIR / _segment(case_id) / _segment(variant)


def read_file(root: Path, relative: str) -> bytes | None:
    """Read a workspace file for diffing: a link's target text, a regular file up to the text-diff size, else None."""
    path = root / relative
    try:
        info = os.lstat(path)
        if stat.S_ISLNK(info.st_mode):
            return os.fsencode(os.readlink(path))
        if not stat.S_ISREG(info.st_mode) or info.st_size > TEXT_DIFF_MAX_BYTES:
            return None
        return path.read_bytes()
    except OSError:
        return None


def _copy_files(source: Path, target: Path, paths: Sequence[str]) -> None:
    for relative in paths:
        destination = target / relative
        make_private_dirs(destination.parent)
        shutil.copy2(source / relative, destination, follow_symlinks=False)
        if not destination.is_symlink():  # copy2 copies the workspace's mode; keep the owner's bits only
            destination.chmod(stat.S_IMODE(destination.stat().st_mode) & 0o700)


def _write_private(path: Path, text: str) -> None:
    with open(path, "w", encoding="utf-8", opener=private_opener) as handle:
        handle.write(text)


def store_artifact(
    run_path: Path,
    *,
    case_id: str,
    variant: str,
    kind: WorkspaceKind,
    before_root: Path,
    after_root: Path,
    before: FileManifest,
    after: FileManifest,
) -> tuple[FilesystemArtifact, str]:
    """Diff two manifests and write the cell's artifacts directory (replacing one a killed run left).

    Args:
        run_path: The run directory.
        case_id: The case.
        variant: The variant.
        kind: The workspace kind.
        before_root: A tree as it was before the system ran (the pristine copy).
        after_root: The cell's workspace after the system ran.
        before: ``before_root``'s manifest (taken on the cell's copy before the run).
        after: ``after_root``'s manifest.

    Returns:
        The artifact, and where ``artifact.json`` is relative to the run directory (for ``Trace.extra``).

    Raises:
        OSError: The directory could not be written.
    """
    directory = artifact_dir(run_path, case_id, variant)
    shutil.rmtree(directory, ignore_errors=True)
    make_private_dirs(directory)
    diff, binary = with_text_diffs(
        compare_manifests(before, after),
        lambda p: read_file(before_root, p),
        lambda p: read_file(after_root, p),
    )
    make_private_dirs(directory / "before")
    make_private_dirs(directory / "after")
    _copy_files(before_root, directory / "before", [*diff.removed, *diff.modified])
    _copy_files(after_root, directory / "after", [*diff.added, *diff.modified])
    _write_private(directory / DIFF_FILE, render_diff(diff, binary))
    relative = directory.relative_to(run_path).as_posix()
    artifact = FilesystemArtifact(
        case_id=case_id,
        variant_name=variant,
        workspace_kind=kind,
        before_manifest=before,
        after_manifest=after,
        diff=diff,
        artifacts_path=relative,
    )
    _write_private(directory / ARTIFACT_FILE, artifact.model_dump_json(indent=1) + "\n")
    return artifact, f"{relative}/{ARTIFACT_FILE}"


def _loaded(trace: Trace, run_path: Path) -> Trace:
    relative = trace.extra.get(ARTIFACT_PATH_KEY)
    if not isinstance(relative, str) or ARTIFACT_ERROR_KEY in trace.extra:
        return trace
    path = run_path / relative
    update: dict[str, Any]
    try:
        if ".." in Path(relative).parts:
            raise ValueError("points outside the run directory")
        artifact = FilesystemArtifact.model_validate_json(path.read_bytes())
        if ".." in Path(artifact.artifacts_path).parts or Path(artifact.artifacts_path).is_absolute():
            raise ValueError("its artifacts_path points outside the run directory")
        # The snapshot directory (before/, after/) as the artifact names it, absolute: agent_sanity reads after/.
        update = {
            ARTIFACT_KEY: artifact.model_dump(mode="json"),
            ARTIFACT_DIR_KEY: str((run_path / artifact.artifacts_path).absolute()),
        }
    except OSError as exc:
        update = {ARTIFACT_ERROR_KEY: f"cannot read the filesystem artifact {path}: {exc.strerror or exc}"}
    except (ValueError, ValidationError) as exc:
        update = {ARTIFACT_ERROR_KEY: f"{path}: not a valid filesystem artifact: {exc}"}
    return trace.model_copy(update={"extra": {**trace.extra, **update}})


def attach_artifacts(traces: Sequence[Trace], run_path: Path) -> list[Trace]:
    """Return ``traces`` with each one's filesystem artifact loaded into ``extra`` for the evaluators.

    Traces without ``extra["artifact_path"]`` come back as they are. A missing or invalid artifact file is
    recorded as ``extra["artifact_error"]``: the file evaluators then report an error, not a verdict.

    Args:
        traces: The traces (as in traces.jsonl).
        run_path: The run directory.
    """
    return [_loaded(trace, run_path) for trace in traces]
