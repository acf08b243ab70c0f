"""Filesystem evaluators: did the system change the files the case expects, and only those?

They judge the :class:`~evaltrace.schema.FilesystemArtifact` of a (case, variant) that ran in a workspace. The
runner reads it from the run directory (``Trace.extra["artifact_path"]``) and hands it over as
``Trace.extra["filesystem_artifact"]`` (its JSON form) when it evaluates, so the evaluators stay pure functions of
``(trace, case)``: they never read files. Globs follow :mod:`evaltrace._internal.pathglob` (whole relative POSIX
paths; ``*`` within a segment, ``**`` across segments). What each list means:

* ``must_modify_files``: each glob matches at least one *modified* file (it existed before and after, and its
  content or mode changed). A created or deleted file does not count.
* ``must_not_modify_files``: no added, removed or modified file matches any glob.
* ``must_create_files``: each glob matches at least one *added* file.

Score: share of the globs satisfied; passes when all are (threshold 1.0). A case naming none of the lists, or a
variant without a workspace, is not evaluated (``skipped``, with the reason); an artifact the runner could not
read is an error of the evaluation, never a pass.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError

from evaltrace._internal.pathglob import matching
from evaltrace.evaluators._base import DeterministicEvaluator, MissingInputError, Verdict, case_list
from evaltrace.schema import EvalCase, FileDiff, FilesystemArtifact, Trace

__all__ = [
    "ARTIFACT_DIR_KEY",
    "ARTIFACT_ERROR_KEY",
    "ARTIFACT_KEY",
    "ARTIFACT_PATH_KEY",
    "ArtifactUnavailableError",
    "FilesChanged",
    "MustCreateFiles",
    "MustModifyFiles",
    "MustNotModifyFiles",
    "trace_artifact",
]

ARTIFACT_PATH_KEY = "artifact_path"
"""``Trace.extra`` key: the cell's ``artifact.json``, relative to the run directory (persisted in traces.jsonl)."""
ARTIFACT_KEY = "filesystem_artifact"
"""``Trace.extra`` key: the FilesystemArtifact as JSON, added by the runner for evaluation (not persisted)."""
ARTIFACT_DIR_KEY = "artifact_dir"
"""``Trace.extra`` key: the cell's artifacts directory (``before/``, ``after/``), absolute, added by the runner with
:data:`ARTIFACT_KEY` for evaluators that read the files the system wrote (not persisted)."""
ARTIFACT_ERROR_KEY = "artifact_error"
"""``Trace.extra`` key: why the cell's artifact could not be recorded or read."""
_MODIFY = "must_modify_files"
_NOT_MODIFY = "must_not_modify_files"
_CREATE = "must_create_files"
_ALL_CHECKS = (_MODIFY, _NOT_MODIFY, _CREATE)
_NAMED = 10


class ArtifactUnavailableError(RuntimeError):
    """The trace ran in a workspace but its artifact is missing or unreadable: nothing can be judged."""


def trace_artifact(trace: Trace) -> FilesystemArtifact | None:
    """Return the filesystem artifact handed over with ``trace``; None when its variant had no workspace.

    Raises:
        ArtifactUnavailableError: The trace has an artifact on disk that was not (or could not be) loaded.
    """
    problem = trace.extra.get(ARTIFACT_ERROR_KEY)
    if problem:
        raise ArtifactUnavailableError(str(problem))
    data = trace.extra.get(ARTIFACT_KEY)
    if data is None:
        path = trace.extra.get(ARTIFACT_PATH_KEY)
        if path is not None:
            raise ArtifactUnavailableError(f"the filesystem artifact {path} was not loaded with the trace")
        return None
    try:
        return FilesystemArtifact.model_validate(data)
    except ValidationError as exc:
        raise ArtifactUnavailableError(f"not a valid filesystem artifact: {exc.errors()[0]['msg']}") from None


def _names(paths: Sequence[str]) -> str:
    shown = ", ".join(paths[:_NAMED])
    return shown + (f" and {len(paths) - _NAMED} more" if len(paths) > _NAMED else "")


def _changes(diff: FileDiff) -> dict[str, str]:
    """Changed path -> how (added, removed, modified)."""
    kinds = {path: "added" for path in diff.added}
    kinds.update({path: "removed" for path in diff.removed})
    kinds.update({path: "modified" for path in diff.modified})
    return kinds


class FilesChanged(DeterministicEvaluator):
    """The workspace changes match the case's ``must_modify_files``, ``must_not_modify_files`` and ``must_create_files``.

    Each list given to the constructor replaces the case's list of the same name. Score: share of globs
    satisfied; passes when all are (threshold 1.0, higher is better).

    Example:
        ``FilesChanged(must_not_modify_files=["secrets/**", "*.lock"])``
    """

    name = "files_changed"
    checks: tuple[str, ...] = _ALL_CHECKS

    def __init__(
        self,
        *,
        must_modify_files: Sequence[str] = (),
        must_not_modify_files: Sequence[str] = (),
        must_create_files: Sequence[str] = (),
        threshold: float = 1.0,
    ) -> None:
        """Configure the check.

        Args:
            must_modify_files: Globs each of which a modified file must match (default: the case's).
            must_not_modify_files: Globs no changed file may match (default: the case's).
            must_create_files: Globs each of which an added file must match (default: the case's).
            threshold: Share of globs that must be satisfied.
        """
        self.globs = {_MODIFY: must_modify_files, _NOT_MODIFY: must_not_modify_files, _CREATE: must_create_files}
        for check, globs in self.globs.items():
            if isinstance(globs, str) or not all(isinstance(g, str) for g in globs):
                raise ValueError(f"{check}: expected a list of glob strings, got {globs!r}")
        self.threshold = threshold

    def check(self, trace: Trace, case: EvalCase | None) -> Verdict:
        """Compare the artifact's diff with the expected file changes."""
        wanted = {check: case_list(self.globs[check], case, check) for check in self.checks}
        if not any(wanted.values()):
            raise MissingInputError(f"the case names no {' / '.join(self.checks)}")
        artifact = trace_artifact(trace)
        if artifact is None:
            raise MissingInputError("the variant has no workspace, so no file changes were recorded")
        diff = artifact.diff
        changes = _changes(diff)
        not_modified = [g for g in wanted.get(_MODIFY, []) if not matching(diff.modified, g)]
        not_created = [g for g in wanted.get(_CREATE, []) if not matching(diff.added, g)]
        forbidden_globs = [g for g in wanted.get(_NOT_MODIFY, []) if matching(changes, g)]
        forbidden = sorted({p for g in forbidden_globs for p in matching(changes, g)})
        total = sum(len(globs) for globs in wanted.values())
        score = 1.0 - (len(not_modified) + len(not_created) + len(forbidden_globs)) / total
        problems = []
        if forbidden:
            problems.append("forbidden files changed: " + _names([f"{p} ({changes[p]})" for p in forbidden]))
        if not_modified:
            problems.append("no modified file matches " + _names(not_modified))
        if not_created:
            problems.append("no added file matches " + _names(not_created))
        reason = "; ".join(problems) or f"file changes as expected ({total} glob{'s' if total > 1 else ''})"
        detail: dict[str, Any] = {
            **{check: globs for check, globs in wanted.items() if globs},
            "added": diff.added,
            "removed": diff.removed,
            "modified": diff.modified,
            "forbidden_changes": forbidden,
            "not_modified": not_modified,
            "not_created": not_created,
            "artifacts_path": artifact.artifacts_path,
        }
        return Verdict(score >= self.threshold, score, reason, detail)


class _OneList(FilesChanged):
    """A :class:`FilesChanged` restricted to one of the three lists, with its globs as positional arguments."""

    def __init__(self, *globs: str, threshold: float = 1.0) -> None:
        super().__init__(**{self.checks[0]: globs}, threshold=threshold)


class MustModifyFiles(_OneList):
    """Each glob (default: the case's ``must_modify_files``) matches a modified file."""

    name = _MODIFY
    checks = (_MODIFY,)


class MustNotModifyFiles(_OneList):
    """No added, removed or modified file matches a glob (default: the case's ``must_not_modify_files``)."""

    name = _NOT_MODIFY
    checks = (_NOT_MODIFY,)


class MustCreateFiles(_OneList):
    """Each glob (default: the case's ``must_create_files``) matches an added file."""

    name = _CREATE
    checks = (_CREATE,)
