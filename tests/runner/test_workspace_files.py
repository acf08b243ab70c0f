"""Manifests and diffs of workspaces (runner/file_changes.py) and the artifacts directory (runner/artifacts.py),
on real files."""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

from evaltrace.runner.artifacts import artifact_dir, attach_artifacts, store_artifact
from evaltrace.runner.file_changes import (
    DIFF_MAX_CHARS,
    TEXT_DIFF_MAX_BYTES,
    build_manifest,
    compare_manifests,
    text_diff,
)
from evaltrace.schema import FilesystemArtifact, Trace, utcnow


def _tree(root: Path) -> Path:
    (root / "src" / "pkg").mkdir(parents=True)
    (root / "src" / "pkg" / "mod.py").write_text("x = 1\ny = 2\n")
    (root / "README.md").write_text("readme\n")
    (root / "data.bin").write_bytes(b"\x00\x01\x02" * 10)
    (root / "run.sh").write_text("#!/bin/sh\n")
    (root / "run.sh").chmod(0o755)
    (root / "link").symlink_to("README.md")
    (root / "outside").symlink_to("/etc/hostname")
    (root / "__pycache__").mkdir()
    (root / "__pycache__" / "mod.pyc").write_bytes(b"\x00cache")
    (root / ".git").mkdir()
    (root / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (root / "empty_dir").mkdir()
    return root


def test_manifest_lists_files_and_links_with_size_mode_mtime_sha256(tmp_path: Path) -> None:
    root = _tree(tmp_path / "ws")
    manifest = build_manifest(root, ignore=["**/__pycache__/**"])
    assert sorted(manifest.files) == ["README.md", "data.bin", "link", "outside", "run.sh", "src/pkg/mod.py"]
    entry = manifest.files["src/pkg/mod.py"]
    content = (root / "src/pkg/mod.py").read_bytes()
    info = os.stat(root / "src/pkg/mod.py")
    assert (entry.size, entry.mode, entry.mtime) == (len(content), info.st_mode, info.st_mtime)
    assert entry.sha256 == hashlib.sha256(content).hexdigest()
    assert stat.S_IMODE(manifest.files["run.sh"].mode) == 0o755
    # Links are not followed: their target text is hashed (the target outside the tree is never read).
    for name, target in (("link", b"README.md"), ("outside", b"/etc/hostname")):
        link = manifest.files[name]
        assert stat.S_ISLNK(link.mode) and link.size == len(target)
        assert link.sha256 == hashlib.sha256(target).hexdigest()


def test_large_file_is_hashed_by_streaming(tmp_path: Path) -> None:
    big = os.urandom(3 * 1024 * 1024 + 17)
    (tmp_path / "big.bin").write_bytes(big)
    entry = build_manifest(tmp_path).files["big.bin"]
    assert entry.size == len(big) and entry.sha256 == hashlib.sha256(big).hexdigest()


def test_diff_by_content_and_mode_not_mtime(tmp_path: Path) -> None:
    root = _tree(tmp_path / "ws")
    before = build_manifest(root)
    (root / "src/pkg/mod.py").write_text("x = 1\ny = 3\n")  # content
    (root / "run.sh").chmod(0o644)  # mode only
    os.utime(root / "README.md", (1, 1))  # mtime only: not a modification
    (root / "data.bin").unlink()
    (root / "new.txt").write_text("new\n")
    (root / "link").unlink()
    (root / "link").symlink_to("new.txt")  # retargeted link
    diff = compare_manifests(before, build_manifest(root))
    assert diff.added == ["new.txt"]
    assert diff.removed == ["data.bin"]
    assert diff.modified == ["link", "run.sh", "src/pkg/mod.py"]


def test_text_diff_is_unified_binary_and_large_files_are_not_diffed() -> None:
    rendered = text_diff("a.txt", b"one\ntwo\n", b"one\nTWO\nthree")
    assert rendered is not None
    assert rendered.splitlines() == [
        "--- a/a.txt",
        "+++ b/a.txt",
        "@@ -1,2 +1,3 @@",
        " one",
        "-two",
        "+TWO",
        "+three",
        "\\ No newline at end of file",
    ]
    assert text_diff("new.txt", None, b"hi\n") == "--- /dev/null\n+++ b/new.txt\n@@ -0,0 +1 @@\n+hi\n"
    assert text_diff("b.bin", b"a\x00b", b"a\x00c") is None  # NUL byte
    assert text_diff("c.txt", b"\xff\xfe", b"ok") is None  # not UTF-8
    assert text_diff("d.txt", b"x", b"y" * (TEXT_DIFF_MAX_BYTES + 1)) is None  # too large
    many = "".join(f"line {i}\n" for i in range(60_000)).encode()
    cut = text_diff("e.txt", b"", many)
    assert cut is not None and len(cut) < DIFF_MAX_CHARS + 100 and "... diff cut:" in cut


def _trace(extra: dict[str, object]) -> Trace:
    now = utcnow()
    return Trace(run_id="r", case_id="c/1", variant_name="v", started_at=now, finished_at=now, extra=extra)


def test_store_artifact_writes_changed_files_diff_and_json(tmp_path: Path) -> None:
    before_root = _tree(tmp_path / "pristine")
    after_root = _tree(tmp_path / "cell")
    before = build_manifest(before_root)
    (after_root / "src/pkg/mod.py").write_text("x = 1\ny = 2\nz = 3\n")
    (after_root / "data.bin").write_bytes(b"\x00\xff")
    (after_root / "README.md").unlink()
    (after_root / "out").mkdir()
    (after_root / "out" / "report.txt").write_text("done\n")
    run_path = tmp_path / "run"
    artifact, relative = store_artifact(
        run_path,
        case_id="c/1",
        variant="v",
        kind="tempdir_snapshot",
        before_root=before_root,
        after_root=after_root,
        before=before,
        after=build_manifest(after_root),
    )
    directory = artifact_dir(run_path, "c/1", "v")
    assert directory == run_path / "artifacts" / "c%2F1" / "v"  # a case id is never a path
    assert relative == "artifacts/c%2F1/v/artifact.json"
    assert artifact.artifacts_path == "artifacts/c%2F1/v"
    # Only changed files are kept: before/ as they were, after/ as they are.
    before_files = sorted(p.relative_to(directory / "before").as_posix() for p in (directory / "before").rglob("*"))
    after_files = sorted(p.relative_to(directory / "after").as_posix() for p in (directory / "after").rglob("*"))
    assert before_files == ["README.md", "data.bin", "src", "src/pkg", "src/pkg/mod.py"]
    assert after_files == ["data.bin", "out", "out/report.txt", "src", "src/pkg", "src/pkg/mod.py"]
    assert (directory / "before/src/pkg/mod.py").read_text() == "x = 1\ny = 2\n"
    assert (directory / "after/src/pkg/mod.py").read_text() == "x = 1\ny = 2\nz = 3\n"
    text = (directory / "diff.txt").read_text()
    assert "added out/report.txt\nremoved README.md\nmodified data.bin\nmodified src/pkg/mod.py\n" in text
    assert "+z = 3" in text and "-readme" in text and "+done" in text
    assert "not diffed (binary, or over 1048576 bytes): data.bin" in text
    assert "\\x00" not in text and "\x00" not in text  # binary content is never printed
    assert set(artifact.diff.text_diffs) == {"README.md", "out/report.txt", "src/pkg/mod.py"}
    on_disk = FilesystemArtifact.model_validate_json((directory / "artifact.json").read_bytes())
    assert on_disk == artifact and on_disk.before_manifest == before

    (loaded,) = attach_artifacts([_trace({"artifact_path": relative})], run_path)
    assert FilesystemArtifact.model_validate(loaded.extra["filesystem_artifact"]) == artifact
    (directory / "artifact.json").unlink()
    (missing,) = attach_artifacts([_trace({"artifact_path": relative})], run_path)
    assert "cannot read the filesystem artifact" in str(missing.extra["artifact_error"])
    (plain,) = attach_artifacts([_trace({})], run_path)
    assert plain.extra == {}
