"""Say when an evaluator's judge is down or refuses it: one WARNING per outage, not one per evaluation.

During live tracing a judge that is unreachable, or that answers 401 because the key is missing or wrong, fails
every evaluation. Each one is recorded as an error (on its span, in the local store, in ``stats()``), but nothing
told the user why. An outage of one evaluator's judge (from its first failed call to the next call the judge
answers) logs one WARNING naming the evaluator, the judge's URL (without userinfo or query, which may hold a
key) and the cause; the answer that ends it logs one INFO line with what it cost. A judge that flaps logs at most
one outage per ``WARNING_INTERVAL_S``.

State is per process and keyed by (evaluator name, URL), not kept on the evaluator: an evaluator may be copied
(into an evaluation process, across event loops), and the copies in one process share one outage and one WARNING.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass

from evaltrace._internal.shown_urls import shown_url

logger = logging.getLogger("evaltrace")

WARNING_INTERVAL_S = 60.0
"""Shortest time between two outage WARNINGs of one evaluator's judge (outages in between are counted)."""


@dataclass
class _Outage:
    since: float
    failures: int = 0


_lock = threading.Lock()
_current: dict[tuple[str, str], _Outage] = {}
_last_warning: dict[tuple[str, str], float] = {}
_unannounced: dict[tuple[str, str], int] = {}  # outages not logged because of the interval, by key


def judge_failed(evaluator: str, url: str, cause: str) -> None:
    """Note that ``evaluator``'s judge at ``url`` failed for ``cause``; the first failure of an outage warns."""
    key = (evaluator, url)
    now = time.monotonic()
    with _lock:
        outage = _current.get(key)
        if outage is not None:
            outage.failures += 1
            return
        _current[key] = _Outage(now, 1)
        if now - _last_warning.get(key, -float("inf")) < WARNING_INTERVAL_S:
            _unannounced[key] = _unannounced.get(key, 0) + 1
            return
        _last_warning[key] = now
        skipped = _unannounced.pop(key, 0)
    earlier = f" ({skipped} shorter outage(s) since the last warning)" if skipped else ""
    logger.warning(
        "evaltrace: evaluator %s cannot use its judge at %s: %s. Its evaluations are recorded as errors until the "
        "judge answers%s; `evaltrace traces list --eval-errors` lists the traces affected",
        evaluator,
        shown_url(url),  # a base URL may carry a key (user:token@, ?api-key=): never on stderr
        cause,
        earlier,
    )


def judge_answered(evaluator: str, url: str) -> None:
    """Note that the judge answered: ends an outage (one INFO line). O(1) and lock-free when there is none."""
    if not _current:
        return
    with _lock:
        outage = _current.pop((evaluator, url), None)
    if outage is not None:
        logger.info(
            "evaltrace: evaluator %s: its judge at %s answers again; %d evaluation(s) failed over %.1f s",
            evaluator,
            shown_url(url),
            outage.failures,
            time.monotonic() - outage.since,
        )
