"""``evaltrace evaluators list``: the catalogue's evaluators with their compliance tags (NIST AI RMF, SR 11-7)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from rich.console import Console

from evaltrace.cli._untrusted import plain

__all__ = ["register"]


def register(subparsers: Any) -> None:
    """Add ``evaluators list``."""
    evaluators = subparsers.add_parser("evaluators", help="the built-in evaluators and their compliance tags")
    verbs = evaluators.add_subparsers(dest="verb", metavar="VERB", required=True)
    listing = verbs.add_parser("list", help="list the catalogue's evaluators with the standards each serves")
    listing.add_argument(
        "--standard", default=None, metavar="NAME", help="only evaluators tagged with this standard (any case)"
    )
    listing.add_argument("--json", action="store_true", help="print {name, class, standards} records as JSON")
    listing.set_defaults(func=list_command)


def list_command(args: argparse.Namespace) -> int:
    """Print every catalogue evaluator, its class and its compliance tags."""
    # The catalogue imports every evaluator module: only when this command runs, never at CLI start-up.
    from evaltrace.cli.run_tables import print_table
    from evaltrace.cli.runs import print_error
    from evaltrace.cli.tables import Cell, Column
    from evaltrace.evaluators.catalogue import CATALOGUE
    from evaltrace.evaluators.compliance import STANDARDS, compliance_tags

    wanted = None
    if args.standard is not None:
        wanted = next((s for s in STANDARDS if s.lower() == args.standard.strip().lower()), None)
        if wanted is None:
            return print_error(ValueError(f"unknown standard {args.standard!r}; known: {', '.join(STANDARDS)}"))
    records: list[dict[str, Any]] = [
        {"name": name, "class": cls.__name__, "standards": list(compliance_tags(name))}
        for name, cls in sorted(CATALOGUE.items())
        if wanted is None or wanted in compliance_tags(name)
    ]
    if args.json:
        print(json.dumps(records, indent=2))
        return 0
    console = Console()
    rows: list[list[Cell]] = [
        [
            str(r["name"]),
            str(r["class"]),
            ", ".join(f"{s} ({STANDARDS[s]})" for s in r["standards"]) or "-",
        ]
        for r in records
    ]
    columns = [Column("evaluator"), Column("class", drop=1), Column("compliance tags", fold=True)]
    title = f"{len(records)} evaluators" + (f" tagged {wanted}" if wanted else "")
    print_table(console, columns, rows, plain(title))
    return 0
