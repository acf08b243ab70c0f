"""The ``evaltrace`` command line: one sub-command module per noun, each with ``register(subparsers)``."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from evaltrace._version import __version__
from evaltrace.cli.examples import add_examples

# Each module defines register(subparsers) and sets ``func`` on its parsers; new nouns are added here.
_COMMAND_MODULES = (
    "evaltrace.cli.traces",
    "evaltrace.cli.sessions",
    "evaltrace.cli.scores",
    "evaltrace.cli.worker",
    "evaltrace.cli.report",
    "evaltrace.cli.run",
    "evaltrace.cli.runs",
    "evaltrace.cli.evaluate",
    "evaltrace.cli.evaluators",
)
# Nouns whose module is the only one they need: ``evaltrace traces list`` starts without importing the runner,
# the worker and their dependencies (the list budget of issue 16 is 200 ms for the whole process).
_SINGLE_MODULE_NOUNS = {"traces": ("evaltrace.cli.traces",), "sessions": ("evaltrace.cli.sessions",)}


def build_parser(modules: Sequence[str] = _COMMAND_MODULES) -> argparse.ArgumentParser:
    """Build the argument parser with the sub-commands of ``modules`` (default: all of them)."""
    parser = argparse.ArgumentParser(prog="evaltrace", description="Trace and evaluate LLM applications.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module_name in modules:
        module = importlib.import_module(module_name)
        module.register(subparsers)
    add_examples(parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``evaltrace`` script; returns the process exit code."""
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(_SINGLE_MODULE_NOUNS.get(argv[0], _COMMAND_MODULES) if argv else _COMMAND_MODULES)
    args = parser.parse_args(argv)
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help()
        return 2
    code: int = func(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
