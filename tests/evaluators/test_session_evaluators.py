"""Session evaluators over Conversations whose turns are real decorated agent calls under the real OTel SDK.

Deterministic ones (turn count, repeated user question, session budget) and the tool evaluators over all turns
read the mapped traces; the four judges talk to the scripted OpenAI-compatible server on 127.0.0.1.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from evaltrace._internal import settings
from evaltrace.evaluation.spend import judge_usage
from evaltrace.evaluators import (
    CATALOGUE,
    ConversationCompleteness,
    ConversationRelevancy,
    ExactMatch,
    Faithfulness,
    Judge,
    KnowledgeRetention,
    LoopingDetection,
    RepeatedUserQuestion,
    RoleAdherence,
    SemanticSimilarity,
    SessionBudget,
    StepAlignment,
    ToolCalled,
    ToolEfficiency,
    ToolErrorRate,
    ToolLoop,
    ToolSequence,
    TurnCount,
    WrongSubjectError,
    create_evaluator,
)
from evaltrace.runner.evaluator_entries import build_evaluators
from evaltrace.schema import Conversation

from .factories import build_trace
from .fake_openai import FakeOpenAI
from .sessions import SYSTEM, Step, run_session

ORDER = Step("Where is my order A-17?", "Order A-17 shipped yesterday and arrives Friday.", ["lookup_order"])
REFUND = Step("My name is Ada. Please refund order A-17.", "I could not issue the refund right now.", ["issue_refund"])
AGAIN = Step("where is my order A-17??", "Order A-17 shipped yesterday.", ["lookup_order"])
THANKS = Step("thanks", "You're welcome, Ada!")


@pytest.fixture(autouse=True)
def capture(provider: TracerProvider) -> Iterator[None]:
    previous = settings.replace(settings.CaptureSettings(capture_content=True))
    yield
    settings.replace(previous)


@pytest.fixture
def support(exporter: InMemorySpanExporter) -> Conversation:
    """Four turns: order status, a failed refund, the first question again, thanks."""
    return run_session(exporter, [ORDER, REFUND, AGAIN, THANKS])


EMPTY = Conversation(session_id="empty")


# --- deterministic session evaluators -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("bounds", "passed", "reason"),
    [
        ({"max_turns": 4}, True, "4 turns, within bounds"),
        ({"max_turns": 3}, False, "4 turns, more than max_turns 3"),
        ({"min_turns": 5, "max_turns": 9}, False, "4 turns, fewer than min_turns 5"),
    ],
)
def test_turn_count(support: Conversation, bounds: dict[str, int], passed: bool, reason: str) -> None:
    result = TurnCount(**bounds).evaluate(support)
    assert (result.status, result.passed, result.reason, result.detail["turns"]) == ("completed", passed, reason, 4)
    assert result.run_id == "live" and result.case_id == support.turns[0].trace.case_id


def test_repeated_user_question_finds_the_question_asked_again(support: Conversation) -> None:
    result = RepeatedUserQuestion().evaluate(support)
    assert not result.passed and result.reason == "repeated user question: turn 3 repeats turn 1"
    (repeat,) = result.detail["repeats"]
    assert repeat["question"] == "where is my order A-17??" and repeat["similarity"] == 1.0  # case and "??" dropped
    # "thanks" is too short to compare; three messages were, one of them a repeat.
    assert result.detail["compared"] == 3 and result.score == pytest.approx(2 / 3)
    assert RepeatedUserQuestion(max_repeats=1).evaluate(support).passed


def test_repeated_user_question_near_duplicates_and_threshold(exporter: InMemorySpanExporter) -> None:
    near = Step("Where's my order A-17 now?", "It shipped.")
    conversation = run_session(exporter, [ORDER, near])
    assert RepeatedUserQuestion(similarity=0.8).evaluate(conversation).detail["repeats"][0]["repeats_turn"] == 1
    distinct = RepeatedUserQuestion(similarity=0.95).evaluate(conversation)
    assert distinct.passed and distinct.reason == "no repeated user question in 2 messages"


def test_session_budget_within_and_over(support: Conversation) -> None:
    within = SessionBudget(max_cost_usd=0.05, max_tokens=500, max_latency_ms=60_000).evaluate(support)
    assert within.passed and within.detail["measured"]["cost_usd"] == pytest.approx(0.04)
    assert within.detail["measured"]["tokens"] == 480.0  # 4 turns x (100 + 20)
    over = SessionBudget(max_cost_usd=0.03, max_tokens=400).evaluate(support)
    assert not over.passed and over.detail["over_limit"] == ["cost_usd", "tokens"]
    assert over.reason == "over budget: cost_usd 0.04 > 0.03, tokens 480 > 400"


def test_session_budget_unknown_cost_is_not_evaluated_never_passed(exporter: InMemorySpanExporter) -> None:
    unpriced = Step("Is A-17 insured?", "Yes, it is insured.", cost_usd=None)  # an unknown model: no price
    conversation = run_session(exporter, [ORDER, unpriced, THANKS])
    assert conversation.turns[1].cost_usd is None
    result = SessionBudget(max_cost_usd=1.0).evaluate(conversation)
    assert result.status == "skipped" and not result.passed
    assert result.reason == "skipped: unknown cost_usd for turn(s) 2: the session total cannot be checked"
    # The turns that report a cost already exceed this ceiling: a lower bound over the limit is a definite fail.
    over = SessionBudget(max_cost_usd=0.015).evaluate(conversation)
    assert over.status == "completed" and not over.passed and over.reason.endswith("(lower bound: cost_usd)")
    assert over.detail["unknown_turns"] == {"cost_usd": [2]}
    # A ceiling that can be checked still decides when it is over, and the unknown one keeps a pass away.
    assert SessionBudget(max_cost_usd=1.0, max_latency_ms=0).evaluate(conversation).passed is False
    assert SessionBudget(max_cost_usd=1.0, max_latency_ms=60_000).evaluate(conversation).status == "skipped"


def test_session_budget_without_any_reported_tokens_is_not_evaluated(exporter: InMemorySpanExporter) -> None:
    conversation = run_session(exporter, [Step("Hello there, Penny", "Hello!", tokens=None)])
    result = SessionBudget(max_tokens=10).evaluate(conversation)
    assert result.status == "skipped" and result.reason == "skipped: no turn reports tokens"


@pytest.mark.parametrize(
    "evaluator",
    [TurnCount(max_turns=3), RepeatedUserQuestion(), SessionBudget(max_latency_ms=10), ToolErrorRate(), ToolLoop()],
)
def test_a_conversation_without_turns_is_not_evaluated(evaluator: Any) -> None:
    result = evaluator.evaluate(EMPTY)
    assert result.status == "skipped" and not result.passed and result.score is None


@pytest.mark.parametrize(
    ("build", "problem"),
    [
        (lambda: TurnCount(), "TurnCount needs min_turns and/or max_turns"),
        (lambda: TurnCount(min_turns=4, max_turns=2), r"min_turns \(4\) is above max_turns \(2\)"),
        (lambda: TurnCount(max_turns=2.5), "max_turns must be a whole number"),
        (lambda: TurnCount(max_turns=True), "max_turns must be a number >= 0, got True"),
        (lambda: RepeatedUserQuestion(similarity=0), r"similarity must be a number in \(0, 1\]"),
        (lambda: RepeatedUserQuestion(min_words=-1), "min_words must be a number >= 0"),
        (lambda: SessionBudget(), "SessionBudget needs max_cost_usd, max_latency_ms and/or max_tokens"),
        (lambda: SessionBudget(max_cost_usd=-1), "max_cost_usd must be a number >= 0, got -1"),
        (lambda: SessionBudget(max_tokens="lots"), "max_tokens must be a number >= 0, got 'lots'"),
        (lambda: ConversationRelevancy(Judge("m", api_key="k"), window=0), "window must be a whole number"),
        (lambda: RoleAdherence(Judge("m", api_key="k"), role="  "), "role must be a non-empty text"),
        (lambda: KnowledgeRetention(Judge("m", api_key="k"), threshold=2), r"threshold must be a number in \[0, 1\]"),
    ],
)
def test_options_are_checked_when_the_evaluator_is_built(build: Any, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        build()


def test_a_wrong_subject_is_named_not_a_traceback_deep_inside(support: Conversation) -> None:
    with pytest.raises(WrongSubjectError, match="judges a session's conversation, not one trace.*scope='session'"):
        TurnCount(max_turns=3).evaluate(support.turns[0].trace)
    with pytest.raises(WrongSubjectError, match="'exact_match' judges one trace, not a session's conversation"):
        ExactMatch("x").evaluate(support)


def test_catalogue_names_and_eval_yaml_entries(support: Conversation, tmp_path: Path) -> None:
    names = {
        "conversation_completeness",
        "conversation_relevancy",
        "knowledge_retention",
        "role_adherence",
        "repeated_user_question",
        "session_budget",
        "turn_count",
    }
    for name in names:
        assert CATALOGUE[name].name == name and "conversation" in CATALOGUE[name].subjects
    entries = [
        {"name": "short_sessions", "type": "turn_count", "max_turns": 3},
        {"type": "session_budget", "max_cost_usd": 0.5},
    ]
    built = build_evaluators(entries, tmp_path / "eval.yaml")
    assert [b.name for b in built] == ["short_sessions", "session_budget"]
    result = built[0].evaluator.evaluate(support)
    assert result.evaluator == "short_sessions" and not result.passed
    assert create_evaluator("repeated_user_question", similarity=0.8).similarity == 0.8


# --- tool and trajectory evaluators over all turns --------------------------------------------------------------


def test_tool_evaluators_read_the_calls_of_every_turn_in_order(support: Conversation) -> None:
    assert [c.name for c in support.tool_calls] == ["lookup_order", "issue_refund", "lookup_order"]
    rate = ToolErrorRate(threshold=0.25).evaluate(support)
    assert not rate.passed and rate.score == pytest.approx(1 / 3)
    assert rate.reason == "1 of 3 tool results are errors (issue_refund)"
    assert rate.detail["errors_by_turn"] == {"2": 1}
    exact = ToolSequence(["lookup_order", "issue_refund", "lookup_order"], mode="exact").evaluate(support)
    assert exact.passed and exact.detail["actual"] == ["lookup_order", "issue_refund", "lookup_order"]
    order = ToolSequence(["issue_refund", "lookup_order"], mode="in_order").evaluate(support)
    assert order.passed  # the refund (turn 2) comes before the second lookup (turn 3)
    assert ToolCalled("issue_refund", "lookup_order").evaluate(support).passed
    assert StepAlignment(["lookup_order", "issue_refund"]).evaluate(support).detail["extra_steps"] == ["lookup_order"]
    assert ToolEfficiency(optimal=2, maximum=4).evaluate(support).detail["redundant_calls"] == 1
    # The same lookup made again in turn 3 is a repeated call of the conversation.
    loop = ToolLoop(max_repeats=1).evaluate(support)
    assert (
        not loop.passed and loop.reason == 'tool loop: lookup_order({"order_id": "A-17"}) called 2 times (more than 1)'
    )


def test_tool_evaluators_over_a_conversation_without_tools_are_not_evaluated(exporter: InMemorySpanExporter) -> None:
    chat = run_session(exporter, [THANKS, THANKS])
    for evaluator in (ToolErrorRate(), ToolLoop(), ToolSequence(["lookup_order"])):
        result = evaluator.evaluate(chat)
        assert result.status == "skipped" and not result.passed
        assert (
            result.reason
            == "skipped: no evidence: no turn of the conversation has tool calls (no tool spans or tool messages)"
        )


def test_looping_detection_over_a_conversation_reads_every_answer(exporter: InMemorySpanExporter) -> None:
    stuck = "I am sorry, I cannot help with that request right now."
    conversation = run_session(exporter, [Step(f"Question number {i} about my order?", stuck) for i in range(4)])
    result = LoopingDetection().evaluate(conversation)
    assert not result.passed and result.detail["turns_measured"] == 4
    assert result.detail["unique_sentence_ratio"] == 0.25
    # One turn alone does not loop.
    assert LoopingDetection().evaluate(conversation.turns[0].trace).passed


# --- the four judges against the scripted judge server --------------------------------------------------------


def reply(payload: Any) -> str:
    return json.dumps(payload)


def test_turns_show_in_order_in_the_transcript(support: Conversation) -> None:
    from evaltrace.evaluators._transcript import render_turns

    text = render_turns(support.turns)
    assert (
        text.index("[Turn 1]\nUser: Where is my order A-17?\nAssistant: Order A-17 shipped yesterday")
        < text.index("[Turn 2]\nUser: My name is Ada. Please refund order A-17.")
        < text.index("[Turn 3]")
        < text.index("[Turn 4]\nUser: thanks\nAssistant: You're welcome, Ada!")
    )


async def test_conversation_completeness(fake_openai: FakeOpenAI, judge: Judge, support: Conversation) -> None:
    requests = [
        {"request": "order status of A-17", "turn": 1, "fulfilled": True, "reason": "shipped"},
        {"request": "refund A-17", "turn": 2, "fulfilled": "no", "reason": "refund failed"},
    ]
    fake_openai.script(reply({"requests": requests}))
    result = await ConversationCompleteness(judge).evaluate(support)
    assert (result.status, result.passed, result.score) == ("completed", False, 0.5)
    assert result.reason == "1/2 user requests fulfilled; not fulfilled: refund A-17"
    assert result.detail["unfulfilled"] == ["refund A-17"]
    assert result.detail["judge"]["prompt"] == "conversation_completeness@v1" and result.cost_usd == pytest.approx(
        0.00014
    )
    (prompt,) = fake_openai.prompts()
    assert prompt.index("[Turn 1]\nUser: Where is my order A-17?") < prompt.index("[Turn 4]\nUser: thanks")
    assert result.evaluator_version == "v1.0.0+conversation-completeness.v1"


async def test_conversation_completeness_with_no_request(fake_openai: FakeOpenAI, judge: Judge) -> None:
    fake_openai.script(reply({"requests": []}))
    conversation = Conversation.from_traces("s", [build_trace("Hi!", question="hello")])
    result = await ConversationCompleteness(judge).evaluate(conversation)
    assert result.passed and result.score == 1.0 and result.reason == "the user made no request to fulfil"


async def test_knowledge_retention_judges_turns_after_the_first(
    fake_openai: FakeOpenAI, judge: Judge, support: Conversation
) -> None:
    verdicts = [
        {"turn": 2, "retained": True},
        {"turn": 3, "retained": True},
        {"turn": 4, "retained": False, "reason": "asked for the name again"},
    ]
    fake_openai.script(reply({"verdicts": verdicts}))
    result = await KnowledgeRetention(judge).evaluate(support)
    assert result.score == pytest.approx(2 / 3) and not result.passed
    assert (
        result.reason == "2/3 replies retain what the user said earlier; failed turn(s): 4 (asked for the name again)"
    )
    assert result.detail["failed_turns"] == [4]
    assert "replies in turns 2, 3, 4" in fake_openai.prompts()[0]


async def test_a_verdict_missing_for_a_turn_is_retried_then_an_error_not_a_fail(
    fake_openai: FakeOpenAI, judge: Judge, support: Conversation
) -> None:
    short = reply({"verdicts": [{"turn": 2, "retained": True}]})
    fake_openai.script(short, short)
    result = await KnowledgeRetention(judge).evaluate(support)
    assert result.status == "failed" and result.error is not None and result.score is None
    assert "no verdict for turn(s) 3, 4" in result.reason and len(fake_openai.chat_requests) == 2
    assert "no verdict for turn(s) 3, 4" in fake_openai.chat_requests[1]["messages"][-1]["content"]  # the retry


async def test_a_judge_outage_is_an_error_not_a_fail(
    fake_openai: FakeOpenAI, judge: Judge, support: Conversation
) -> None:
    fake_openai.script({"status": 500, "message": "judge down"})
    result = await RoleAdherence(judge).evaluate(support)
    assert result.status == "failed" and not result.passed and result.score is None
    assert result.error is not None and result.reason.startswith("judge failed:")


async def test_knowledge_retention_needs_a_second_answered_turn(judge: Judge, exporter: InMemorySpanExporter) -> None:
    result = await KnowledgeRetention(judge).evaluate(run_session(exporter, [ORDER]))
    assert result.status == "skipped" and result.reason == "skipped: no turn from turn 2 on has an assistant answer"
    assert (await KnowledgeRetention(judge).evaluate(EMPTY)).reason == "skipped: the conversation has no turns"


async def test_role_adherence_reads_the_system_instructions(
    fake_openai: FakeOpenAI, judge: Judge, support: Conversation
) -> None:
    fake_openai.script(reply({"verdicts": [{"turn": n, "in_role": "yes"} for n in (1, 2, 3, 4)]}))
    result = await RoleAdherence(judge).evaluate(support)
    assert result.passed and result.score == 1.0 and result.detail["role_source"] == "system_instructions"
    prompt = fake_openai.prompts()[0]
    assert (
        prompt.startswith(f"The assistant was given this role:\n{SYSTEM}") and "replies in turns 1, 2, 3, 4" in prompt
    )


async def test_role_adherence_option_wins_and_no_role_is_not_evaluated(fake_openai: FakeOpenAI, judge: Judge) -> None:
    conversation = Conversation.from_traces("s", [build_trace("Arr, matey!", question="hello")])
    skipped = await RoleAdherence(judge).evaluate(conversation)
    assert skipped.status == "skipped" and "no role" in skipped.reason and not fake_openai.chat_requests
    fake_openai.script(reply({"verdicts": [{"turn": 1, "in_role": False, "reason": "talks like a pirate"}]}))
    result = await RoleAdherence(judge, role="A formal bank clerk").evaluate(conversation)
    assert not result.passed and result.detail["role_source"] == "option"
    assert "A formal bank clerk" in fake_openai.prompts()[0]


async def test_conversation_relevancy_slides_a_window_over_the_turns(
    fake_openai: FakeOpenAI, judge: Judge, support: Conversation
) -> None:
    def verdict(body: dict[str, Any]) -> str:
        prompt = body["messages"][-1]["content"]
        return reply({"relevant": "Latest user message (turn 3)" not in prompt, "reason": "repeats old news"})

    fake_openai.responder = verdict
    result = await ConversationRelevancy(judge, window=2).evaluate(support)
    assert result.score == 0.75 and result.passed and result.detail["failed_turns"] == [3]
    assert result.detail["window"] == 2 and len(result.detail["judge_calls"]) == 4
    assert result.cost_usd == pytest.approx(4 * 0.00014)
    prompts = {p.split("Latest user message (turn ")[1][0]: p for p in fake_openai.prompts()}
    assert "(no earlier turns)" in prompts["1"]
    # Window 2: turn 3's call shows turn 2 only, then turn 3's own message and reply.
    assert "[Turn 2]" in prompts["3"] and "[Turn 1]" not in prompts["3"] and "[Turn 3]" not in prompts["3"]
    assert "where is my order A-17??" in prompts["3"] and "Order A-17 shipped yesterday." in prompts["3"]
    assert "[Turn 3]" in prompts["4"] and "[Turn 2]" not in prompts["4"]


async def test_conversation_relevancy_fails_whole_when_one_window_fails(
    fake_openai: FakeOpenAI, judge: Judge, support: Conversation
) -> None:
    def verdict(body: dict[str, Any]) -> Any:
        if "(turn 2)" in body["messages"][-1]["content"]:
            return {"status": 500, "message": "judge down"}
        return reply({"relevant": True})

    fake_openai.responder = verdict
    result = await ConversationRelevancy(judge).evaluate(support)
    assert result.status == "failed" and result.score is None and not result.passed
    assert result.cost_usd == pytest.approx(3 * 0.00014)  # the three answered calls were paid for


async def test_session_judges_reject_a_single_trace_and_trace_judges_a_conversation(
    fake_openai: FakeOpenAI, judge: Judge, embedder: Any, support: Conversation
) -> None:
    with pytest.raises(WrongSubjectError, match="scope='session'"):
        await ConversationCompleteness(judge).evaluate(build_trace("hi", question="hello"))
    with pytest.raises(WrongSubjectError, match="'faithfulness' judges one trace, not a session's conversation"):
        await Faithfulness(judge).evaluate(support)
    with pytest.raises(WrongSubjectError, match="'semantic_similarity' judges one trace"):
        await SemanticSimilarity(embedder).evaluate(support)
    assert not fake_openai.chat_requests and not fake_openai.embedding_requests


async def test_a_late_turn_re_judges_relevancy_only_for_its_own_window(
    fake_openai: FakeOpenAI, judge: Judge, support: Conversation
) -> None:
    fake_openai.responder = lambda body: reply({"relevant": True})
    first = Conversation.from_traces("s-1", support.traces[:3])
    assert (await ConversationRelevancy(judge).evaluate(first)).cost_usd == pytest.approx(3 * 0.00014)
    again = await ConversationRelevancy(judge).evaluate(support)  # turn 4 arrived late: a new revision
    assert again.score == 1.0 and len(fake_openai.chat_requests) == 4
    assert again.cost_usd == pytest.approx(0.00014)  # turns 1-3 came from the judge's cache, at no cost


async def test_a_budget_is_charged_every_uncached_judge_call_of_a_session_judge(
    fake_openai: FakeOpenAI, judge: Judge, support: Conversation
) -> None:
    fake_openai.responder = lambda body: reply({"relevant": True})
    first = await ConversationRelevancy(judge).evaluate(Conversation.from_traces("s-1", support.traces[:3]))
    usage = judge_usage(first)  # what the budgets and the judge-spend metrics are charged
    assert usage is not None and usage.cost_usd == pytest.approx(3 * 0.00014) == first.cost_usd
    per_call = first.detail["judge_calls"][0]
    assert usage.input_tokens == 3 * per_call["input_tokens"] and usage.output_tokens == 3 * per_call["output_tokens"]
    # Turn 4 arrives: turns 1-3 come from the judge's cache (the first call among them), only turn 4 is paid.
    again = judge_usage(await ConversationRelevancy(judge).evaluate(support))
    assert again is not None and again.cost_usd == pytest.approx(0.00014)
    assert again.input_tokens + again.output_tokens == per_call["input_tokens"] + per_call["output_tokens"]


@pytest.mark.parametrize("turn", [True, 2.7, "2"])
async def test_a_verdict_whose_turn_is_not_a_whole_number_is_malformed_retried_then_an_error(
    fake_openai: FakeOpenAI, judge: Judge, support: Conversation, turn: Any
) -> None:
    # true would have read as turn 1 and 2.7 as turn 2: a verdict given to a turn the judge did not name.
    bad = reply({"verdicts": [{"turn": turn, "retained": True}] + [{"turn": n, "retained": True} for n in (3, 4)]})
    fake_openai.script(bad, bad)
    result = await KnowledgeRetention(judge).evaluate(support)
    assert result.status == "failed" and result.score is None and len(fake_openai.chat_requests) == 2
    assert "each verdict needs a whole turn number" in result.reason


def test_repeated_user_question_ignores_acknowledgements_said_twice(exporter: InMemorySpanExporter) -> None:
    yes = Step("Yes, please do.", "Done.")
    ok = Step("OK, thank you so much!", "You're welcome.")
    refund = Step("Can you check my refund for order A-17?", "It was issued today.")
    conversation = run_session(exporter, [ORDER, yes, refund, yes, ok, ok])
    result = RepeatedUserQuestion().evaluate(conversation)
    assert result.passed and result.reason == "no repeated user question in 2 messages"
    assert result.detail["compared"] == 2  # the two questions; the agreements and thanks are not questions
