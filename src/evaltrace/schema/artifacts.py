"""Filesystem artifacts of a case: workspace manifests before and after, and their diff."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from evaltrace.schema._base import SchemaModel, VersionedModel

WorkspaceKind = Literal["tempdir_snapshot", "git_branch", "docker"]


class FileEntry(SchemaModel):
    """One file of a manifest."""

    size: int
    mode: int
    mtime: float
    """Seconds since the epoch."""
    sha256: str


class FileManifest(SchemaModel):
    """Files of a workspace by relative path."""

    files: dict[str, FileEntry] = Field(default_factory=dict)


class FileDiff(SchemaModel):
    """Paths added, removed and modified between two manifests, with unified diffs of text files."""

    added: list[str] = Field(default_factory=list)
    removed: list[str] = Field(default_factory=list)
    modified: list[str] = Field(default_factory=list)
    text_diffs: dict[str, str] = Field(default_factory=dict)


class FilesystemArtifact(VersionedModel):
    """What one (case, variant) did to its workspace."""

    case_id: str
    variant_name: str
    workspace_kind: WorkspaceKind
    before_manifest: FileManifest = Field(default_factory=FileManifest)
    after_manifest: FileManifest = Field(default_factory=FileManifest)
    diff: FileDiff = Field(default_factory=FileDiff)
    artifacts_path: str
    """Directory holding ``before/``, ``after/`` and ``diff.txt``."""
