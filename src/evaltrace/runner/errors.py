"""Errors of offline runs: a malformed eval.yaml / cases.yaml, and a run that Ctrl-C interrupted.

A malformed file is named with the entry and the problem; an interrupted run says what it saved.
"""

from __future__ import annotations

from pathlib import Path

from evaltrace.exceptions import ConfigError

__all__ = ["RunConfigError", "RunInterrupted"]


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


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C (SIGINT) stopped a run; what it saved stays in its run directory, for ``run --resume`` to continue.

    A KeyboardInterrupt still, so code that stops on Ctrl-C stops on it; it only adds what the run had saved.

    Attributes:
        run_path: The run directory.
        cells: Cells (case × variant) of the run.
        traces_saved: Cells with a trace in traces.jsonl (each is not run again on resume).
        results_saved: Evaluation results in results.jsonl (each is not evaluated again on resume).
        complete: The run directory was complete (summary.yaml written); only saving to the stores was cut short.
    """

    def __init__(self, run_path: Path, *, cells: int, traces_saved: int, results_saved: int, complete: bool) -> None:
        self.run_path = run_path
        self.cells = cells
        self.traces_saved = traces_saved
        self.results_saved = results_saved
        self.complete = complete
        super().__init__(
            f"run {run_path.name} interrupted: {traces_saved} of {cells} traces and {results_saved} evaluation"
            f" results saved in {run_path}"
        )
