"""GPTScore (all four variants) and perplexity against a real model's prompt log-probabilities.

The model is SmolLM2-135M-Instruct on llama-cpp-python's OpenAI-compatible server (scripts/e2e_llm.sh), asked
through the run's ``judge:`` block for ``/v1/completions`` with ``echo`` and ``logprobs``: the server must hold
every token's logits (``--logits_all true``, which the script passes), or it refuses logprobs. What must hold:
every evaluator completes with finite scores from the real numbers, the numbers are the model's (checked against
its own next-token probabilities), and they rank fluent text above scrambled text.
"""

from __future__ import annotations

import gc
import importlib
import math
import textwrap
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from evaltrace.evaluators import GPTScoreQuestionAnswering, Perplexity
from evaltrace.runner import run_eval
from evaltrace.schema import EvalCase, ExpectedBehavior, Trace, TraceOutput

from .conftest import MODEL, CountingJudge
from .report import OUTCOMES
from .test_judge_real_model import qa_trace

pytestmark = pytest.mark.e2e_llm

LIKELIHOOD_TYPES = [
    "gptscore_translation",
    "gptscore_question_answering",
    "gptscore_summarization",
    "gptscore_summarization_with_reference",
    "perplexity",
]
PASSAGE = (
    "The Eiffel Tower was built for the 1889 World's Fair in Paris. It was designed by the company of Gustave "
    "Eiffel and was the tallest structure in the world for forty years."
)
CASES = [
    {
        "id": "capital",
        "input": {"question": "What is the capital of France?"},
        "expected": {"facts": {"expected_answer": "Paris is the capital of France."}},
    },
    {
        "id": "tower",
        "input": {"question": PASSAGE},
        "expected": {"facts": {"expected_answer": "The Eiffel Tower was built in Paris for the 1889 World's Fair."}},
    },
]
ANSWERS = {
    "What is the capital of France?": "The capital of France is Paris.",
    PASSAGE: "Built for the 1889 fair, the Eiffel Tower was the world's tallest structure for forty years.",
}
SYSTEM = f"""
ANSWERS = {ANSWERS!r}


def answer(question: str) -> str:
    return ANSWERS[question]
"""


def _completions(base_url: str, **request: Any) -> dict[str, Any]:
    body = {"model": MODEL, "max_tokens": 1, "temperature": 0.0, **request}
    response = httpx.post(f"{base_url}/completions", json=body, timeout=300.0)
    response.raise_for_status()
    reply: dict[str, Any] = response.json()
    return reply


def test_the_servers_prompt_logprobs_are_the_models_next_token_logprobs(base_url: str) -> None:
    # Echoed, a prompt token's logprob is log P(token | the tokens before it). Asked for the next token after the
    # prefix alone, the model gives that same probability. A server that reads the wrong logits row (the next
    # token's: llama-cpp-python for a model without a BOS token, which scripts/llama_server_noamx.py corrects)
    # or serves none would make every GPTScore and perplexity figure meaningless.
    prefix = "The capital of France is"
    following = _completions(base_url, prompt=prefix, logprobs=5)["choices"][0]["logprobs"]
    token, expected = following["tokens"][0], following["token_logprobs"][0]
    prompt = prefix + token
    echoed = _completions(base_url, prompt=prompt, echo=True, logprobs=1)["choices"][0]["logprobs"]
    in_prompt = [i for i, at in enumerate(echoed["text_offset"]) if at < len(prompt)]
    assert "".join(echoed["tokens"][i] for i in in_prompt) == prompt
    assert echoed["token_logprobs"][0] is None  # the first token has no context to be predicted from
    assert all(isinstance(echoed["token_logprobs"][i], float) for i in in_prompt[1:])
    last = in_prompt[-1]
    assert echoed["tokens"][last] == token
    assert echoed["token_logprobs"][last] == pytest.approx(expected, abs=1e-2)
    OUTCOMES.append(
        f"echoed logprob of {token!r} after {prefix!r}: {echoed['token_logprobs'][last]:.4f}, next-token {expected:.4f}"
    )


# No ResourceWarning filter: run_eval closes each evaluator's judge client on its own loop before stopping it
# (runner/_loops.py). tests/runner/test_judge_clients_closed.py proves it on this code path against a keep-alive
# endpoint on 127.0.0.1, and fails if the clients are left to the garbage collector.
def test_every_likelihood_evaluator_completes_through_the_judge_block(
    base_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = f"e2e_logprobs_system_{tmp_path.name}"
    (tmp_path / f"{module}.py").write_text(textwrap.dedent(SYSTEM))
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    eval_path = tmp_path / "eval.yaml"
    eval_path.write_text(
        yaml.safe_dump(
            {
                "name": "e2e-logprobs",
                "cases": "cases.yaml",
                "judge": {"model": MODEL, "base_url": base_url, "api_key": "none", "timeout_s": 300},
                "variants": [{"name": "fixed", "adapter": "python_function", "config": {"target": f"{module}:answer"}}],
                "evaluators": [{"name": t, "type": t, "timeout_s": 600} for t in LIKELIHOOD_TYPES],
                "concurrency": 1,
            }
        )  # fmt: skip
    )
    (tmp_path / "cases.yaml").write_text(yaml.safe_dump(CASES))
    started = time.perf_counter()
    outcome = run_eval(eval_path, runs_dir=tmp_path / "runs")
    took = time.perf_counter() - started
    gc.collect()  # anything the run left open is finalised here, in this test, and warns (ResourceWarning)

    by_key = {(r.case_id, r.evaluator): r for r in outcome.results}
    assert set(by_key) == {(c["id"], t) for c in CASES for t in LIKELIHOOD_TYPES}
    for (case_id, name), result in sorted(by_key.items()):
        assert result.status == "completed", (case_id, name, result.error)
        assert result.score is not None and math.isfinite(result.score) and result.score > 0
        assert result.passed is True  # no threshold: the catalogue's infinity, every score passes
        assert result.detail["model"] == MODEL
        if name == "perplexity":
            assert result.score == pytest.approx(math.exp(result.detail["mean_nll"]))
            assert result.score >= 1.0 and result.detail["tokens"] >= 5
        else:
            aspects = result.detail["aspects"]
            assert result.score == aspects[result.detail["primary"]]
            assert all(math.isfinite(v) and v > 0 for v in aspects.values())
        OUTCOMES.append(f"{case_id} {name}: {result.score:.3f} ({result.reason})")
    cells = len(by_key)
    OUTCOMES.append(f"likelihood evaluators: {cells} results in {took:.1f} s (run included)")


def _answered(text: str) -> Trace:
    trace = qa_trace()
    return trace.model_copy(update={"output": TraceOutput(final_answer=text)})


async def test_the_real_model_finds_fluent_text_more_likely_than_scrambled(judge: CountingJudge) -> None:
    fluent = "The capital of France is Paris, a city on the river Seine."
    scrambled = "Seine the capital river, Paris city France on is a of the."  # the same words
    perplexity = Perplexity(judge.judge)
    low, high = await perplexity.evaluate(_answered(fluent)), await perplexity.evaluate(_answered(scrambled))
    assert low.status == high.status == "completed"
    assert low.score is not None and high.score is not None and low.score < high.score
    case = EvalCase(id="capital", expected=ExpectedBehavior(facts={"expected_answer": "Paris"}))
    gptscore = GPTScoreQuestionAnswering(judge.judge)
    right = await gptscore.evaluate(_answered(fluent), case)
    wrong = await gptscore.evaluate(_answered(scrambled), case)
    assert right.status == wrong.status == "completed"
    assert right.score is not None and wrong.score is not None and right.score < wrong.score
    OUTCOMES.append(
        f"perplexity fluent {low.score:.1f} < scrambled {high.score:.1f}; "
        f"gptscore_question_answering fluent {right.score:.3f} < scrambled {wrong.score:.3f}"
    )
