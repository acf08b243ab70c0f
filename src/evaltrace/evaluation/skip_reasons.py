"""The keys "not evaluated" results are counted under, shared by ``stats()`` and a backfill's report.

A result's skip reason is free text an evaluator wrote (it may name a user, an e-mail, a case): counted under its
own key it would bypass redaction and grow one key per trace. So only evaltrace's own codes and identifier-like
tokens are keys, at most :data:`MAX_SKIP_REASON_TOKENS` tokens per mapping; everything else is counted under
:data:`SKIP_REASON_OTHER`, and the counts of a mapping always sum to the skips counted. The free text itself stays
on the result's evaluation span (``evaltrace.eval.<name>.skip_reason``), redacted like the rest of the span.
"""

from __future__ import annotations

import re

from evaltrace._internal import semconv

SKIP_CODES = frozenset(
    [value for name, value in vars(semconv).items() if name.startswith("SKIP_")] + [semconv.EVAL_LABEL_SKIPPED]
)
"""The skip reasons evaltrace itself gives (``no_answer``, ``shutdown``...; ``skipped`` for none): always own keys."""

SKIP_REASON_OTHER = "other"
"""The key of every reason that is not a code or token, and of tokens past the cap."""

MAX_SKIP_REASON_TOKENS = 32
"""Distinct evaluator-given tokens counted under their own key, per mapping; later ones: ``other``."""

# An evaluator's reason is a key only when it reads as an identifier: free text (a message naming a user, an email,
# a case) never becomes a key, so stats() (served on /healthz) and a backfill's report cannot show what redaction
# masks on the spans.
_TOKEN = re.compile(r"[a-z][a-z0-9_.-]{0,63}")


def skip_reason_key(reason: str) -> str | None:
    """The key ``reason`` may be counted under: itself for a code or token, None when it is counted as ``other``."""
    if reason in SKIP_CODES:
        return reason
    return reason if len(reason) <= 64 and _TOKEN.fullmatch(reason) else None


def count_skip_reason(counts: dict[str, int], key: str | None, amount: int = 1) -> None:
    """Count ``amount`` skips under ``key`` (``""`` or None: ``other``); a new token past the cap goes to ``other``.

    ``key`` is what :func:`skip_reason_key` gave (or a key of another such mapping, when merging). Codes are a fixed
    set and always counted apart, so the keys are at most the codes, the cap's tokens and ``other``, and the counts
    always sum to the skips counted.
    """
    if key and key not in counts and key not in SKIP_CODES:
        tokens = sum(1 for k in counts if k not in SKIP_CODES and k != SKIP_REASON_OTHER)
        if tokens >= MAX_SKIP_REASON_TOKENS:
            key = SKIP_REASON_OTHER
    key = key or SKIP_REASON_OTHER
    counts[key] = counts.get(key, 0) + amount
