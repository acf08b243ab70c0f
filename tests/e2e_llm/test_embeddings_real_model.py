"""evaltrace's embedding evaluators and the embeddings instrumentation against the real server's /v1/embeddings.

SmolLM2-135M is a chat model, not an embedding model: scripts/llama_server_noamx.py mean-pools its token states
(without pooling the server returns one vector per token). Measured by hand: identical texts cosine 1.0, a
paraphrase about 0.95, unrelated sentences about 0.6-0.7. Only "identical scores above unrelated" is asserted;
the paraphrase's score is reported.
"""

from __future__ import annotations

import json
import math
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from evaltrace._internal import semconv as sc
from evaltrace.evaluators import AnswerCorrectness, Judge, SemanticSimilarity, SemanticSimilaritySentences, cosine
from evaltrace.evaluators._base import passes
from evaltrace.schema import EvalCase, ExpectedBehavior, Trace, TraceOutput

from .conftest import JUDGE_MAX_TOKENS, MODEL, CountingEmbedder, CountingJudge, ServerCalls, counting_embedder
from .report import OUTCOMES
from .test_instrumented_app import configured
from .test_judge_real_model import check_judge_record, check_result, qa_trace

pytestmark = pytest.mark.e2e_llm

PARIS = "The capital of France is Paris."
PARAPHRASE = "Paris is the capital city of France."
UNRELATED = "Bananas are rich in potassium."


def answer_trace(answer: str) -> Trace:
    return qa_trace().model_copy(update={"output": TraceOutput(final_answer=answer)})


def expecting(answer: str) -> EvalCase:
    return EvalCase(id="capital", expected=ExpectedBehavior(facts={"expected_answer": answer}))


async def test_openai_embedder_returns_one_vector_per_text_of_one_dimension(
    embedder: CountingEmbedder, embed_base_url: str
) -> None:
    vectors = await embedder.embedder([PARIS, UNRELATED, "hi"])
    assert len(vectors) == 3 and len(embedder.calls) == 1
    dimension = len(vectors[0])
    assert dimension > 1 and all(len(v) == dimension for v in vectors)
    assert all(isinstance(x, float) and math.isfinite(x) for v in vectors for x in v)
    (usage,) = embedder.calls.usage
    assert usage is not None and usage["vectors"] == 3
    assert usage["prompt_tokens"] == usage["total_tokens"] > 0  # the server reports input tokens only
    # Seen texts come from the cache: only the new one reaches the server.
    again = await embedder.embedder([UNRELATED, PARIS, PARAPHRASE])
    assert len(embedder.calls) == 2 and (embedder.calls.usage[1] or {}).get("vectors") == 1
    assert again[:2] == [vectors[1], vectors[0]] and len(again[2]) == dimension
    # A second embedder (empty cache) gets the same vector from the server: embeddings are deterministic.
    other = counting_embedder(embed_base_url)
    try:
        (same,) = await other.embedder([PARIS])
    finally:
        await other.embedder.aclose()
    assert len(other.calls) == 1 and cosine(same, vectors[0]) == pytest.approx(1.0, abs=1e-6)
    OUTCOMES.append(f"embeddings: dimension {dimension}, {usage['prompt_tokens']} input tokens for 3 texts")


async def test_semantic_similarity_ranks_identical_above_unrelated(embedder: CountingEmbedder) -> None:
    evaluator = SemanticSimilarity(embedder.embedder)
    scores: dict[str, float] = {}
    for label, answer in (("identical", PARIS), ("paraphrase", PARAPHRASE), ("unrelated", UNRELATED)):
        result = await evaluator.evaluate(answer_trace(answer), expecting(PARIS))
        assert result.status == "completed" and result.error is None, result
        assert isinstance(result.score, float) and -1.0 <= result.score <= 1.0
        assert result.passed is passes(result.score, evaluator.threshold, evaluator.direction)
        assert result.detail["embedding_model"] == MODEL
        scores[label] = result.score
    assert scores["identical"] == pytest.approx(1.0, abs=1e-6)
    assert scores["unrelated"] < scores["identical"] - 0.05
    OUTCOMES.append(
        "semantic_similarity vs the expected answer: " + ", ".join(f"{k} {v:.2f}" for k, v in scores.items())
    )


async def test_semantic_similarity_sentences(embedder: CountingEmbedder) -> None:
    answer = f"{PARIS} {UNRELATED}"
    result = await SemanticSimilaritySentences(embedder.embedder).evaluate(answer_trace(answer), expecting(PARIS))
    assert result.status == "completed", result
    per_sentence = result.detail["per_sentence"]
    assert len(per_sentence) == 2 and per_sentence[0] == pytest.approx(1.0, abs=1e-6)
    assert result.detail["min"] == per_sentence[1] < per_sentence[0]
    assert result.score == pytest.approx(sum(per_sentence) / 2)
    OUTCOMES.append(f"semantic_similarity_sentences: per sentence {[round(s, 2) for s in per_sentence]}")


# The model's answer_correctness replies usually lack the "FP"/"FN" lists; llama-cpp-python's server accepts a
# JSON schema in response_format and constrains decoding to it, which gives the evaluator replies it can parse.
_STATEMENTS = {
    "type": "array",
    "items": {
        "type": "object",
        "properties": {"statement": {"type": "string"}, "reason": {"type": "string"}},
        "required": ["statement", "reason"],
    },
}
_TP_FP_FN = {
    "type": "object",
    "properties": dict.fromkeys(("TP", "FP", "FN"), _STATEMENTS),
    "required": ["TP", "FP", "FN"],
}


class SchemaConstrained(httpx.AsyncBaseTransport):
    """Adds the TP/FP/FN schema to each chat completion request, as a llama-cpp-python user may."""

    def __init__(self) -> None:
        self.inner = httpx.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/chat/completions"):
            body = json.loads(request.content)
            body["response_format"] = {"type": "json_object", "schema": _TP_FP_FN}
            headers = {k: v for k, v in request.headers.items() if k.lower() != "content-length"}
            request = httpx.Request(request.method, request.url, headers=headers, json=body)
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


@pytest.fixture
async def constrained_judge(base_url: str) -> AsyncIterator[CountingJudge]:
    calls = ServerCalls()

    async def record(response: httpx.Response) -> None:
        if response.request.url.path.endswith("/chat/completions"):
            await response.aread()
            calls.usage.append(json.loads(response.content).get("usage"))

    client = httpx.AsyncClient(transport=SchemaConstrained(), event_hooks={"response": [record]}, timeout=300.0)
    judge = Judge(
        MODEL, base_url=base_url, api_key="none", http_client=client, max_tokens=JUDGE_MAX_TOKENS, max_retries=0
    )
    try:
        yield CountingJudge(judge, calls)
    finally:
        await judge.aclose()


def check_both_parts(result: Any, vectors: list[list[float]]) -> tuple[float, float]:
    """A completed answer_correctness: the judge's F1 and the embedder's similarity, both in detail, combined."""
    detail = result.detail
    assert result.status == "completed" and result.error is None, result
    tp, fp, fn = detail["tp"], detail["fp"], detail["fn"]
    assert [len(detail["statements"][k]) for k in ("TP", "FP", "FN")] == [tp, fp, fn]
    f1 = tp / (tp + 0.5 * (fp + fn)) if tp + fp + fn else 0.0
    assert detail["f1"] == pytest.approx(f1)
    assert detail["similarity"] == pytest.approx(cosine(*vectors))  # what the real embedder returns
    assert detail["weights"] == [0.75, 0.25] and detail["embedding_model"] == MODEL
    assert result.score == pytest.approx(0.75 * detail["f1"] + 0.25 * detail["similarity"])
    assert result.passed is passes(result.score, 0.75, "higher")
    return detail["f1"], detail["similarity"]


async def test_answer_correctness_with_a_real_judge_and_embedder(
    judge: CountingJudge, embedder: CountingEmbedder
) -> None:
    evaluator = AnswerCorrectness(judge.judge, embedder=embedder.embedder)
    result = await evaluator.evaluate(answer_trace(PARIS), expecting("Paris"))
    line = check_result(evaluator, result, judge.calls.usage)  # completed, or failed cleanly with the raw replies
    if result.status == "completed":
        f1, similarity = check_both_parts(result, await embedder.embedder([PARIS, "Paris"]))
        line += f" (F1 {f1:.2f}, similarity {similarity:.2f})"
    else:
        assert len(embedder.calls) == 0  # the similarity part is only computed for a parsed judgement
    OUTCOMES.append(f"answer_correctness, free reply -> {line}")


async def test_answer_correctness_schema_constrained_records_both_parts(
    constrained_judge: CountingJudge, embedder: CountingEmbedder
) -> None:
    evaluator = AnswerCorrectness(constrained_judge.judge, embedder=embedder.embedder)
    result = await evaluator.evaluate(answer_trace(PARIS), expecting("Paris"))
    check_judge_record(result.detail["judge"], constrained_judge.calls.usage)
    assert len(embedder.calls) == 1 and (embedder.calls.usage[0] or {}).get("vectors") == 2
    f1, similarity = check_both_parts(result, await embedder.embedder([PARIS, "Paris"]))
    assert len(embedder.calls) == 1  # the vectors above came from the embedder's cache
    OUTCOMES.append(
        f"answer_correctness, schema-constrained -> score {result.score:.2f} = 0.75 x F1 {f1:.2f}"
        f" + 0.25 x similarity {similarity:.2f}"
    )


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
async def test_app_embeddings_call_is_traced(embed_base_url: str, is_async: bool, embedder: CountingEmbedder) -> None:
    import openai

    with configured(service_name="e2e-embeddings") as exporter:
        texts = [PARIS, UNRELATED]
        if is_async:
            async with openai.AsyncOpenAI(base_url=embed_base_url, api_key="none", max_retries=0) as client:
                response = await client.embeddings.create(model=MODEL, input=texts)
        else:
            with openai.OpenAI(base_url=embed_base_url, api_key="none", max_retries=0) as client:
                response = client.embeddings.create(model=MODEL, input=texts)
        await embedder.embedder(["the evaluator's own embeddings are never traced"])
        spans = exporter.get_finished_spans()
    assert len(embedder.calls) == 1
    (span,) = spans
    attributes = dict(span.attributes or {})
    assert span.name == f"embeddings {MODEL}"
    assert attributes[sc.GEN_AI_OPERATION_NAME] == sc.OP_EMBEDDINGS
    assert attributes[sc.EVALTRACE_SPAN_KIND] == sc.KIND_EMBEDDING
    assert attributes[sc.GEN_AI_REQUEST_MODEL] == attributes[sc.GEN_AI_RESPONSE_MODEL] == response.model == MODEL
    # The server reports usage{prompt_tokens, total_tokens}: input tokens recorded, no output tokens.
    assert response.usage.prompt_tokens > 0
    assert attributes[sc.GEN_AI_USAGE_INPUT_TOKENS] == response.usage.prompt_tokens
    assert sc.GEN_AI_USAGE_OUTPUT_TOKENS not in attributes
    assert len(response.data) == 2 and len({len(d.embedding) for d in response.data}) == 1
    OUTCOMES.append(f"traced app embeddings ({'async' if is_async else 'sync'}): {attributes}")
