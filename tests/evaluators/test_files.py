"""The filesystem evaluators (evaluators/files.py): globs, verdicts and reasons, skips and unreadable artifacts."""

from __future__ import annotations

from typing import Any

import pytest

from evaltrace.evaluation.runner import run_evaluator
from evaltrace.evaluators import (
    CATALOGUE,
    FilesChanged,
    MustCreateFiles,
    MustModifyFiles,
    MustNotModifyFiles,
    create_evaluator,
)
from evaltrace.schema import FileDiff, FilesystemArtifact, Trace

from .factories import build_case, build_trace


def _trace(added: list[str] = [], removed: list[str] = [], modified: list[str] = []) -> Trace:  # noqa: B006
    artifact = FilesystemArtifact(
        case_id="c1",
        variant_name="v1",
        workspace_kind="tempdir_snapshot",
        diff=FileDiff(added=added, removed=removed, modified=modified),
        artifacts_path="artifacts/c1/v1",
    )
    extra: dict[str, Any] = {
        "artifact_path": "artifacts/c1/v1/artifact.json",
        "filesystem_artifact": artifact.model_dump(mode="json"),
    }
    return build_trace("done", extra=extra)


def test_catalogue_has_the_file_evaluators() -> None:
    assert CATALOGUE["files_changed"] is FilesChanged
    assert create_evaluator("must_not_modify_files", "secrets/**").globs["must_not_modify_files"] == ("secrets/**",)
    assert isinstance(create_evaluator("must_create_files"), MustCreateFiles)
    with pytest.raises(ValueError, match="expected a list of glob strings"):
        FilesChanged(must_create_files="out/*.md")


@pytest.mark.parametrize(
    ("pattern", "path", "matched"),
    [
        ("src/app.py", "src/app.py", True),
        ("*.py", "app.py", True),
        ("*.py", "src/app.py", False),  # * stays within one segment
        ("**/*.py", "app.py", True),  # ** matches no segment too
        ("**/*.py", "src/a/b/app.py", True),
        ("src/**", "src/a/b.txt", True),
        ("config/**", "configuration/x", False),
        ("**/.env", "deploy/.env", True),  # dotfiles are ordinary names
        ("*.{md,txt}", "notes.txt", True),
        ("file?.txt", "file1.txt", True),
        ("[ab].txt", "c.txt", False),
    ],
)
def test_glob_semantics(pattern: str, path: str, matched: bool) -> None:
    result = MustModifyFiles(pattern).evaluate(_trace(modified=[path]), None)
    assert result.passed is matched and result.status == "completed"


def test_all_three_lists_with_reasons_naming_the_files() -> None:
    case = build_case(
        must_modify_files=["src/**/*.py", "docs/*.md"],
        must_not_modify_files=["config/**", "*.lock"],
        must_create_files=["out/*.json"],
    )
    trace = _trace(added=["config/new.yaml", "out/x.csv"], removed=["poetry.lock"], modified=["src/a/b.py"])
    result = FilesChanged().evaluate(trace, case)
    assert not result.passed and result.score == pytest.approx(1 - 4 / 5)
    assert result.reason == (
        "forbidden files changed: config/new.yaml (added), poetry.lock (removed); "
        "no modified file matches docs/*.md; no added file matches out/*.json"
    )
    assert result.detail["forbidden_changes"] == ["config/new.yaml", "poetry.lock"]
    assert result.detail["not_modified"] == ["docs/*.md"] and result.detail["not_created"] == ["out/*.json"]
    good = _trace(added=["out/r.json"], modified=["src/app/main.py", "docs/guide.md"])
    assert FilesChanged().evaluate(good, case).passed
    assert FilesChanged().evaluate(good, case).reason == "file changes as expected (5 globs)"


def test_modify_means_changed_in_place_and_create_means_added() -> None:
    case = build_case(must_modify_files=["app.py"], must_create_files=["app.py"])
    assert not MustModifyFiles().evaluate(_trace(added=["app.py"]), case).passed
    assert not MustModifyFiles().evaluate(_trace(removed=["app.py"]), case).passed
    assert MustCreateFiles().evaluate(_trace(added=["app.py"]), case).passed
    assert not MustCreateFiles().evaluate(_trace(modified=["app.py"]), case).passed


def test_configured_globs_replace_the_cases() -> None:
    case = build_case(must_not_modify_files=["src/**"])
    trace = _trace(modified=["src/app.py"])
    assert not MustNotModifyFiles().evaluate(trace, case).passed
    assert MustNotModifyFiles("secrets/**").evaluate(trace, case).passed


def test_long_lists_of_offenders_are_cut_in_the_reason() -> None:
    files = [f"config/f{i:02}.yaml" for i in range(14)]
    result = MustNotModifyFiles("config/**").evaluate(_trace(modified=files), None)
    assert result.reason.endswith("config/f09.yaml (modified) and 4 more")
    assert result.detail["forbidden_changes"] == files


def test_not_evaluated_without_expectations_or_workspace() -> None:
    no_lists = FilesChanged().evaluate(_trace(modified=["a"]), build_case())
    assert no_lists.status == "skipped"
    assert "names no must_modify_files / must_not_modify_files / must_create_files" in no_lists.reason
    one_list = MustCreateFiles().evaluate(_trace(), build_case(must_modify_files=["a"]))
    assert one_list.status == "skipped" and "names no must_create_files" in one_list.reason
    no_workspace = FilesChanged().evaluate(build_trace("x"), build_case(must_modify_files=["a"]))
    assert no_workspace.status == "skipped" and "has no workspace" in no_workspace.reason


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"artifact_path": "artifacts/c1/v1/artifact.json"}, "was not loaded with the trace"),
        ({"artifact_error": "the file changes could not be recorded: disk full"}, "disk full"),
        ({"filesystem_artifact": {"case_id": "c1"}}, "not a valid filesystem artifact"),
    ],
)
def test_an_unavailable_artifact_is_an_error_not_a_verdict(extra: dict[str, Any], message: str) -> None:
    result = run_evaluator(FilesChanged(), build_trace("x", extra=extra), build_case(must_modify_files=["a"]))
    assert result.status == "failed" and result.error is not None and message in result.error.message
