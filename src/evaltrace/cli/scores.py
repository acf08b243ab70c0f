"""``evaltrace scores replay <file> --sink ...``: deliver dead-lettered scores, each id exactly once.

The dead-letter file is first moved aside (``<file>.replaying``) so a process still appending to it is not
overwritten; scores are de-duplicated by id (the last line wins), sent in batches, and whatever a backend
still refuses is appended back to ``<file>``. A replay interrupted half-way leaves ``<file>.replaying``,
which the next replay picks up first. Because score ids are deterministic and backends upsert on them, a
score delivered twice across an interruption is still stored once.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from evaltrace.evaluation.sinks import JsonlScoreSink, LangfuseScoreSink, PhoenixScoreSink, ScoreSink
from evaltrace.evaluation.sinks.deadletter import read_dead_letters, write_dead_letters
from evaltrace.evaluation.sinks.jsonl import read_score_ids
from evaltrace.exceptions import ConfigError
from evaltrace.schema import Score

SINK_CHOICES = ("langfuse", "phoenix", "jsonl")


def register(subparsers: Any) -> None:
    """Add the ``scores`` noun and its ``replay`` verb."""
    scores = subparsers.add_parser("scores", help="manage evaluation scores")
    verbs = scores.add_subparsers(dest="verb", metavar="VERB", required=True)
    replay = verbs.add_parser("replay", help="deliver the scores of a dead-letter file")
    replay.add_argument("file", type=Path, help="dead-letter JSONL file (e.g. .evaltrace/dead-letter/langfuse.jsonl)")
    replay.add_argument("--sink", choices=SINK_CHOICES, required=True, help="where to deliver them")
    replay.add_argument("--host", help="Langfuse host (default: LANGFUSE_HOST)")
    replay.add_argument("--public-key", help="Langfuse public key (default: LANGFUSE_PUBLIC_KEY)")
    replay.add_argument("--secret-key", help="Langfuse secret key (default: LANGFUSE_SECRET_KEY)")
    replay.add_argument("--base-url", help="Phoenix URL (default: PHOENIX_BASE_URL or http://localhost:6006)")
    replay.add_argument("--api-key", help="Phoenix API key (default: PHOENIX_API_KEY)")
    replay.add_argument("--output", type=Path, help="JSONL file to append to (--sink jsonl)")
    replay.add_argument("--batch-size", type=int, default=50, help="scores per request")
    replay.set_defaults(func=replay_scores)


def build_sink(args: argparse.Namespace) -> ScoreSink:
    """Build the sink named by ``--sink`` from the arguments and environment."""
    if args.sink == "langfuse":
        return LangfuseScoreSink(args.host, args.public_key, args.secret_key)
    if args.sink == "phoenix":
        return PhoenixScoreSink(args.base_url, args.api_key)
    if args.output is None:
        raise ConfigError("--output", "required with --sink jsonl")
    return JsonlScoreSink(args.output)


def _load(path: Path) -> tuple[list[Score], int]:
    staged = path.with_name(path.name + ".replaying")
    if path.exists():
        if staged.exists():  # an earlier replay was interrupted: merge, then restage
            write_dead_letters(staged, "replay", read_dead_letters(path)[0], "merged before replay")
            path.unlink()
        else:
            path.replace(staged)
    if not staged.exists():
        return [], 0
    return read_dead_letters(staged)


def deliver(sink: ScoreSink, scores: Sequence[Score], batch_size: int) -> tuple[list[Score], str | None]:
    """Send ``scores`` in batches; return the undelivered ones and the last error."""
    undelivered: list[Score] = []
    error: str | None = None
    for start in range(0, len(scores), max(1, batch_size)):
        result = sink.export(scores[start : start + batch_size])
        undelivered.extend([*result.failed, *result.rejected])
        error = result.error or error
    return undelivered, error


def replay_scores(args: argparse.Namespace) -> int:
    """Replay a dead-letter file; exit 0 when every score was delivered, 1 otherwise."""
    try:
        sink = build_sink(args)
    except ConfigError as exc:
        print(f"error: {exc}")
        return 2
    path: Path = args.file
    scores, bad_lines = _load(path)
    skipped = 0
    if args.sink == "jsonl":
        present = read_score_ids(args.output)
        skipped = sum(score.id in present for score in scores)
        scores = [score for score in scores if score.id not in present]
    try:
        undelivered, error = deliver(sink, scores, args.batch_size)
    finally:
        sink.shutdown()
    if undelivered:
        write_dead_letters(path, sink.name, undelivered, error)
    path.with_name(path.name + ".replaying").unlink(missing_ok=True)
    delivered = len(scores) - len(undelivered)
    print(
        f"replayed {path}: {delivered} delivered to {args.sink}, {len(undelivered)} still failing"
        f"{f' (kept in {path}; last error: {error})' if undelivered else ''}"
        f", {skipped} already present, {bad_lines} unreadable line(s)"
    )
    return 0 if not undelivered else 1
