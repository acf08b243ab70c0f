"""Manifests of a workspace and the diff between two of them (FileManifest, FileDiff of data-model.md part A).

A manifest lists every regular file and symbolic link under the root by relative POSIX path, with its size, mode
(``st_mode``: file type and permission bits), mtime and sha256. Symbolic links are never followed: a link's
sha256 and size are those of its target text, so retargeting a link is a modification. Directories are not
listed (an empty directory leaves no trace), other file types (sockets, FIFOs) are skipped, and ``.git`` is always
left out, as is every path an ``ignore`` glob matches (:mod:`evaltrace._internal.pathglob`).

A path is *modified* when its sha256 or mode changed; an mtime alone changes nothing. Text files (at most
:data:`TEXT_DIFF_MAX_BYTES` on each side, no NUL byte, valid UTF-8) get a unified diff (difflib, 3 lines of
context, against ``/dev/null`` for added and removed files), cut at :data:`DIFF_MAX_CHARS` characters per file;
other files are named only.
"""

from __future__ import annotations

import difflib
import hashlib
import os
import stat
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from evaltrace._internal.pathglob import matches_any
from evaltrace.schema import FileDiff, FileEntry, FileManifest

__all__ = [
    "DIFF_MAX_CHARS",
    "TEXT_DIFF_MAX_BYTES",
    "build_manifest",
    "compare_manifests",
    "decode_text",
    "render_diff",
    "text_diff",
    "with_text_diffs",
]

TEXT_DIFF_MAX_BYTES = 1024 * 1024
"""Files larger than this (before or after) are named in the diff, not diffed line by line."""
DIFF_MAX_CHARS = 256 * 1024
"""A file's unified diff is cut after this many characters (a note says how many were left out)."""
_ALWAYS_IGNORED = (".git", ".git/**")
_CHUNK = 1024 * 1024

ReadBytes = Callable[[str], bytes | None]
"""Reads a workspace file's bytes by relative path (None: not readable)."""


def _walk(root: Path, prefix: str) -> Iterator[tuple[str, os.DirEntry[str]]]:
    with os.scandir(root / prefix if prefix else root) as entries:
        for entry in sorted(entries, key=lambda e: e.name):
            relative = f"{prefix}/{entry.name}" if prefix else entry.name
            if entry.is_dir(follow_symlinks=False):
                if relative != ".git":
                    yield from _walk(root, relative)
            elif entry.is_symlink() or entry.is_file(follow_symlinks=False):
                yield relative, entry


def _entry(path: str) -> FileEntry:
    info = os.lstat(path)
    if stat.S_ISLNK(info.st_mode):
        target = os.fsencode(os.readlink(path))
        return FileEntry(size=len(target), mode=info.st_mode, mtime=info.st_mtime, sha256=_sha(target))
    digest = hashlib.sha256()
    with open(path, "rb") as handle:  # streamed: workspaces may hold large files
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return FileEntry(size=info.st_size, mode=info.st_mode, mtime=info.st_mtime, sha256=digest.hexdigest())


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def build_manifest(root: Path, ignore: Sequence[str] = ()) -> FileManifest:
    """List the files under ``root`` (see the module docstring for what is listed and how).

    Args:
        root: The workspace.
        ignore: Globs of relative paths to leave out.

    Returns:
        The manifest, paths in sorted order.

    Raises:
        OSError: The tree cannot be read.
    """
    patterns = [*_ALWAYS_IGNORED, *ignore]
    files = {relative: _entry(entry.path) for relative, entry in _walk(root, "") if not matches_any(relative, patterns)}
    return FileManifest(files=files)


def compare_manifests(before: FileManifest, after: FileManifest) -> FileDiff:
    """Return the paths added, removed and modified (sha256 or mode changed), without text diffs."""
    old, new = before.files, after.files
    modified = [
        path
        for path in sorted(old.keys() & new.keys())
        if (old[path].sha256, old[path].mode) != (new[path].sha256, new[path].mode)
    ]
    return FileDiff(added=sorted(new.keys() - old.keys()), removed=sorted(old.keys() - new.keys()), modified=modified)


def decode_text(data: bytes | None) -> str | None:
    """Return ``data`` as text if it is a text file's content (size cap, no NUL byte, UTF-8), else None."""
    if data is None or len(data) > TEXT_DIFF_MAX_BYTES or b"\x00" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def text_diff(path: str, old: bytes | None, new: bytes | None) -> str | None:
    """Return the unified diff of one file (``old``/``new`` None: added/removed), or None when it is not text.

    Args:
        path: The relative path (named in the ``---``/``+++`` lines as ``a/<path>`` and ``b/<path>``).
        old: The content before, None when the file was added.
        new: The content after, None when the file was removed.
    """
    before = "" if old is None else decode_text(old)
    after = "" if new is None else decode_text(new)
    if before is None or after is None:
        return None
    lines = difflib.unified_diff(
        before.splitlines(keepends=True),
        after.splitlines(keepends=True),
        fromfile="/dev/null" if old is None else f"a/{path}",
        tofile="/dev/null" if new is None else f"b/{path}",
    )
    # A last line without a newline would run into the next header: end it, as `diff` does, with a marker.
    text = "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines)
    if len(text) > DIFF_MAX_CHARS:
        text = text[:DIFF_MAX_CHARS] + f"\n... diff cut: {len(text) - DIFF_MAX_CHARS} more characters\n"
    return text


def with_text_diffs(diff: FileDiff, read_before: ReadBytes, read_after: ReadBytes) -> tuple[FileDiff, list[str]]:
    """Add the unified diffs of the changed text files to ``diff``; return it and the changed non-text paths."""
    diffs: dict[str, str] = {}
    binary: list[str] = []
    changes = [(p, True, False) for p in diff.added] + [(p, False, True) for p in diff.removed]
    changes += [(p, True, True) for p in diff.modified]
    for path, has_after, has_before in sorted(changes):
        old = read_before(path) if has_before else None
        new = read_after(path) if has_after else None
        unreadable = (has_before and old is None) or (has_after and new is None)
        rendered = None if unreadable else text_diff(path, old, new)
        if rendered is None:
            binary.append(path)
        elif rendered:  # a mode-only change, or an empty added file, has no line to show
            diffs[path] = rendered
    return diff.model_copy(update={"text_diffs": diffs}), binary


def render_diff(diff: FileDiff, binary: Sequence[str]) -> str:
    """Render ``diff.txt``: a list of the changes, then each text diff, and a line per changed non-text file."""
    lines = [f"{kind} {path}\n" for kind, paths in _kinds(diff) for path in paths] or ["no changes\n"]
    body = [diff.text_diffs[path] for path in sorted(diff.text_diffs)]
    notes = [f"not diffed (binary, or over {TEXT_DIFF_MAX_BYTES} bytes): {path}\n" for path in binary]
    return "".join([*lines, "\n", *body, *notes]) if body or notes else "".join(lines)


def _kinds(diff: FileDiff) -> list[tuple[str, list[str]]]:
    return [("added", diff.added), ("removed", diff.removed), ("modified", diff.modified)]
