"""``evaltrace scores replay <file> --sink ...``: deliver dead-lettered scores, each id once, losing none.

The dead-letter file is first moved aside (``<file>.replaying``, under the writers' lock) so a process still
dead-lettering appends to a new ``<file>`` instead. Scores are de-duplicated by id (the last line wins) and
sent in batches; at the first batch the backend fails to take, or whose export raises, replay stops (it does
not retry: run it again later). A batch whose export raised is in doubt (the sink may have delivered part of
it): its scores are kept whole, and the batches after it are kept not attempted. Then, in this order: lines that
hold no valid score go to ``<file>.rejects.jsonl`` with the reason; ``<file>.replaying`` is atomically replaced
by the lines not delivered (the scores, re-encoded with the last error, or as read when the encoder refuses
them; the not-evaluated records as read, each record once: copies share its ``record_id``, counted in the
summary), so it no longer holds anything delivered; then, under the writers'
lock, those lines atomically become ``<file>`` (ahead of anything written to it meanwhile) and
``<file>.replaying`` is removed. So the file is never deleted or truncated while it holds anything undelivered,
nothing delivered is sent again by a later replay, and a replay interrupted at any point leaves
``<file>.replaying``, which the next replay merges first. Score ids are deterministic and backends upsert on
them, so a score sent twice (the batch in doubt, or a replay killed before ``<file>.replaying`` was rewritten)
is still stored once.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evaltrace.cli._untrusted import clean
from evaltrace.evaluation.sinks import JsonlScoreSink, LangfuseScoreSink, PhoenixScoreSink, ScoreSink
from evaltrace.evaluation.sinks.deadletter import (
    REJECTS_SUFFIX,
    encode_or_keep,
    parse_dead_letters,
    put_back_after_replay,
    read_not_evaluated,
    score_lines,
    stage_for_replay,
    write_rejects,
)
from evaltrace.evaluation.sinks.jsonl import read_score_ids
from evaltrace.evaluation.sinks.not_evaluated import NOT_EVALUATED_KEY
from evaltrace.exceptions import ConfigError
from evaltrace.schema import Score

SINK_CHOICES = ("langfuse", "phoenix", "jsonl")


def register(subparsers: Any) -> None:
    """Add the ``scores`` noun and its ``replay`` verb."""
    scores = subparsers.add_parser("scores", help="manage evaluation scores")
    verbs = scores.add_subparsers(dest="verb", metavar="VERB", required=True)
    replay = verbs.add_parser(
        "replay",
        help="deliver the scores of a dead-letter file",
        description="Deliver a dead-letter file's scores. Undelivered scores stay in FILE; lines holding no valid "
        f"score move to FILE{REJECTS_SUFFIX} with the reason. Exit status: 0 when everything was delivered, 1 "
        "when anything remains, 2 on a configuration error.",
    )
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


@dataclass
class Delivery:
    """What a replay did with the scores it read."""

    delivered: int = 0
    failed: list[Score] = field(default_factory=list)  # the backend may take them later
    refused: list[Score] = field(default_factory=list)  # the backend refused them (a 4xx)
    not_attempted: list[Score] = field(default_factory=list)  # after the backend started failing
    error: str | None = None
    retry_after_s: float | None = None
    raised: int = 0  # of ``failed``: the scores of the batch whose export raised (in doubt)

    @property
    def undelivered(self) -> list[Score]:
        """Every score that goes back to the dead-letter file."""
        return [*self.failed, *self.refused, *self.not_attempted]


def deliver(sink: ScoreSink, scores: Sequence[Score], batch_size: int) -> Delivery:
    """Send ``scores`` in batches; stop at the first batch with a retryable failure (the backend is struggling)."""
    outcome = Delivery()
    size = max(1, batch_size)
    for start in range(0, len(scores), size):
        batch = scores[start : start + size]
        try:
            result = sink.export(batch)
        except Exception as exc:  # in doubt: the sink may have delivered part of it; kept whole, stop here
            outcome.failed.extend(batch)
            outcome.raised = len(batch)
            outcome.error = f"the sink raised {type(exc).__name__}: {exc}"
            outcome.not_attempted.extend(scores[start + size :])
            break
        outcome.delivered += len(batch) - len(result.failed) - len(result.rejected)
        outcome.failed.extend(result.failed)
        outcome.refused.extend(result.rejected)
        outcome.error = result.error or outcome.error
        if result.failed:
            outcome.retry_after_s = result.retry_after_s
            outcome.not_attempted.extend(scores[start + size :])
            break
    return outcome


def replay_scores(args: argparse.Namespace) -> int:
    """Replay a dead-letter file; exit 0 when every score was delivered, 1 when anything remains, 2 on config."""
    try:
        sink = build_sink(args)
    except ConfigError as exc:
        print(clean(f"error: {exc}"))
        return 2
    path: Path = args.file
    staged = stage_for_replay(path)
    if not staged.exists():
        sink.shutdown()
        print(clean(f"nothing to replay: {path} does not exist"))
        return 0
    scores, rejected = parse_dead_letters(staged)
    skipped = 0
    if args.sink == "jsonl":
        present = read_score_ids(args.output)
        skipped = sum(score.id in present for score in scores)
        scores = [score for score in scores if score.id not in present]
    try:
        outcome = deliver(sink, scores, args.batch_size)
    finally:
        sink.shutdown()
    # Keep before removing: rejects first, then what was not delivered; the staged copy goes last.
    rejects_path = path.with_name(path.name + REJECTS_SUFFIX)
    write_rejects(rejects_path, path, rejected)
    records, copies = read_not_evaluated(staged)  # records of evaluations never run: kept once, never sent
    kept = encode_or_keep(sink.name, outcome.undelivered, outcome.error, score_lines(staged))
    try:
        put_back_after_replay(path, staged, [*kept, *records])
    except OSError as exc:
        print(clean(f"error: {outcome.delivered} delivered, but the rest could not be put back in {path} ({exc}):"))
        print(clean(f"everything not delivered is kept in {staged}; run the replay again"))
        return 1
    summary = _report(path, args.sink, outcome, skipped, len(rejected), rejects_path)
    if records:  # counted, so the file left behind is explained (they are no verdict: never sent as a score)
        summary += (
            f", {len(records)} not-evaluated record(s) kept in {path} (no verdict, never sent: {_reasons(records)})"
        )
    if copies:  # dropped: say so, so a file that shrank is explained (a record's copies share its record_id)
        summary += f", {copies} duplicate not-evaluated record(s) collapsed (copies of a record kept once)"
    print(clean(summary))  # errors echo backends
    return 1 if outcome.undelivered or rejected else 0


def _reasons(records: list[str]) -> str:
    """``reason count`` of not-evaluated records (each line already read as one), most frequent first.

    Each reason on one line, inert: the file may have been edited by hand, and a line break in a reason would print
    a second, made-up summary line.
    """
    reasons = Counter(str(json.loads(line)[NOT_EVALUATED_KEY].get("reason") or "unknown") for line in records)
    return ", ".join(f"{clean(reason, single_line=True)} {count}" for reason, count in reasons.most_common())


def _report(path: Path, sink: str, outcome: Delivery, skipped: int, rejected: int, rejects_path: Path) -> str:
    parts = [f"replayed {path} to {sink}: {outcome.delivered} delivered"]
    if skipped:
        parts.append(f"{skipped} already present")
    if outcome.undelivered:
        kept = f"{len(outcome.undelivered)} kept in {path} ({len(outcome.failed)} failed"
        if outcome.raised:
            kept += f", of which {outcome.raised} in a batch whose export raised (the backend may hold some)"
        if outcome.refused:
            kept += f", {len(outcome.refused)} refused by the backend"
        if outcome.not_attempted:
            kept += f", {len(outcome.not_attempted)} not attempted after the failure"
        kept += f"; last error: {outcome.error}"
        if outcome.retry_after_s is not None:
            kept += f"; the backend asked to retry after {outcome.retry_after_s:.0f} s"
        parts.append(kept + ")")
    if rejected:
        parts.append(f"{rejected} unreadable or invalid line(s) kept in {rejects_path} with the reason")
    return ", ".join(parts)
