"""The ``evaltrace`` command line: one sub-command module per noun, each with ``register(subparsers)``."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

# Each module defines register(subparsers) and sets ``func`` on its parsers; new nouns are added here.
_COMMAND_MODULES = (
    "evaltrace.cli.traces",
    "evaltrace.cli.scores",
    "evaltrace.cli.worker",
    "evaltrace.cli.report",
    "evaltrace.cli.run",
    "evaltrace.cli.runs",
)


def build_parser() -> argparse.ArgumentParser:
    """Build the argument parser with every available sub-command."""
    parser = argparse.ArgumentParser(prog="evaltrace", description="Trace and evaluate LLM applications.")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module_name in _COMMAND_MODULES:
        module = importlib.import_module(module_name)
        module.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``evaltrace`` script; returns the process exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help()
        return 2
    code: int = func(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
