"""An example for every command's ``--help``, attached once the whole parser is built.

Kept in one table, so that each command module stays about its arguments, and so that a test can walk the
parser and fail on any command (including one added later) that has no example. A command module that sets
its own ``epilog`` keeps it.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator

__all__ = ["EXAMPLES", "ExampleFormatter", "add_examples", "walk_commands"]

_HEADING = "examples:\n"


class ExampleFormatter(argparse.HelpFormatter):
    """argparse's formatter, except that an examples epilog keeps its lines (commands are not re-wrapped)."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if text.startswith(_HEADING):
            return text
        return super()._fill_text(text, width, indent)


EXAMPLES: dict[str, str] = {
    "": """\
  evaltrace traces list                      # traces of .evaltrace, newest first
  evaltrace traces show last                 # the newest one as a waterfall
  evaltrace run eval.yaml                    # an offline eval: cases x variants, evaluated""",
    "traces": """\
  evaltrace traces list
  evaltrace traces show last --details""",
    "traces list": """\
  evaltrace traces list                      # the 20 newest traces of ./.evaltrace
  evaltrace traces list -n 50 --store ~/app/.evaltrace
  evaltrace traces list --failed-evals --since 1h
  COLUMNS=200 evaltrace traces list | less   # every column, whatever the terminal""",
    "traces show": """\
  evaltrace traces show last                 # the newest trace
  evaltrace traces show 5f2b8c1e9d3a         # a unique prefix of its id is enough
  evaltrace traces show last --details       # also messages, tool calls and evaluation reasons""",
    "sessions": """\
  evaltrace sessions list
  evaltrace sessions show chat-42""",
    "sessions list": """\
  evaltrace sessions list                    # the 20 most recently active sessions of ./.evaltrace
  evaltrace sessions list --limit 100 --json # for scripts: turns, tokens, cost, session scores""",
    "sessions show": """\
  evaltrace sessions show chat-42            # its turns in order and its session scores
  evaltrace sessions show chat-42 --json""",
    "traces export": """\
  evaltrace traces export --format otlp-json --output traces.jsonl""",
    "scores": """\
  evaltrace scores replay .evaltrace/dead-letter/langfuse.jsonl --sink langfuse""",
    "scores replay": """\
  evaltrace scores replay .evaltrace/dead-letter/langfuse.jsonl --sink langfuse
  evaltrace scores replay dead.jsonl --sink jsonl --output scores.jsonl""",
    "worker": """\
  evaltrace worker --port 4318 --evaluators mypkg.evals:EVALUATORS --sink jsonl:scores.jsonl
  evaltrace worker --host 0.0.0.0 --otlp-endpoint http://jaeger:4318 --sink langfuse
  evaltrace worker --grpc-port 4317 --redis-url redis://redis:6379/0   # replicas share budgets""",
    "report": """\
  evaltrace report last -o report.html       # the newest trace of the local store
  evaltrace report 20260301-120000 -o run.html  # an offline run (id, unique prefix or directory)
  evaltrace report --session chat-42         # a session: its turns as a chat, its session scores""",
    "run": """\
  evaltrace run eval.yaml
  evaltrace run eval.yaml --tag smoke --limit 10 --fail-on-regression
  evaltrace run --resume 20260301-120000     # continue a killed run""",
    "evaluate": """\
  evaltrace evaluate -e pii_leakage --since 7d                  # a catalogue evaluator over last week's traces
  evaltrace evaluate --evaluators eval.yaml --failed-evals      # eval.yaml's evaluators, failed traces only
  evaltrace evaluate -e myproject.evals:tone --scope session    # your evaluator, over whole sessions
  evaltrace evaluate -e 'length:max_words=200' --scope span --span-kind llm --dry-run
  evaltrace evaluate -e pii_leakage --otlp-json traces.jsonl --sink jsonl:scores.jsonl
  evaltrace evaluate -e pii_leakage --phoenix http://127.0.0.1:6006 --project default --since 1d""",
    "re-evaluate": """\
  evaltrace re-evaluate 20260301-120000 --config eval.yaml""",
    "compare": """\
  evaltrace compare 20260301-120000 20260302-090000
  evaltrace compare 20260302-090000 --fail-on-regression   # against the promoted baseline""",
    "promote": """\
  evaltrace promote 20260302-090000""",
    "runs": """\
  evaltrace runs list
  evaltrace runs show 20260302-090000
  evaltrace runs summarize 20260302-090000
  evaltrace runs push 20260302-090000 --sqlite runs.db""",
    "runs list": """\
  evaltrace runs list -n 10
  evaltrace runs list --sqlite runs.db --namespace branch=main""",
    "runs show": """\
  evaltrace runs show 20260302-090000        # id, unique prefix or run directory""",
    "runs summarize": """\
  evaltrace runs summarize 20260302-090000   # summary.yaml again, from traces.jsonl and results.jsonl""",
    "runs push": """\
  evaltrace runs push 20260302-090000 --sqlite runs.db
  evaltrace runs push 20260302-090000 --postgres postgresql://localhost/evals --namespace branch=main""",
    "runs merge": """\
  evaltrace runs merge shard-1/runs/* shard-2/runs/* shard-3/runs/* --out runs/merged
  evaltrace runs merge runs/20260302-090000 runs/20260302-090001 --sqlite runs.db --fail-on-regression""",
    "runs analytics": """\
  evaltrace runs analytics 20260302-090000   # success rate, durations, judge cost, agreement, confidence
  evaltrace runs analytics 20260302-090000 --json""",
    "runs preference": """\
  evaltrace runs preference 20260302-090000 v2 v1                      # by the share of evaluators passed
  evaltrace runs preference 20260302-090000 v2 v1 --evaluator answer_correctness --confidence 0.99""",
    "runs agreement": """\
  evaltrace runs agreement 20260302-090000 --human human.jsonl --evaluator factual_accuracy""",
    "runs trend": """\
  evaltrace runs trend v1 -n 10              # v1's pass rate over the last 10 runs of ./runs
  evaltrace runs trend v1 --evaluator faithfulness --json""",
    "evaluators": """\
  evaltrace evaluators list""",
    "evaluators list": """\
  evaltrace evaluators list                  # every catalogue evaluator with its compliance tags
  evaltrace evaluators list --standard "privacy enhanced" --json""",
}


def walk_commands(parser: argparse.ArgumentParser, path: str = "") -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """Every parser under ``parser`` (itself first) with its command path, e.g. ``"traces show"``."""
    yield path, parser
    for action in parser._actions:  # argparse has no public way to list sub-parsers
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from walk_commands(sub, f"{path} {name}".strip())


def add_examples(parser: argparse.ArgumentParser) -> None:
    """Give each command without an epilog its example from :data:`EXAMPLES`, laid out as written."""
    for path, command in walk_commands(parser):
        if command.epilog is None and path in EXAMPLES:
            command.epilog = _HEADING + EXAMPLES[path]
            if command.formatter_class is argparse.HelpFormatter:  # a parser's own formatter is left alone
                command.formatter_class = ExampleFormatter
