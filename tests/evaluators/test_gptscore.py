"""GPTScore and perplexity from prompt logprobs served by a scripted completions endpoint on 127.0.0.1."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from evaltrace.evaluators import (
    CATALOGUE,
    GPTScore,
    GPTScoreSummarization,
    GPTScoreTranslation,
    Judge,
    Perplexity,
)
from evaltrace.runner.config_models import JudgeConfig
from evaltrace.runner.errors import RunConfigError
from evaltrace.runner.evaluator_entries import build_evaluators

from .factories import build_case, build_trace
from .fake_openai import FakeOpenAI

Q = "Who designed the Eiffel Tower?"
A = "Gustave Eiffel's company designed it."
EA = "Engineers of Eiffel's company designed the tower."


def nll(text: str, skip_first: bool = False) -> float:
    """The fake server's toy logprob is -0.25 per character of each word."""
    words = text.split()[1:] if skip_first else text.split()
    return 0.25 * sum(len(w) for w in words) / len(words)


async def test_gptscore_scores_the_answer_after_each_aspects_instruction(fake_openai: FakeOpenAI, judge: Judge) -> None:
    result = await GPTScore(judge).evaluate(build_trace(A, question=Q))
    assert result.status == "completed" and result.evaluator == "gptscore"
    assert result.score == pytest.approx(nll(A)) and result.passed  # no threshold: the catalogue's infinity
    assert result.detail["variant"] == "question_answering" and result.detail["primary"] == "accuracy"
    assert result.detail["aspects"] == pytest.approx({"accuracy": nll(A), "relevance": nll(A), "fluency": nll(A)})
    assert result.detail["direction"] == "lower" and result.cost_usd is not None
    requests = fake_openai.completion_requests
    assert len(requests) == 3 and all(r["echo"] is True and r["logprobs"] == 1 for r in requests)
    prompts = sorted(r["prompt"] for r in requests)
    assert all(p.endswith(f"{Q} Answer: {A}") for p in prompts)
    assert any(p.startswith("Answer the following question correctly and factually:") for p in prompts)


async def test_translation_uses_the_catalogue_instructions_both_ways_averaged(
    fake_openai: FakeOpenAI, judge: Judge
) -> None:
    result = await GPTScoreTranslation(judge, aspects=["fluency", "accuracy"]).evaluate(
        build_trace(A, question=Q), build_case(facts={"expected_answer": EA})
    )
    assert result.evaluator == "gptscore_translation" and result.detail["primary"] == "fluency"
    assert result.score == pytest.approx((nll(A) + nll(EA)) / 2)
    prompts = {r["prompt"] for r in fake_openai.completion_requests}
    fluency = "Rewrite the following text to make it more grammatical and well-written: {} In other words, {}"
    assert prompts >= {fluency.format(EA, A), fluency.format(A, EA)}
    assert len(prompts) == 4


async def test_perplexity_is_exp_of_the_mean_nll_of_the_answer(fake_openai: FakeOpenAI, judge: Judge) -> None:
    result = await Perplexity(judge, threshold=2.0).evaluate(build_trace(A, question=Q))
    expected = math.exp(nll(A, skip_first=True))  # the first token has no logprob
    assert result.score == pytest.approx(expected) and result.detail["tokens"] == 4
    assert result.passed is (expected <= 2.0)
    assert fake_openai.completion_requests[0]["prompt"] == A
    strict = await Perplexity(judge, threshold=1.0).evaluate(build_trace(A, question=Q))
    assert not strict.passed and strict.status == "completed"


async def test_missing_inputs_are_not_evaluated(fake_openai: FakeOpenAI, judge: Judge) -> None:
    no_reference = await GPTScoreTranslation(judge).evaluate(build_trace(A, question=Q), None)
    assert no_reference.status == "skipped" and no_reference.score is None
    no_answer = await Perplexity(judge).evaluate(build_trace(None, question=Q))
    assert no_answer.status == "skipped"
    one_token = await Perplexity(judge).evaluate(build_trace("Yes.", question=Q))
    assert one_token.status == "skipped" and "single token" in one_token.reason
    assert fake_openai.completion_requests[-1]["prompt"] == "Yes."


@pytest.mark.parametrize("cls", [GPTScoreSummarization, Perplexity])
async def test_an_endpoint_without_prompt_logprobs_is_an_error_never_a_score(
    fake_openai: FakeOpenAI, judge: Judge, cls: Any
) -> None:
    fake_openai.completion_error = {"status": 400, "message": "echo is not supported with logprobs"}
    refused = await cls(judge).evaluate(build_trace(A, question=Q))
    assert refused.status == "failed" and refused.score is None and refused.error is not None
    assert "echo is not supported" in refused.reason
    fake_openai.completion_error = None
    fake_openai.echo_logprobs = False  # a server that ignores echo: only the generated token comes back
    ignored = await cls(judge).evaluate(build_trace(A, question=Q))
    assert ignored.status == "failed" and ignored.score is None and "logprob" in ignored.reason


def test_options_are_checked() -> None:
    with pytest.raises(ValueError, match="unknown GPTScore variant 'poetry'"):
        GPTScore(variant="poetry")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"unknown aspect\(s\) \['mqm'\].*known: accuracy, relevance, fluency"):
        GPTScore(aspects=["mqm"])
    with pytest.raises(ValueError, match="threshold must be a number >= 0"):
        Perplexity(threshold=-1)
    assert GPTScore(variant="summarization").aspects[0] == "consistency"


def test_gptscore_is_a_known_type_in_eval_yaml(tmp_path: Path) -> None:
    judge = JudgeConfig(model="smollm2", base_url="http://127.0.0.1:9/v1", api_key="none")
    entries = [
        {"name": "gptscore", "type": "gptscore", "variant": "translation", "aspects": ["mqm"]},
        {"name": "ppl", "type": "perplexity", "threshold": 20},
        {"name": "qa", "type": "gptscore_question_answering"},
    ]
    built = build_evaluators(entries, tmp_path / "eval.yaml", judge=judge)
    assert [type(b.evaluator).__name__ for b in built] == ["GPTScore", "Perplexity", "GPTScoreQuestionAnswering"]
    assert built[0].evaluator.judge.model == "smollm2" and built[0].evaluator.aspects == ["mqm"]
    with pytest.raises(RunConfigError, match=r"evaluators\[0\]\.variant: .*got .poetry."):
        build_evaluators([{"name": "g", "type": "gptscore", "variant": "poetry"}], tmp_path / "eval.yaml", judge=judge)
    assert {"gptscore", "perplexity", "gptscore_summarization_with_reference"} <= set(CATALOGUE)
