"""Session judges: LLM-as-judge evaluators of a whole conversation (session scope).

Each receives a :class:`~evaltrace.schema.Conversation` (every trace of one ``session.id``, as turns in order) and
shows the judge the turns as numbered ``User:`` / ``Assistant:`` blocks (:mod:`evaltrace.evaluators._transcript`):

* :class:`ConversationCompleteness`: the user's requests over the conversation, and whether each was fulfilled;
* :class:`KnowledgeRetention`: whether each reply keeps what the user said in earlier turns;
* :class:`RoleAdherence`: whether each reply stays in the assistant's role;
* :class:`ConversationRelevancy`: whether each reply is relevant to the last ``window`` turns (one judge call per
  reply, over a sliding window).

As for every judge evaluator, a judge that fails or keeps replying unparseable text makes the result ``failed``
(an error of the evaluation), never a failing verdict; a conversation without the needed turns is ``skipped``.
"""

from __future__ import annotations

import abc
import asyncio
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

from evaltrace.evaluators._base import (
    CODE_VERSION,
    Direction,
    MissingInputError,
    Subject,
    Verdict,
    build_result,
    conversation_only,
    passes,
    skipped_result,
)
from evaltrace.evaluators._judged import ask_judge, flag, json_object, object_list, with_judge_trace
from evaltrace.evaluators._prompts import Prompt, load_prompt
from evaltrace.evaluators._transcript import (
    answered_turns,
    render_turns,
    require_turns,
    system_instructions,
    turn_number,
)
from evaltrace.evaluators.judge import Judge, JudgeReply, default_judge
from evaltrace.schema import Conversation, EvalCase, EvaluationResult, Turn

Parser = Callable[[str], Any]


def _check_threshold(threshold: float) -> float:
    if isinstance(threshold, bool) or not isinstance(threshold, int | float) or not 0.0 <= threshold <= 1.0:
        raise ValueError(f"threshold must be a number in [0, 1], got {threshold!r}")
    return float(threshold)


def _turn_list(turns: Sequence[Turn]) -> str:
    return ", ".join(str(turn_number(turn)) for turn in turns)


def turn_verdicts(text: str, key: str, wanted: Sequence[int]) -> dict[int, tuple[bool, str]]:
    """Parse ``{"verdicts": [{"turn": n, <key>: bool, "reason": ...}]}``, requiring a verdict for every wanted turn.

    A missing verdict raises ValueError, so the judge is asked again (then the result fails): a turn the judge
    skipped is unknown, and counting it either way would invent a verdict. Verdicts on other turns are ignored.
    """
    found: dict[int, tuple[bool, str]] = {}
    for item in object_list(json_object(text), "verdicts"):
        number = item.get("turn")
        # A whole number only: int() would read true as turn 1 and 2.7 as turn 2, inventing a verdict's turn.
        if isinstance(number, bool) or not isinstance(number, int):
            raise ValueError(f"each verdict needs a whole turn number, got {item!r}")
        if number in wanted:
            found[number] = (flag(item, key), str(item.get("reason", "")))
    missing = [n for n in wanted if n not in found]
    if missing:
        raise ValueError(f"no verdict for turn(s) {', '.join(map(str, missing))}")
    return found


def share_verdict(
    evaluator: Any, verdicts: Mapping[int, tuple[bool, str]], noun: str, detail: dict[str, Any]
) -> Verdict:
    """Score per-turn verdicts as the share of good turns, naming the bad ones in the reason."""
    bad = [n for n, (ok, _) in sorted(verdicts.items()) if not ok]
    score = 1.0 - len(bad) / len(verdicts)
    detail["verdicts"] = [{"turn": n, "ok": ok, "reason": why} for n, (ok, why) in sorted(verdicts.items())]
    detail["failed_turns"] = bad
    reason = f"{len(verdicts) - len(bad)}/{len(verdicts)} replies {noun}"
    if bad:
        reason += "; failed turn(s): " + ", ".join(f"{n} ({verdicts[n][1]})" if verdicts[n][1] else str(n) for n in bad)
    return Verdict(passes(score, evaluator.threshold, evaluator.direction), score, reason, detail)


def _total_cost(replies: Sequence[JudgeReply[Any]]) -> float | None:
    known = [r.call.cost_usd for r in replies if r.call.cost_usd is not None]
    return float(sum(known)) if known else None


class ConversationJudge(abc.ABC):
    """Base of the session judges: subclasses set ``name``/``prompt_name`` and implement the three hooks.

    :meth:`requests` returns the prompt variables of each judge call (raising MissingInputError when the
    conversation lacks what is judged), :meth:`parser` checks a reply, :meth:`verdict` combines the parsed replies.
    """

    name = "conversation_judge"
    prompt_name = "conversation_completeness"
    threshold = 0.75
    direction: Direction = "higher"
    evaluator_type = "llm_judge"
    subjects: ClassVar[frozenset[str]] = frozenset({"conversation"})

    def __init__(self, judge: Judge | None = None, *, threshold: float | None = None) -> None:
        """Configure the judge.

        Args:
            judge: The judge; default :func:`~evaltrace.evaluators.judge.default_judge` (from the environment).
            threshold: Override of the default threshold (0.75), in [0, 1].

        Raises:
            ValueError: A threshold outside [0, 1].
        """
        if threshold is not None:
            self.threshold = _check_threshold(threshold)
        self.judge = judge or default_judge()

    @property
    def prompt(self) -> Prompt:
        """The prompt template used."""
        return load_prompt(self.prompt_name)

    @property
    def version(self) -> str:
        """Code version with the prompt as semver build metadata, e.g. ``v1.0.0+role-adherence.v1``."""
        return f"{CODE_VERSION}+{self.prompt.name.replace('_', '-')}.v{self.prompt.version}"

    @abc.abstractmethod
    def requests(self, conversation: Conversation, case: EvalCase | None) -> list[dict[str, str]]:
        """Return the variables of each judge call; raise MissingInputError when an input is absent."""

    @abc.abstractmethod
    def parser(self, conversation: Conversation) -> Parser:
        """Return the reply parser for this conversation (it raises ValueError/KeyError/TypeError to retry)."""

    @abc.abstractmethod
    def verdict(self, parsed: list[Any], conversation: Conversation, case: EvalCase | None) -> Verdict:
        """Combine the parsed replies, in request order, into a verdict."""

    async def evaluate(self, conversation: Subject, case: EvalCase | None = None) -> EvaluationResult:
        """Judge a session's conversation (against ``case`` when given).

        Args:
            conversation: The session's turns.
            case: The dataset case (a simulated-user run), or None live.

        Returns:
            The result; ``detail["judge"]`` records the (first) judge call, ``detail["judge_calls"]`` all of them,
            and ``cost_usd`` their total.

        Raises:
            WrongSubjectError: Given a single Trace (configure the evaluator at session scope).
        """
        if not isinstance(conversation, Conversation):
            raise conversation_only(self.name)
        try:
            requests = self.requests(conversation, case)
        except MissingInputError as exc:
            return skipped_result(self, conversation, exc, evaluator_type=self.evaluator_type)
        parse = self.parser(conversation)
        answers = await asyncio.gather(
            *(ask_judge(self, conversation, self.prompt, variables, parse) for variables in requests)
        )
        replies = [a for a in answers if not isinstance(a, EvaluationResult)]
        failure = next((a for a in answers if isinstance(a, EvaluationResult)), None)
        if failure is not None:  # one judge call failed: the judgement is incomplete, so the evaluation failed
            spent = [failure.cost_usd] + [r.call.cost_usd for r in replies]
            known = [c for c in spent if c is not None]
            return failure.model_copy(update={"cost_usd": float(sum(known)) if known else None})
        verdict = self.verdict([r.value for r in replies], conversation, case)
        calls = [r.call.as_detail() for r in replies]
        verdict.detail["judge"] = calls[0]
        verdict.detail["judge_calls"] = calls
        result = build_result(
            self, conversation, verdict, evaluator_type=self.evaluator_type, cost_usd=_total_cost(replies)
        )
        return with_judge_trace(result, replies[0].call)  # every call's trace id is in detail["judge_calls"]

    def __repr__(self) -> str:
        return f"{type(self).__name__}(judge={self.judge!r}, threshold={self.threshold!r})"


class ConversationCompleteness(ConversationJudge):
    """Did the assistant fulfil every request the user made over the conversation?

    The judge lists the user's distinct requests and whether each was fulfilled by the end. Score = fulfilled /
    requests (1.0 when the user asked for nothing); threshold 0.75, higher is better. Skipped without turns.

    Example:
        ``EvaluatorSpec(ConversationCompleteness(judge), scope="session")``.
    """

    name = "conversation_completeness"
    prompt_name = "conversation_completeness"

    def requests(self, conversation: Conversation, case: EvalCase | None) -> list[dict[str, str]]:
        """One call over the whole transcript."""
        return [{"transcript": render_turns(require_turns(conversation))}]

    def parser(self, conversation: Conversation) -> Parser:
        """Require a list of requests, each with a ``fulfilled`` flag."""

        def parse(text: str) -> list[dict[str, Any]]:
            items = object_list(json_object(text), "requests")
            return [
                {
                    "request": str(i.get("request", "")),
                    "turn": i.get("turn"),
                    "fulfilled": flag(i, "fulfilled"),
                    "reason": str(i.get("reason", "")),
                }
                for i in items
            ]

        return parse

    def verdict(self, parsed: list[Any], conversation: Conversation, case: EvalCase | None) -> Verdict:
        """Score the share of fulfilled requests."""
        items: list[dict[str, Any]] = parsed[0]
        detail: dict[str, Any] = {"requests": items, "turns": len(conversation.turns)}
        if not items:
            return Verdict(True, 1.0, "the user made no request to fulfil", detail)
        missed = [i for i in items if not i["fulfilled"]]
        score = 1.0 - len(missed) / len(items)
        detail["unfulfilled"] = [i["request"] for i in missed]
        reason = f"{len(items) - len(missed)}/{len(items)} user requests fulfilled"
        if missed:
            reason += "; not fulfilled: " + "; ".join(i["request"] for i in missed)
        return Verdict(passes(score, self.threshold, self.direction), score, reason, detail)


class KnowledgeRetention(ConversationJudge):
    """Does the assistant keep what the user told it earlier (no re-asking, no contradiction, no forgetting)?

    Every answered turn from the second on gets a verdict; score = share of replies that retain the earlier
    information; threshold 0.75, higher is better. Skipped when no turn after the first has an answer.
    """

    name = "knowledge_retention"
    prompt_name = "knowledge_retention"

    def _judged(self, conversation: Conversation) -> list[Turn]:
        return answered_turns(conversation, first=1)

    def requests(self, conversation: Conversation, case: EvalCase | None) -> list[dict[str, str]]:
        """One call over the whole transcript, naming the turns to judge."""
        judged = self._judged(conversation)
        return [{"transcript": render_turns(conversation.turns), "turns": _turn_list(judged)}]

    def parser(self, conversation: Conversation) -> Parser:
        """Require a ``retained`` verdict for every judged turn."""
        wanted = [turn_number(t) for t in self._judged(conversation)]
        return lambda text: turn_verdicts(text, "retained", wanted)

    def verdict(self, parsed: list[Any], conversation: Conversation, case: EvalCase | None) -> Verdict:
        """Score the share of replies that retain earlier information."""
        return share_verdict(self, parsed[0], "retain what the user said earlier", {"turns": len(conversation.turns)})


class RoleAdherence(ConversationJudge):
    """Does the assistant stay in its role (persona, scope, tone) in every reply?

    The role is ``role`` when given, else ``case.metadata["role"]``, else the system instructions of the
    conversation's first turn that has some. Score = share of replies in role; threshold 0.75, higher is better.
    Skipped without a role or without answered turns.

    Example:
        ``RoleAdherence(judge, role="A polite support agent of ACME Bank who only discusses ACME accounts")``.
    """

    name = "role_adherence"
    prompt_name = "role_adherence"

    def __init__(self, judge: Judge | None = None, *, role: str | None = None, threshold: float | None = None) -> None:
        """Configure the judge and the role.

        Args:
            judge: The judge; default from the environment.
            role: The role the assistant must keep; None reads the case, then the system instructions.
            threshold: Override of the default threshold (0.75), in [0, 1].

        Raises:
            ValueError: An empty or non-text role, or a threshold outside [0, 1].
        """
        if role is not None and (not isinstance(role, str) or not role.strip()):
            raise ValueError(f"role must be a non-empty text, got {role!r}")
        super().__init__(judge, threshold=threshold)
        self.role = role

    def _role(self, conversation: Conversation, case: EvalCase | None) -> tuple[str, str]:
        if self.role is not None:
            return self.role, "option"
        if case is not None and isinstance(case.metadata.get("role"), str) and case.metadata["role"].strip():
            return case.metadata["role"], "case"
        instructions = system_instructions(conversation)
        if instructions:
            return instructions, "system_instructions"
        raise MissingInputError("no role: give role=, case.metadata['role'] or system instructions")

    def requests(self, conversation: Conversation, case: EvalCase | None) -> list[dict[str, str]]:
        """One call over the whole transcript with the role, naming the turns to judge."""
        judged = answered_turns(conversation)
        role, _ = self._role(conversation, case)
        return [{"role": role, "transcript": render_turns(conversation.turns), "turns": _turn_list(judged)}]

    def parser(self, conversation: Conversation) -> Parser:
        """Require an ``in_role`` verdict for every answered turn."""
        wanted = [turn_number(t) for t in conversation.turns if t.final_answer is not None]
        return lambda text: turn_verdicts(text, "in_role", wanted)

    def verdict(self, parsed: list[Any], conversation: Conversation, case: EvalCase | None) -> Verdict:
        """Score the share of replies in role."""
        _, source = self._role(conversation, case)
        return share_verdict(self, parsed[0], "in role", {"role_source": source, "turns": len(conversation.turns)})


class ConversationRelevancy(ConversationJudge):
    """Is each reply relevant to the conversation so far, over a sliding window of the last ``window`` turns?

    One judge call per answered turn: it sees up to ``window - 1`` earlier turns, the turn's user message and the
    reply. Score = relevant replies / answered turns; threshold 0.75, higher is better. Skipped without answered
    turns. Judge calls run concurrently, within the judge's ``max_concurrency``.
    """

    name = "conversation_relevancy"
    prompt_name = "conversation_relevancy"

    def __init__(self, judge: Judge | None = None, *, window: int = 3, threshold: float | None = None) -> None:
        """Configure the judge and the window.

        Args:
            judge: The judge; default from the environment.
            window: Turns the judge sees for each reply, the judged turn included (at least 1).
            threshold: Override of the default threshold (0.75), in [0, 1].

        Raises:
            ValueError: A window that is not a whole number >= 1, or a threshold outside [0, 1].
        """
        if isinstance(window, bool) or not isinstance(window, int) or window < 1:
            raise ValueError(f"window must be a whole number of turns >= 1, got {window!r}")
        super().__init__(judge, threshold=threshold)
        self.window = window

    def requests(self, conversation: Conversation, case: EvalCase | None) -> list[dict[str, str]]:
        """One call per answered turn, with the turns of its window before it."""
        turns = conversation.turns
        calls = []
        for turn in answered_turns(conversation):
            earlier = turns[max(0, turn.index - self.window + 1) : turn.index]
            calls.append(
                {
                    "transcript": render_turns(earlier) if earlier else "(no earlier turns)",
                    "turn": str(turn_number(turn)),
                    "user_message": turn.user_input or "(no user message recorded)",
                    "answer": turn.final_answer or "",
                }
            )
        return calls

    def parser(self, conversation: Conversation) -> Parser:
        """Require a ``relevant`` flag."""

        def parse(text: str) -> tuple[bool, str]:
            data = json_object(text)
            return flag(data, "relevant"), str(data.get("reason", ""))

        return parse

    def verdict(self, parsed: list[Any], conversation: Conversation, case: EvalCase | None) -> Verdict:
        """Score the share of relevant replies."""
        numbers = [turn_number(t) for t in answered_turns(conversation)]
        verdicts = dict(zip(numbers, parsed, strict=True))
        return share_verdict(self, verdicts, "relevant", {"window": self.window, "turns": len(conversation.turns)})


__all__ = [
    "ConversationCompleteness",
    "ConversationJudge",
    "ConversationRelevancy",
    "KnowledgeRetention",
    "RoleAdherence",
]
