"""Structure evaluators: the answer is JSON valid against a schema; the agent's files are sane."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from evaltrace.evaluators._base import (
    DeterministicEvaluator,
    MissingInputError,
    Verdict,
    answer_text,
    case_list,
    require_extra,
)
from evaltrace.schema import EvalCase, Trace

_FENCE = re.compile(r"^\s*```(?:json)?\s*\n(?P<body>.*?)\n\s*```\s*$", re.DOTALL)
MAX_ERRORS = 10


def parse_json_text(text: str) -> Any:
    """Parse ``text`` as JSON, accepting one surrounding Markdown code fence; raise ValueError if it is not JSON."""
    fenced = _FENCE.match(text)
    return json.loads(fenced.group("body") if fenced else text)


class JsonSchema(DeterministicEvaluator):
    """The answer parses as JSON and validates against a JSON Schema (``jsonschema`` library, any draft).

    The schema comes from the constructor, else ``case.metadata["json_schema"]``; ``{}`` checks parseability
    only. A single surrounding Markdown code fence is accepted. Pass/fail; up to 10 validation errors (path
    and message) in ``detail``. Needs the ``jsonschema`` extra, checked when the evaluator is created.
    """

    name = "json_schema"

    def __init__(self, schema: Mapping[str, Any] | None = None, *, field: str = "output.final_answer") -> None:
        """Configure the schema.

        Args:
            schema: A JSON Schema; validated here so a broken schema fails early.
            field: Dotted path of the Trace to parse.

        Raises:
            MissingExtraError: jsonschema is not installed.
        """
        self._jsonschema = require_extra("jsonschema", "jsonschema", extra="jsonschema")
        if schema is not None:
            self._jsonschema.validators.validator_for(schema).check_schema(schema)
        self.schema = dict(schema) if schema is not None else None
        self.field = field
        self.threshold = 1.0

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

    Files: the constructor, else ``case.expected.must_modify_files``; they are resolved against ``root``, else
    ``trace.extra["artifacts_path"]`` (the run's workspace snapshot). Score: share of sane files; threshold
    0.75, higher is better.
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
        root = self.root or (Path(str(trace.extra["artifacts_path"])) if trace.extra.get("artifacts_path") else None)
        if root is None:
            raise MissingInputError("no workspace root configured or in trace.extra['artifacts_path']")
        problems = {name: _file_problems(root / name, self.required_keys.get(name, ())) for name in files}
        bad = {name: issues for name, issues in problems.items() if issues}
        score = 1.0 - len(bad) / len(files)
        reason = "all files sane" if not bad else f"{len(bad)}/{len(files)} files with problems"
        return Verdict(score >= self.threshold, score, reason, {"root": str(root), "files": files, "problems": bad})
