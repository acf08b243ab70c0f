"""The Judge against a real HTTP server: prompts sent, scores computed, cache, retry, failures as values."""

from __future__ import annotations

import asyncio
import gc
import json
import warnings
from typing import Any

import httpx
import pytest

from evaltrace._internal import tracing
from evaltrace.evaluators import AnswerCorrectness, Faithfulness, Judge
from evaltrace.evaluators.embeddings import cosine
from evaltrace.evaluators.judge import extract_json

from .factories import build_case, build_trace
from .fake_openai import FakeOpenAI, letter_vector

QUESTION = "What is the boiling point of water at sea level?"
ANSWER = "Water boils at 100 degrees Celsius at sea level. It freezes at 10 degrees."
EXPECTED = "Water boils at 100 °C at sea level, which is 212 °F."
F1_REPLY = json.dumps(
    {
        "TP": [{"statement": "Water boils at 100 C at sea level", "reason": "same"}],
        "FP": [{"statement": "Water freezes at 10 degrees", "reason": "not in ground truth"}],
        "FN": [{"statement": "212 F", "reason": "missing"}],
    }
)
CONTEXTS = ["Water boils at 100 °C at sea level.", "Mount Everest is 8,849 m high."]
CLAIMS_REPLY = json.dumps(
    {
        "claims": [
            {"claim": "boils at 100 C", "supported": True, "reason": "[1]"},
            {"claim": "freezes at 10 degrees", "supported": False, "reason": "absent"},
        ]
    }
)


def qa_trace() -> Any:
    return build_trace(ANSWER, question=QUESTION, contexts=CONTEXTS)


def qa_case() -> Any:
    return build_case(facts={"expected_answer": EXPECTED})


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ('{"a": 1}', {"a": 1}),
        ('```json\n{"a": 1}\n```', {"a": 1}),
        ('Sure! Here it is: {"a": {"b": 2}} Hope that helps.', {"a": {"b": 2}}),
        ("[1, 2]", [1, 2]),
    ],
)
def test_extract_json(text: str, value: Any) -> None:
    assert extract_json(text) == value


@pytest.mark.parametrize("text", ["", "no json here", '{"a": 1', "{'a': 1}"])
def test_extract_json_rejects(text: str) -> None:
    with pytest.raises(ValueError):
        extract_json(text)


async def test_answer_correctness_prompt_and_score(fake_openai: FakeOpenAI, judge: Judge, embedder: Any) -> None:
    fake_openai.script(F1_REPLY)
    result = await AnswerCorrectness(judge, embedder=embedder).evaluate(qa_trace(), qa_case())

    (request,) = fake_openai.chat_requests
    assert request["model"] == "judge-model" and request["temperature"] == 0.0
    assert request["response_format"] == {"type": "json_object"}
    prompt = request["messages"][-1]["content"]
    assert QUESTION in prompt and ANSWER in prompt and EXPECTED in prompt

    f1 = 1 / (1 + 0.5 * (1 + 1))  # TP 1, FP 1, FN 1
    similarity = cosine(letter_vector(ANSWER), letter_vector(EXPECTED))
    assert result.detail["f1"] == pytest.approx(f1)
    assert result.detail["similarity"] == pytest.approx(similarity)
    assert result.score == pytest.approx(0.75 * f1 + 0.25 * similarity)
    assert result.passed is (result.score >= 0.75)
    assert fake_openai.embedding_requests[0]["input"] == [ANSWER, EXPECTED]
    assert fake_openai.embedding_requests[0]["model"] == "embed-model"

    judge_detail = result.detail["judge"]
    assert judge_detail["model"] == "judge-model" and judge_detail["prompt"] == "answer_correctness@v1"
    assert len(judge_detail["prompt_hash"]) == 64
    assert (judge_detail["input_tokens"], judge_detail["output_tokens"]) == (100, 20)
    assert judge_detail["cost_usd"] == pytest.approx((100 * 1.0 + 20 * 2.0) / 1e6) == result.cost_usd
    assert result.evaluator_type == "llm_judge" and result.evaluator_version == "v1.0.0+answer-correctness.v1"


async def test_f1_only_when_similarity_weight_is_zero(fake_openai: FakeOpenAI, judge: Judge) -> None:
    fake_openai.script(F1_REPLY)
    result = await AnswerCorrectness(judge, weights=(1.0, 0.0)).evaluate(qa_trace(), qa_case())
    assert result.score == pytest.approx(0.5) and result.detail["similarity"] is None
    assert fake_openai.embedding_requests == []


async def test_cache_prevents_second_call(fake_openai: FakeOpenAI, judge: Judge) -> None:
    fake_openai.script(CLAIMS_REPLY)
    evaluator = Faithfulness(judge)
    first = await evaluator.evaluate(qa_trace())
    second = await Faithfulness(judge).evaluate(qa_trace())  # another evaluator object, same judge
    assert len(fake_openai.chat_requests) == 1
    assert first.score == second.score == 0.5
    assert not first.detail["judge"]["cached"] and second.detail["judge"]["cached"]
    assert second.cost_usd == 0.0
    assert first.detail["judge"]["prompt_hash"] == second.detail["judge"]["prompt_hash"]
    fake_openai.script(CLAIMS_REPLY)
    await evaluator.evaluate(build_trace("A different answer.", question=QUESTION, contexts=CONTEXTS))
    assert len(fake_openai.chat_requests) == 2  # a different prompt is a different key


async def test_malformed_reply_is_retried_once(fake_openai: FakeOpenAI, judge: Judge) -> None:
    fake_openai.script("Sure, the claims are mostly fine!", CLAIMS_REPLY)
    result = await Faithfulness(judge).evaluate(qa_trace())
    assert result.status == "completed" and result.score == 0.5
    assert result.detail["judge"]["attempts"] == 2
    assert result.detail["judge"]["input_tokens"] == 200  # both attempts counted
    retry = fake_openai.chat_requests[1]["messages"]
    assert retry[-2] == {"role": "assistant", "content": "Sure, the claims are mostly fine!"}
    assert "could not be used" in retry[-1]["content"]


@pytest.mark.parametrize(
    ("replies", "raw"),
    [
        (["not json", '{"claims": "nope"}'], ["not json", '{"claims": "nope"}']),
        (
            ['{"claims": [{"claim": "x", "supported": "maybe"}]}'] * 2,
            ['{"claims": [{"claim": "x", "supported": "maybe"}]}'] * 2,
        ),
        ([{"content": None, "refusal": "I can't help with that."}] * 2, ["I can't help with that."] * 2),
        (['{"unexpected": 1}', "```json\n{broken\n```"], ['{"unexpected": 1}', "```json\n{broken\n```"]),
    ],
    ids=["prose", "bad-flag", "refusal", "wrong-shape"],
)
async def test_unparseable_twice_fails_with_raw_reply(
    fake_openai: FakeOpenAI, judge: Judge, replies: list[Any], raw: list[str]
) -> None:
    fake_openai.script(*replies)
    result = await Faithfulness(judge).evaluate(qa_trace())
    assert result.status == "failed" and not result.passed and result.score is None
    assert result.detail["raw_replies"] == raw
    assert result.error is not None and result.error.type == "exception"
    assert "unparseable" in result.reason
    assert len(fake_openai.chat_requests) == 2
    fake_openai.script(CLAIMS_REPLY)
    again = await Faithfulness(judge).evaluate(qa_trace())
    assert again.status == "completed"  # failures are not cached


async def test_reply_cut_at_max_tokens_says_so(fake_openai: FakeOpenAI, judge: Judge) -> None:
    # What SmolLM2 on llama.cpp does with a long claims list: valid JSON until the token limit stops it.
    cut = {"content": '{"claims": [{"claim": "boils at 100 C", "supp', "finish_reason": "length"}
    fake_openai.script(cut, cut)
    result = await Faithfulness(judge).evaluate(qa_trace())
    assert result.status == "failed" and result.detail["judge"]["finish_reasons"] == ["length", "length"]
    assert result.error is not None and result.error.message.endswith("(the reply was cut at max_tokens=1024)")
    fake_openai.script(CLAIMS_REPLY)
    again = await Faithfulness(judge).evaluate(qa_trace())
    assert again.status == "completed" and again.detail["judge"]["finish_reasons"] == ["stop"]


@pytest.mark.parametrize(("status", "error_type"), [(429, "exception"), (500, "http_5xx"), (503, "http_5xx")])
async def test_http_errors_end_as_failed(fake_openai: FakeOpenAI, judge: Judge, status: int, error_type: str) -> None:
    fake_openai.script({"status": status, "message": "slow down"})
    result = await Faithfulness(judge).evaluate(qa_trace())
    assert result.status == "failed" and result.error is not None and result.error.type == error_type
    assert str(status) in result.reason and result.detail["raw_replies"] == []
    assert len(fake_openai.chat_requests) == 1  # max_retries=0


async def test_missing_input_skips_without_calling(fake_openai: FakeOpenAI, judge: Judge) -> None:
    result = await Faithfulness(judge).evaluate(build_trace("answer only"))
    assert result.status == "skipped" and fake_openai.chat_requests == []


async def test_concurrency_limit(fake_openai: FakeOpenAI) -> None:
    fake_openai.responder = lambda body: CLAIMS_REPLY
    fake_openai.delay_s = 0.02
    judge = Judge("m", base_url=fake_openai.url, api_key="k", max_retries=0, max_concurrency=2)
    try:
        traces = [build_trace(f"answer {i}", question=QUESTION, contexts=CONTEXTS) for i in range(6)]
        results = await asyncio.gather(*(Faithfulness(judge).evaluate(t) for t in traces))
    finally:
        await judge.aclose()
    assert all(r.status == "completed" for r in results)
    assert len(fake_openai.chat_requests) == 6 and fake_openai.max_in_flight <= 2


async def test_judge_calls_are_not_instrumented(fake_openai: FakeOpenAI) -> None:
    seen: list[bool] = []

    async def record(request: httpx.Request) -> None:
        seen.append(tracing.is_suppressed())

    http_client = httpx.AsyncClient(event_hooks={"request": [record]})
    judge = Judge("m", base_url=fake_openai.url, api_key="k", max_retries=0, http_client=http_client)
    fake_openai.script(CLAIMS_REPLY)
    try:
        await Faithfulness(judge).evaluate(qa_trace())
    finally:
        await http_client.aclose()
    assert seen == [True] and not tracing.is_suppressed()


async def test_json_mode_can_be_turned_off(fake_openai: FakeOpenAI) -> None:
    judge = Judge("m", base_url=fake_openai.url, api_key="k", max_retries=0, json_mode=False, max_tokens=None)
    fake_openai.script(CLAIMS_REPLY)
    try:
        await Faithfulness(judge).evaluate(qa_trace())
    finally:
        await judge.aclose()
    assert "response_format" not in fake_openai.chat_requests[0]
    assert "max_tokens" not in fake_openai.chat_requests[0]


def test_one_judge_across_event_loops(fake_openai: FakeOpenAI) -> None:
    # run_evaluator starts a private event loop per call: the judge must not reuse another loop's connections.
    runner = pytest.importorskip("evaltrace.evaluation.runner")
    fake_openai.responder = lambda body: CLAIMS_REPLY
    judge = Judge("m", base_url=fake_openai.url, api_key="k", max_retries=0)
    for i in range(3):
        result = runner.run_evaluator(Faithfulness(judge), build_trace(f"a{i}", contexts=CONTEXTS))
        assert result.status == "completed", result.reason
    # Each private loop is closed by now, so its kept-alive connection cannot be closed cleanly; drop them here
    # rather than let the ResourceWarning surface in a later test.
    del judge
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        gc.collect()
    assert len(fake_openai.chat_requests) == 3


def test_missing_openai_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from evaltrace.evaluators import MissingExtraError

    monkeypatch.setitem(sys.modules, "openai", None)
    with pytest.raises(MissingExtraError, match=r"evaltrace\[openai\]"):
        Judge("m", api_key="k")


def test_judge_reads_environment_only_when_created(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVALTRACE_JUDGE_MODEL", "env-model")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    judge = Judge(api_key="k")
    assert judge.model == "env-model" and str(judge.client.base_url).startswith("http://127.0.0.1:9/v1")


async def test_evaluators_without_any_key_fail_as_results(
    fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    judge = Judge("m", base_url=fake_openai.url, max_retries=0)  # creating it must not raise
    fake_openai.script({"status": 401, "message": "invalid api key"})
    try:
        result = await Faithfulness(judge).evaluate(qa_trace())
    finally:
        await judge.aclose()
    assert result.status == "failed" and "401" in result.reason


async def test_cost_from_the_price_table(fake_openai: FakeOpenAI) -> None:
    from evaltrace import pricing

    pricing.set_model_price("priced-judge", input=3.0, output=5.0)
    judge = Judge("priced-judge", base_url=fake_openai.url, api_key="k", max_retries=0)
    unknown = Judge("unpriced-judge-xyz", base_url=fake_openai.url, api_key="k", max_retries=0)
    fake_openai.script(CLAIMS_REPLY, CLAIMS_REPLY)
    try:
        priced = await Faithfulness(judge).evaluate(qa_trace())
        unpriced = await Faithfulness(unknown).evaluate(qa_trace())
    finally:
        pricing.clear_model_prices()
        await judge.aclose()
        await unknown.aclose()
    assert priced.cost_usd == pytest.approx((100 * 3.0 + 20 * 5.0) / 1e6)
    assert unpriced.cost_usd is None and unpriced.detail["judge"]["cost_usd"] is None


def test_a_judge_closed_on_one_loop_still_judges_on_the_next(fake_openai: FakeOpenAI) -> None:
    # What an offline run does: close the judge's client on its loop at the end; its retry pass (or the next run)
    # uses the same judge on a new loop, which must get an open client, not the closed one.
    fake_openai.responder = lambda body: CLAIMS_REPLY
    judge = Judge("m", base_url=fake_openai.url, api_key="k", max_retries=0)

    async def judged_then_closed(answer: str) -> Any:
        try:
            return await Faithfulness(judge).evaluate(build_trace(answer, contexts=CONTEXTS))
        finally:
            await judge.aclose()

    for i in range(3):
        result = asyncio.run(judged_then_closed(f"a{i}"))  # a new answer each time: the judge's cache is not asked
        gc.collect()  # the finished loop is gone: nothing ties the judge's clients to it any more
        assert result.status == "completed", result.reason
    assert len(fake_openai.chat_requests) == 3
