"""Structure evaluators: the answer is JSON valid against a schema; the agent's files are sane."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from evaltrace._internal.pathglob import matching
from evaltrace.evaluators._base import (
    PASS_RATE,
    DeterministicEvaluator,
    MissingInputError,
    Verdict,
    answer_text,
    case_list,
    checked_threshold,
    require_extra,
)
from evaltrace.evaluators.files import ARTIFACT_DIR_KEY, trace_artifact
from evaltrace.schema import EvalCase, FilesystemArtifact, Trace

_LEGACY_ROOT_KEY = "artifacts_path"  # a directory some callers set by hand before the runner gave one
_GLOB_CHARACTERS = frozenset("*?[")
_AFTER = "after"
_UNCHANGED = "unchanged: the system did not write it"
_FENCE = re.compile(r"^\s*```(?:json)?\s*\n(?P<body>.*?)\n\s*```\s*$", re.DOTALL)
MAX_ERRORS = 10


def parse_json_text(text: str) -> Any:
    """Parse ``text`` as JSON, accepting one surrounding Markdown code fence; raise ValueError if it is not JSON."""
    fenced = _FENCE.match(text)
    return json.loads(fenced.group("body") if fenced else text)


class JsonSchema(DeterministicEvaluator):
    """The answer parses as JSON and validates against a JSON Schema (``jsonschema`` library, any draft).

    The schema comes from the constructor, else ``case.metadata["json_schema"]``; ``{}`` checks parseability
    only. A single surrounding Markdown code fence is accepted. Pass/fail per case; up to 10 validation errors
    (path and message) in ``detail``. ``threshold`` is the catalogue's: the share of cases that must be valid
    (0.5), so 3 valid answers out of 4 raise no run problem. Needs the ``jsonschema`` extra, checked when the
    evaluator is created.
    """

    name = "json_schema"
    threshold_of = PASS_RATE

    def __init__(
        self, schema: Mapping[str, Any] | None = None, *, field: str = "output.final_answer", threshold: float = 0.5
    ) -> None:
        """Configure the schema.

        Args:
            schema: A JSON Schema; validated here so a broken schema fails early.
            field: Dotted path of the Trace to parse.
            threshold: Share of cases that must hold valid JSON (the run's pass rate), in [0, 1].

        Raises:
            MissingExtraError: jsonschema is not installed.
            ValueError: A threshold outside [0, 1].
        """
        self._jsonschema = require_extra("jsonschema", "jsonschema", extra="jsonschema")
        if schema is not None:
            self._jsonschema.validators.validator_for(schema).check_schema(schema)
        self.schema = dict(schema) if schema is not None else None
        self.field = field
        self.threshold = checked_threshold(threshold)

    def check(self, trace: Trace, case: EvalCase | None) -> Verdict:
        """Parse and validate."""
        schema = self.schema
        if schema is None:
            schema = case.metadata.get("json_schema") if case else None
            if not isinstance(schema, dict):
                raise MissingInputError("no schema configured or in case.metadata['json_schema']")
        try:
            document = parse_json_text(answer_text(trace, self.field))
        except ValueError as exc:
            return Verdict(False, 0.0, f"not JSON: {exc}", {"parsed": False, "errors": []})
        validator = self._jsonschema.validators.validator_for(schema)(schema)
        errors = sorted(validator.iter_errors(document), key=lambda e: list(e.absolute_path))
        listed = [
            {"path": "/" + "/".join(map(str, e.absolute_path)), "message": e.message} for e in errors[:MAX_ERRORS]
        ]
        reason = "valid JSON matching the schema" if not errors else f"{len(errors)} schema violation(s)"
        return Verdict(
            not errors, 0.0 if errors else 1.0, reason, {"parsed": True, "errors": listed, "error_count": len(errors)}
        )


def _file_problems(path: Path, required_keys: Sequence[str]) -> list[str]:
    if not path.is_file():
        return ["missing"]
    if path.stat().st_size == 0:
        return ["empty"]
    if path.suffix.lower() != ".json":
        return []
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        return [f"invalid JSON: {exc}"]
    if required_keys and not isinstance(document, dict):
        return ["JSON is not an object"]
    return [f"missing key {key!r}" for key in required_keys if key not in document]


class AgentSanity(DeterministicEvaluator):
    """Files the agent should have produced exist, are non-empty, parse (``.json``) and have the expected keys.

    Files: the constructor, else ``case.expected.must_modify_files`` (globs are matched against the files the
    workspace held afterwards). Where they are read:

    * under ``root`` when given;
    * else, for a run in a workspace (``evaltrace run``), in the run's snapshot of the cell: a file the system
      added or modified is read from ``artifacts/<case>/<variant>/after/``; one it left unchanged is a problem
      (``unchanged``: the system did not write it); one absent afterwards is ``missing``;
    * else under ``trace.extra["artifacts_path"]`` (a directory set by the caller).

    Score: share of sane files; threshold 0.75, higher is better. Without any of these, not evaluated.
    """

    name = "agent_sanity"

    def __init__(
        self,
        files: Sequence[str] | None = None,
        *,
        root: str | Path | None = None,
        required_keys: Mapping[str, Sequence[str]] | None = None,
        threshold: float = 0.75,
    ) -> None:
        """Configure the files.

        Args:
            files: Paths relative to the workspace.
            root: The workspace directory.
            required_keys: For JSON files, keys their top-level object must have.
            threshold: Minimum share of sane files.
        """
        self.files = list(files) if files else None
        self.root = Path(root) if root is not None else None
        self.required_keys = {k: list(v) for k, v in (required_keys or {}).items()}
        self.threshold = threshold

    def check(self, trace: Trace, case: EvalCase | None) -> Verdict:
        """Inspect every file."""
        files = case_list(self.files, case, "must_modify_files")
        if not files:
            raise MissingInputError("no files configured or in case.expected.must_modify_files")
        artifact = trace_artifact(trace) if self.root is None else None  # an unreadable one: an error, not a skip
        snapshot = trace.extra.get(ARTIFACT_DIR_KEY)
        if artifact is not None and snapshot:
            return self._judge(_snapshot_problems(artifact, Path(str(snapshot)), files, self.required_keys), snapshot)
        legacy = trace.extra.get(_LEGACY_ROOT_KEY)
        root = self.root or (Path(str(legacy)) if legacy else None)
        if root is None:
            raise MissingInputError("no workspace root configured and the trace did not run in a workspace")
        problems = {name: _file_problems(root / name, self.required_keys.get(name, ())) for name in files}
        return self._judge(problems, root)

    def _judge(self, problems: Mapping[str, list[str]], root: Path | str) -> Verdict:
        bad = {name: issues for name, issues in problems.items() if issues}
        score = 1.0 - len(bad) / len(problems)
        reason = "all files sane" if not bad else f"{len(bad)}/{len(problems)} files with problems"
        detail = {"root": str(root), "files": list(problems), "problems": bad}
        return Verdict(score >= self.threshold, score, reason, detail)


def _snapshot_problems(
    artifact: FilesystemArtifact, directory: Path, files: Sequence[str], required_keys: Mapping[str, Sequence[str]]
) -> dict[str, list[str]]:
    """Each file's problems as the system left it: read from the snapshot's ``after/`` where the system wrote it."""
    present = list(artifact.after_manifest.files)
    written = {*artifact.diff.added, *artifact.diff.modified}
    names: list[str] = []
    for name in files:
        found = matching(present, name) if _GLOB_CHARACTERS & set(name) else []
        names.extend(found or [name])
    problems: dict[str, list[str]] = {}
    for name in dict.fromkeys(names):
        if name in written:
            path = directory / _AFTER / name
            # A link is kept as a link in the snapshot: following it could read outside the run directory.
            linked = path.is_symlink()
            problems[name] = ["a symbolic link"] if linked else _file_problems(path, required_keys.get(name, ()))
        elif name in artifact.after_manifest.files:
            problems[name] = [_UNCHANGED]
        else:
            problems[name] = ["missing"]
    return problems
