"""Deterministic session evaluators: turn count, a user asking the same question again, and session budgets.

Each judges a session's :class:`~evaltrace.schema.Conversation` (session scope); the tool evaluators
(``tool_error_rate``, ``tool_loop``, ``tool_sequence``...) judge one too, over the tool calls of all turns.
"""

from __future__ import annotations

import difflib
import math
from typing import Any

from evaltrace.evaluators._base import PASS_RATE, ConversationEvaluator, MissingInputError, Verdict, checked_threshold
from evaltrace.evaluators._text import normalise, words
from evaltrace.evaluators._transcript import require_turns, turn_number
from evaltrace.evaluators.budgets import _utilisation
from evaltrace.schema import Conversation, EvalCase

MAX_QUESTION_CHARS = 2_000
"""Questions are compared on their first 2,000 normalised characters (similarity is quadratic in length)."""
MAX_TURNS_SCANNED = 500
"""Pairwise comparison is quadratic in turns; longer conversations are scanned on their last 500 turns."""
ACKNOWLEDGEMENT_WORDS = frozenset(
    "yes yeah yep no nope ok okay sure please do go ahead thanks thank you so much very that's that sounds "
    "good great perfect fine cool alright all right got it works i".split()
)
"""Words of acknowledgements and thanks ("Yes, please do.", "OK thank you so much"): a message made only of
them is not a question, and saying it twice is no sign of an unanswered one."""


def _limit(name: str, value: float | None, *, whole: bool = False) -> float | None:
    """Check an optional limit: a finite number >= 0 (a whole one when ``whole``), never a bool."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        raise ValueError(f"{name} must be a number >= 0, got {value!r}")
    if whole and value != int(value):
        raise ValueError(f"{name} must be a whole number, got {value!r}")
    return float(value)


class TurnCount(ConversationEvaluator):
    """The conversation has between ``min_turns`` and ``max_turns`` turns (each bound optional).

    Too few turns can mean users give up; too many, that the assistant needs many rounds to help. Score 1.0
    within the bounds, 0.0 outside (the count is in ``detail.turns``). Skipped for a conversation without turns.
    ``threshold`` is the share of sessions that must be within the bounds over a run (default 1.0).

    Example:
        ``TurnCount(max_turns=8)``.
    """

    name = "turn_count"
    threshold_of = PASS_RATE

    def __init__(self, *, min_turns: int | None = None, max_turns: int | None = None, threshold: float = 1.0) -> None:
        """Configure the bounds.

        Args:
            min_turns: Fewest acceptable turns.
            max_turns: Most acceptable turns.
            threshold: Share of sessions that must be within the bounds (the run's pass rate), in [0, 1].

        Raises:
            ValueError: No bound, a bound that is not a whole number >= 0, ``min_turns > max_turns``, or a
                threshold outside [0, 1].
        """
        self.threshold = checked_threshold(threshold)
        low = _limit("min_turns", min_turns, whole=True)
        high = _limit("max_turns", max_turns, whole=True)
        if low is None and high is None:
            raise ValueError("TurnCount needs min_turns and/or max_turns")
        if low is not None and high is not None and low > high:
            raise ValueError(f"min_turns ({min_turns}) is above max_turns ({max_turns})")
        self.min_turns = None if low is None else int(low)
        self.max_turns = None if high is None else int(high)

    def check_conversation(self, conversation: Conversation, case: EvalCase | None) -> Verdict:
        """Count the turns and compare them with the bounds."""
        count = len(require_turns(conversation))
        detail = {"turns": count, "min_turns": self.min_turns, "max_turns": self.max_turns}
        if self.min_turns is not None and count < self.min_turns:
            return Verdict(False, 0.0, f"{count} turns, fewer than min_turns {self.min_turns}", detail)
        if self.max_turns is not None and count > self.max_turns:
            return Verdict(False, 0.0, f"{count} turns, more than max_turns {self.max_turns}", detail)
        return Verdict(True, 1.0, f"{count} turns, within bounds", detail)


def _similar(a: str, b: str, minimum: float) -> float | None:
    """Return the similarity of ``a`` and ``b`` when it reaches ``minimum``, else None (cheap bounds first)."""
    if a == b:
        return 1.0
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    if matcher.real_quick_ratio() < minimum or matcher.quick_ratio() < minimum:
        return None
    ratio = matcher.ratio()
    return ratio if ratio >= minimum else None


class RepeatedUserQuestion(ConversationEvaluator):
    """The user asks the same (or nearly the same) question again: a sign the assistant did not answer it.

    User messages are compared after normalisation (Unicode NFKC, case folding, punctuation and extra spaces
    removed) with difflib's similarity ratio; a message at least ``similarity`` close to an earlier one is a
    repeat. Only questions and requests are compared: messages shorter than ``min_words`` words ("Yes, please
    do.") and messages made only of acknowledgement words (``ACKNOWLEDGEMENT_WORDS``: "OK, thank you so much")
    are not. Score = 1 − repeats / compared messages; passes with at most ``max_repeats`` repeats. Skipped when
    no turn has a user message. ``threshold`` is the share of sessions that must pass over a run (default 1.0).

    Example:
        ``RepeatedUserQuestion(similarity=0.85)``.
    """

    name = "repeated_user_question"
    threshold_of = PASS_RATE

    def __init__(
        self, *, similarity: float = 0.9, min_words: int = 4, max_repeats: int = 0, threshold: float = 1.0
    ) -> None:
        """Configure the comparison.

        Args:
            similarity: Ratio in (0, 1] from which two messages count as the same question.
            min_words: Shortest message compared, in words (4: "Yes, please do." is no question).
            max_repeats: Most repeats that still pass.
            threshold: Share of sessions that must pass (the run's pass rate), in [0, 1].

        Raises:
            ValueError: A similarity or threshold outside (0, 1] / [0, 1], or a negative or fractional count.
        """
        self.threshold = checked_threshold(threshold)
        if isinstance(similarity, bool) or not isinstance(similarity, int | float) or not 0.0 < similarity <= 1.0:
            raise ValueError(f"similarity must be a number in (0, 1], got {similarity!r}")
        self.similarity = float(similarity)
        self.min_words = int(_limit("min_words", min_words, whole=True) or 0)
        self.max_repeats = int(_limit("max_repeats", max_repeats, whole=True) or 0)

    def check_conversation(self, conversation: Conversation, case: EvalCase | None) -> Verdict:
        """Compare each user message with the earlier ones."""
        turns = require_turns(conversation)[-MAX_TURNS_SCANNED:]
        asked = [(turn_number(t), t.user_input) for t in turns if t.user_input is not None]
        if not asked:
            raise MissingInputError("no turn has a user message")
        compared: list[tuple[int, str, str]] = []  # (turn, normalised, original)
        repeats: list[dict[str, Any]] = []
        for number, text in asked:
            said = words(text)
            if len(said) < self.min_words or all(w.casefold() in ACKNOWLEDGEMENT_WORDS for w in said):
                continue  # an acknowledgement or thanks, not a question: saying it again is no repeat
            key = normalise(text, punctuation=False)[:MAX_QUESTION_CHARS]
            for earlier, earlier_key, earlier_text in compared:
                ratio = _similar(key, earlier_key, self.similarity)
                if ratio is not None:
                    repeats.append(
                        {
                            "turn": number,
                            "repeats_turn": earlier,
                            "similarity": round(ratio, 3),
                            "question": text,
                            "earlier_question": earlier_text,
                        }
                    )
                    break
            compared.append((number, key, text))
        detail: dict[str, Any] = {
            "user_messages": len(asked),
            "compared": len(compared),
            "repeats": repeats,
            "similarity": self.similarity,
            "max_repeats": self.max_repeats,
        }
        if not compared:
            return Verdict(True, 1.0, f"no user message of {self.min_words}+ words to compare", detail)
        score = 1.0 - len(repeats) / len(compared)
        if not repeats:
            return Verdict(True, score, f"no repeated user question in {len(compared)} messages", detail)
        found = "; ".join(f"turn {r['turn']} repeats turn {r['repeats_turn']}" for r in repeats)
        return Verdict(len(repeats) <= self.max_repeats, score, f"repeated user question: {found}", detail)


class SessionBudget(ConversationEvaluator):
    """The session's cost, total latency and tokens under ceilings (each optional, at least one).

    Figures are summed over the turns: cost (``cost_usd``), latency (the turns' ``latency_ms``: time the system
    spent, not the user's pauses) and tokens (input + output). A figure is known only when every turn reports it;
    a sum over the turns that do is a lower bound, so it can fail the budget but never pass it. Passes when every
    limited figure is known and within its ceiling; fails when any (known or lower bound) is over; otherwise
    skipped (not evaluated), with the turns that lack the figure in ``detail.unknown_turns``. Score = highest
    figure / ceiling (lower is better); ``threshold`` is the highest passing share of a ceiling (1.0 by default).

    Example:
        ``SessionBudget(max_cost_usd=0.50, max_tokens=200_000)``.
    """

    name = "session_budget"
    threshold = 1.0
    direction = "lower"

    def __init__(
        self,
        *,
        max_cost_usd: float | None = None,
        max_latency_ms: float | None = None,
        max_tokens: int | None = None,
        threshold: float = 1.0,
    ) -> None:
        """Configure the ceilings.

        Args:
            max_cost_usd: Highest acceptable session cost in USD.
            max_latency_ms: Highest acceptable sum of the turns' latencies in milliseconds.
            max_tokens: Highest acceptable input + output tokens over the session.
            threshold: Highest passing share of a ceiling, in [0, 1].

        Raises:
            ValueError: No ceiling, one that is not a number >= 0 (tokens: a whole number), or a threshold
                outside [0, 1].
        """
        self.threshold = checked_threshold(threshold)
        self.limits: dict[str, float | None] = {
            "cost_usd": _limit("max_cost_usd", max_cost_usd),
            "latency_ms": _limit("max_latency_ms", max_latency_ms),
            "tokens": _limit("max_tokens", max_tokens, whole=True),
        }
        if all(v is None for v in self.limits.values()):
            raise ValueError("SessionBudget needs max_cost_usd, max_latency_ms and/or max_tokens")

    def check_conversation(self, conversation: Conversation, case: EvalCase | None) -> Verdict:
        """Sum the figures over the turns and compare them with the ceilings."""
        turns = require_turns(conversation)
        per_turn: dict[str, list[float | None]] = {
            "cost_usd": [t.cost_usd for t in turns],
            "latency_ms": [float(t.latency_ms) for t in turns],
            "tokens": [
                None if t.token_input is None or t.token_output is None else float(t.token_input + t.token_output)
                for t in turns
            ],
        }
        limited = [k for k, v in self.limits.items() if v is not None]
        unknown = {k: [turn_number(t) for t, v in zip(turns, per_turn[k], strict=True) if v is None] for k in limited}
        unknown = {k: numbers for k, numbers in unknown.items() if numbers}
        sums = {k: float(sum(v for v in per_turn[k] if v is not None)) for k in limited}
        # A figure no turn reports has no lower bound worth comparing; a partial sum is compared as a lower bound.
        measured: dict[str, float | None] = {
            k: None if len(unknown.get(k, ())) == len(turns) else sums[k] for k in limited
        }
        if all(v is None for v in measured.values()):
            raise MissingInputError(f"no turn reports {', '.join(limited)}")
        verdict = _utilisation(measured, self.limits, self.threshold)
        verdict.detail["turns"] = len(turns)
        verdict.detail["unknown_turns"] = unknown
        if verdict.passed and unknown:
            raise MissingInputError(
                "unknown "
                + "; ".join(f"{k} for turn(s) {', '.join(map(str, n))}" for k, n in unknown.items())
                + ": the session total cannot be checked"
            )
        if unknown and not verdict.passed:
            lower = sorted(k for k in verdict.detail["over_limit"] if k in unknown)
            if lower:
                return Verdict(
                    False, verdict.score, verdict.reason + f" (lower bound: {', '.join(lower)})", verdict.detail
                )
        return verdict
