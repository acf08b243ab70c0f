"""Deterministic evaluation sampling: a trace is in or out by a hash of its trace id, never by a coin toss.

Every process that sees a trace (the in-process processor, each ``evaltrace worker`` replica behind the
collector) computes the same fraction in [0, 1) from (sample group, trace id), so the same traces are evaluated
everywhere, and every evaluator of a group evaluates the same traces: the spans of a sampled trace are all
judged, never a random subset of them. Within a group the samples nest: a trace in the 1% sample is in the 10%
sample. Different groups (the group name is the hash's salt) draw independent samples.
"""

from __future__ import annotations

import hashlib

__all__ = ["session_fraction", "trace_fraction"]

_SCALE = float(1 << 64)


def trace_fraction(trace_id: int, group: str = "") -> float:
    """Return the sampling fraction of ``trace_id`` in ``group``: uniform in [0, 1), the same in every process.

    A trace is sampled at rate ``r`` when ``trace_fraction(trace_id, group) < r``.

    Args:
        trace_id: The 128-bit OTel trace id.
        group: The sample group (the hash's salt): evaluators sharing it sample the same traces.
    """
    # blake2b, not hash(): Python's string hashing is salted per process, and W3C trace ids need not be random
    # in every bit (some generators fill only the low 56), so the id is mixed, never used as the fraction itself.
    digest = hashlib.blake2b(trace_id.to_bytes(16, "big"), digest_size=8, person=group.encode()[:16]).digest()
    return int.from_bytes(digest, "big") / _SCALE


def session_fraction(session_id: str, group: str = "") -> float:
    """Return the sampling fraction of a session: as :func:`trace_fraction`, drawn from the session id.

    Session-scope evaluators sample whole sessions: every turn of a session is in, or none is.
    """
    digest = hashlib.blake2b(session_id.encode(), digest_size=8, person=group.encode()[:16]).digest()
    return int.from_bytes(digest, "big") / _SCALE
