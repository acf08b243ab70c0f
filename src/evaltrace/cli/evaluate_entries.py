"""The evaluators of ``evaltrace evaluate``: ``-e`` entries and an ``--evaluators`` file, built as eval.yaml's are.

``-e NAME`` is a catalogue evaluator, ``-e NAME:key=value,key=value`` one with options (values read as YAML
scalars: ``3`` is a number, ``true`` a boolean), and ``-e package.module:attr`` an evaluator object, class or
function to import. ``--evaluators FILE`` reads a YAML file's ``evaluators:`` list (and its ``judge:`` block),
so an eval.yaml can be given as it is. Every entry is built by :func:`evaltrace.runner.evaluator_entries.build_evaluators`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["EntryError", "load_entries"]

_COMMAND_LINE = Path("<command line>")


class EntryError(ValueError):
    """An ``-e`` value or an ``--evaluators`` file that cannot be read."""


def _scalar(text: str) -> Any:
    from evaltrace._internal import safe_yaml

    try:
        return safe_yaml.load(text)
    except Exception:
        return text


def parse_entry(text: str) -> dict[str, Any]:
    """The eval.yaml entry an ``-e`` value stands for.

    Raises:
        EntryError: An option is not ``key=value``, or the value is empty.
    """
    name, sep, rest = text.partition(":")
    if not name:
        raise EntryError(f"-e {text!r}: expected NAME, NAME:key=value,... or package.module:attr")
    if not sep:
        return {"name": name}
    pairs = [p for p in rest.split(",") if p]
    if pairs and all("=" in p for p in pairs):
        entry: dict[str, Any] = {"name": name}
        for pair in pairs:
            key, _, value = pair.partition("=")
            entry[key.strip()] = _scalar(value)
        return entry
    if "=" in rest or not rest:
        raise EntryError(f"-e {text!r}: options are key=value pairs separated by commas")
    return {"import": text}


def _file_entries(path: Path) -> tuple[list[dict[str, Any]], Any, Any]:
    from evaltrace._internal import safe_yaml
    from evaltrace.runner.config import load_evaluator_entries, load_judge

    try:
        data = safe_yaml.load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise EntryError(f"--evaluators: cannot read {path}: {exc.strerror or exc}") from None
    except Exception as exc:  # a YAML syntax error, or a document beyond the safe loader's limits
        raise EntryError(f"--evaluators: {path} is not valid YAML: {exc}") from None
    if not isinstance(data, dict) or "evaluators" not in data:
        raise EntryError(f"--evaluators: {path} has no 'evaluators:' list")
    # pythonpath: as in a run, so the file's `import:` evaluators find the project's modules.
    return load_evaluator_entries(path, data["evaluators"]), load_judge(path, data.get("judge")), data.get("pythonpath")


def load_entries(entries: list[str], file: Path | None) -> list[Any]:
    """Build the evaluators, as ``EvaluatorSpec`` objects carrying each entry's ``timeout_s``.

    Raises:
        EntryError: A malformed ``-e`` value or file.
        RunConfigError: An unknown evaluator, an option its constructor does not take, an import that fails.
    """
    from evaltrace.evaluation.evaluator import EvaluatorSpec
    from evaltrace.runner.evaluator_entries import build_evaluators

    built: list[Any] = []
    if file is not None:
        raw, judge, pythonpath = _file_entries(file)
        built += build_evaluators(raw, file, judge=judge, pythonpath=pythonpath or [])
    if entries:
        built += build_evaluators([parse_entry(e) for e in entries], _COMMAND_LINE, base_dir=Path.cwd())
    # An entry's session scope (written, or a conversation-only evaluator's default) is the backfill's for it.
    return [
        EvaluatorSpec(item.evaluator, timeout_s=item.timeout_s, scope="session" if item.scope == "session" else None)
        for item in built
    ]
