"""The error raised for a malformed eval.yaml / cases.yaml, naming the file, the entry and the problem."""

from __future__ import annotations

from pathlib import Path

from evaltrace.exceptions import ConfigError

__all__ = ["RunConfigError"]


class RunConfigError(ConfigError):
    """An offline-run file is malformed; ``str()`` reads ``<file>: <entry>: <problem>``.

    Attributes:
        path: The file at fault.
        entry: Where in the file (e.g. ``variants[1].config.target``); empty for the file as a whole.
        problem: What is wrong.
    """

    def __init__(self, path: Path | str, entry: str, problem: str) -> None:
        self.path = Path(path)
        self.entry = entry
        super().__init__(f"{path}: {entry}" if entry else str(path), problem)
        # ConfigError's message is "invalid setting ...": a file-oriented message reads better on the CLI.
        self.args = (f"{path}: {entry}: {problem}" if entry else f"{path}: {problem}",)

    def __str__(self) -> str:
        return str(self.args[0])
