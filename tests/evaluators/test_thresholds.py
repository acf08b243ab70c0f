"""Every catalogue evaluator takes ``threshold``, in Python and in eval.yaml, and applies it (issue 29).

Each evaluator's threshold has the catalogue's semantics (docs/evaluators.md, "Threshold"): for a score it is the
per-case bar in the evaluator's direction; for a pass/fail evaluator (``detail["threshold_of"] == "pass_rate"``)
it is the share of cases that must pass over a run, which :func:`evaltrace.evaluators.run_insights` reports as a
problem when the run falls short of it.
"""

from __future__ import annotations

import inspect
import json
from pathlib import Path
from typing import Any

import pytest

from evaltrace.evaluators import (
    BYOP,
    CATALOGUE,
    AgentRubric,
    ContactInfo,
    ContainsText,
    Cost,
    EncodingGuardrail,
    ExactMatch,
    JsonSchema,
    Judge,
    LanguageMismatch,
    Latency,
    Length,
    NoPII,
    Regex,
    RepeatedUserQuestion,
    SensitiveData,
    SessionBudget,
    StepBudget,
    TextMatching,
    TokenBudget,
    ToolLoop,
    ToolSequence,
    TurnCount,
    create_evaluator,
    run_insights,
)
from evaltrace.runner.config_models import JudgeConfig
from evaltrace.runner.evaluator_entries import build_evaluators
from evaltrace.schema import Conversation, EvaluationResult, Rubric, RubricDimension, Trace

from .factories import build_case, build_trace
from .fake_openai import FakeOpenAI

DEAD_JUDGE = "http://127.0.0.1:9/v1"
"""Never called: every evaluation below lacks an input the judge would need, so it is skipped first."""
THRESHOLD = 0.4


def flat_embedder(texts: list[str]) -> list[list[float]]:
    return [[1.0, 0.0] for _ in texts]


# Constructor arguments an evaluator cannot be built without (everything else has a default).
REQUIRED: dict[str, tuple[tuple[Any, ...], dict[str, Any]]] = {
    "byop": (("Is {actual_answer} polite? Answer true or false.",), {}),
    "cost": ((0.01,), {}),
    "latency": ((1000,), {}),
    "llm_judge": (("Answers the question",), {}),
    "regex": (("Paris",), {}),
    "session_budget": ((), {"max_tokens": 1000}),
    "step_budget": ((), {"max_tool_calls": 3}),
    "token_budget": ((), {"max_total": 1000}),
    "turn_count": ((), {"max_turns": 5}),
}


def _python_options(cls: type[Any], judge: Judge) -> dict[str, Any]:
    parameters = inspect.signature(cls.__init__).parameters
    options: dict[str, Any] = {}
    if "judge" in parameters:
        options["judge"] = judge
    if "embedder" in parameters:
        options["embedder"] = flat_embedder
    return options


def _subject(evaluator: Any) -> Trace | Conversation:
    """Something the evaluator cannot judge for lack of input: an answerless trace, or a turnless conversation."""
    if "trace" in getattr(evaluator, "subjects", ("trace",)):
        return build_trace(None)
    return Conversation(session_id="s1")


async def _result(evaluator: Any) -> EvaluationResult:
    result = evaluator.evaluate(_subject(evaluator), None)
    return await result if inspect.isawaitable(result) else result


@pytest.mark.parametrize("name", sorted(CATALOGUE))
async def test_every_catalogue_evaluator_takes_threshold_in_python(name: str) -> None:
    judge = Judge("judge-model", base_url=DEAD_JUDGE, api_key="test-key", max_retries=0)
    try:
        args, options = REQUIRED.get(name, ((), {}))
        options = {**options, **_python_options(CATALOGUE[name], judge)}
        evaluator = create_evaluator(name, *args, threshold=THRESHOLD, **options)
        assert evaluator.threshold == pytest.approx(THRESHOLD)
        # The threshold reaches every result, where run insights read it.
        result = await _result(evaluator)
        assert result.detail["threshold"] == pytest.approx(THRESHOLD), result
    finally:
        await judge.aclose()


@pytest.mark.parametrize("name", sorted(CATALOGUE))
def test_every_catalogue_evaluator_takes_threshold_in_eval_yaml(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Embedding evaluators without `embedder:` get the shared API embedder, configured from the environment.
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    monkeypatch.setenv("OPENAI_BASE_URL", DEAD_JUDGE)
    args, options = REQUIRED.get(name, ((), {}))
    entry: dict[str, Any] = {"name": f"my_{name}", "type": name, "threshold": THRESHOLD, **options}
    if args:
        entry["args"] = list(args)
    judge = JudgeConfig(model="judge-model", base_url=DEAD_JUDGE, api_key="test-key")
    (built,) = build_evaluators([entry], tmp_path / "eval.yaml", judge=judge)
    assert built.evaluator.threshold == pytest.approx(THRESHOLD)


@pytest.mark.parametrize("threshold", [-0.1, 1.5, "high", True])
@pytest.mark.parametrize("cls", [JsonSchema, NoPII, Regex, Length, TurnCount, ToolLoop, Cost])
def test_a_threshold_outside_the_metric_range_is_refused(cls: type[Any], threshold: Any) -> None:
    args = {Regex: ("x",), Cost: (0.1,)}.get(cls, ())
    kwargs = {TurnCount: {"max_turns": 3}}.get(cls, {})
    with pytest.raises(ValueError, match="threshold must be"):
        cls(*args, threshold=threshold, **kwargs)


# --- pass/fail evaluators: the threshold is the run's pass rate -------------------------------------------------


def _problems(results: list[EvaluationResult]) -> list[str]:
    return run_insights(results).problems


def _over_cases(evaluator: Any, subjects: list[Any], case: Any = None) -> list[EvaluationResult]:
    results = []
    for index, subject in enumerate(subjects):
        result = evaluator.evaluate(subject, case)
        results.append(result.model_copy(update={"case_id": f"c{index}"}))
    return results


SCHEMA = {"type": "object", "required": ["city"], "properties": {"city": {"type": "string"}}}
CLEAN, LEAK = "Call the front desk.", "Mail john.doe@example.com"
PASS_RATE_CASES: dict[str, tuple[Any, list[Any], Any]] = {
    # factory(threshold), four subjects of which three pass, the case
    "json_schema": (
        lambda t: JsonSchema(SCHEMA, **t),
        [build_trace(a) for a in ('{"city": "Paris"}', '{"city": "Rome"}', '{"city": "Oslo"}', "not JSON")],
        None,
    ),
    "pii_leakage": (lambda t: NoPII(**t), [build_trace(a) for a in (CLEAN, CLEAN, CLEAN, LEAK)], None),
    "contact_info": (lambda t: ContactInfo(**t), [build_trace(a) for a in (CLEAN, CLEAN, CLEAN, LEAK)], None),
    "sensitive_data": (
        lambda t: SensitiveData(**t),
        [build_trace(a) for a in (CLEAN, CLEAN, CLEAN, "Card 4111 1111 1111 1111")],
        None,
    ),
    "encoding_guardrail": (
        lambda t: EncodingGuardrail(**t),
        [build_trace(a) for a in ("café", "naïve", "plain", "cafÃ©")],
        None,
    ),
    "text_matching": (
        lambda t: TextMatching(**t),
        [build_trace(a) for a in ("Paris", "paris.", "PARIS", "Rome")],
        build_case(facts={"expected_answer": "Paris"}),
    ),
    "exact_match": (
        lambda t: ExactMatch(**t),
        [build_trace(a) for a in ("Paris", " Paris ", "Paris\n", "Rome")],
        build_case(facts={"expected_answer": "Paris"}),
    ),
}


@pytest.mark.parametrize("name", sorted(PASS_RATE_CASES))
def test_pass_fail_evaluators_apply_the_threshold_to_the_pass_rate(name: str) -> None:
    factory, subjects, case = PASS_RATE_CASES[name]
    lenient = _over_cases(factory({"threshold": 0.5}), subjects, case)
    # Each case keeps its own verdict: the threshold does not move it.
    assert [r.passed for r in lenient] == [True, True, True, False]
    assert all(r.detail["threshold_of"] == "pass_rate" and r.detail["threshold"] == 0.5 for r in lenient)
    assert _problems(lenient) == []  # 3 of 4 passed, the run reaches 0.5
    strict = _over_cases(factory({"threshold": 0.9}), subjects, case)
    assert [r.passed for r in strict] == [True, True, True, False]
    (problem,) = _problems(strict)
    assert problem.startswith(f"{strict[0].evaluator}: average 0.75") and "threshold 0.9" in problem


def test_json_schema_defaults_to_the_catalogues_half_pass_rate() -> None:
    _, subjects, _ = PASS_RATE_CASES["json_schema"]
    results = _over_cases(JsonSchema(SCHEMA), subjects)
    assert results[0].detail["threshold"] == 0.5 and _problems(results) == []
    # Below half valid, the catalogue reports a problem.
    worse = _over_cases(JsonSchema(SCHEMA), [build_trace("{}"), build_trace("x"), build_trace('{"city": "Oslo"}')])
    (problem,) = _problems(worse)
    assert "json_schema: average 0.33" in problem


def _conversation(*said: str) -> Conversation:
    return Conversation.from_traces(
        "s1", [build_trace("ok", question=text, case_id=f"t{i}") for i, text in enumerate(said)]
    )


@pytest.mark.parametrize(
    ("factory", "passing", "failing"),
    [
        (lambda t: TurnCount(max_turns=2, **t), _conversation("one", "two"), _conversation("a", "b", "c")),
        (
            lambda t: RepeatedUserQuestion(**t),
            _conversation("Where is my order number 42?", "Can I change the delivery address?"),
            _conversation("Where is my order number 42?", "Where is my order number 42?"),
        ),
    ],
    ids=["turn_count", "repeated_user_question"],
)
def test_session_checks_apply_the_threshold_to_the_pass_rate(factory: Any, passing: Any, failing: Any) -> None:
    subjects = [passing, passing, passing, failing]
    lenient = _over_cases(factory({"threshold": 0.5}), subjects)
    assert [r.passed for r in lenient] == [True, True, True, False]
    assert lenient[0].detail["threshold_of"] == "pass_rate" and _problems(lenient) == []
    assert len(_problems(_over_cases(factory({"threshold": 0.9}), subjects))) == 1


async def test_byop_applies_the_catalogues_half_pass_rate(fake_openai: FakeOpenAI, judge: Judge) -> None:
    fake_openai.script("true", "true", "true", "false", "true", "true", "true", "false")
    prompt = "Is this polite: {actual_answer}? Answer true or false."
    subjects = [build_trace(f"answer {i}", question="q") for i in range(4)]

    async def over_cases(evaluator: BYOP) -> list[EvaluationResult]:
        return [(await evaluator.evaluate(s)).model_copy(update={"case_id": f"c{i}"}) for i, s in enumerate(subjects)]

    default = await over_cases(BYOP(prompt, judge=judge))
    assert [r.passed for r in default] == [True, True, True, False]
    assert default[0].detail["threshold"] == 0.5 and _problems(default) == []
    strict = await over_cases(BYOP(prompt, judge=judge, threshold=0.9))
    assert [r.passed for r in strict] == [True, True, True, False] and len(_problems(strict)) == 1


async def test_language_mismatch_applies_its_threshold_to_the_pass_rate(fake_openai: FakeOpenAI, judge: Judge) -> None:
    same = json.dumps({"question_language": "en", "answer_language": "en"})
    other = json.dumps({"question_language": "en", "answer_language": "fr"})
    fake_openai.script(same, same, other, other)
    subjects = [build_trace(f"answer {i}", question="Where is it?") for i in range(4)]
    results = [
        (await LanguageMismatch(judge).evaluate(s)).model_copy(update={"case_id": f"c{i}"})
        for i, s in enumerate(subjects)
    ]
    assert [r.passed for r in results] == [True, True, False, False]
    assert results[0].detail["threshold"] == 0.5 and _problems(results) == []  # half is the catalogue's bar


# --- score evaluators: the threshold is the per-case bar ------------------------------------------------------


def _verdicts(evaluator_at: Any, subject: Any, case: Any = None) -> tuple[bool, bool]:
    """(passed at the default threshold, passed at the lenient one)."""
    default, lenient = evaluator_at(None), evaluator_at(0.5)
    return default.evaluate(subject, case).passed, lenient.evaluate(subject, case).passed


def _with(threshold: float | None) -> dict[str, float]:
    return {} if threshold is None else {"threshold": threshold}


LOOPING_CALLS = [("search", {"q": "x"})] * 4 + [("book", {})] * 6
SCORE_CASES: dict[str, tuple[Any, Any, Any]] = {
    # factory(threshold or None), a subject that fails the default threshold and passes 0.5, the case
    "regex": (lambda t: Regex("Paris", "Rome", **_with(t)), build_trace("Paris only"), None),
    "length": (lambda t: Length(min_words=6, **_with(t)), build_trace("Four words right here"), None),
    "tool_loop": (lambda t: ToolLoop(max_repeats=4, **_with(t)), build_trace("ok", tools=LOOPING_CALLS), None),
    "tool_sequence": (
        lambda t: ToolSequence(["search", "book"], mode="exact", **_with(t)),
        build_trace("ok", tools=[("search", {}), ("pay", {})]),
        None,
    ),
}


@pytest.mark.parametrize("name", sorted(SCORE_CASES))
def test_score_evaluators_apply_the_threshold_per_case(name: str) -> None:
    factory, subject, case = SCORE_CASES[name]
    assert _verdicts(factory, subject, case) == (False, True)
    result = factory(0.5).evaluate(subject, case)
    assert result.detail["threshold"] == 0.5 and "threshold_of" not in result.detail


@pytest.mark.parametrize(
    ("factory", "metrics"),
    [
        (lambda t: Latency(200, **_with(t)), {}),  # 100 ms of 200: half the limit
        (lambda t: Cost(0.02, **_with(t)), {"cost_usd": 0.01}),
        (lambda t: TokenBudget(max_total=200, **_with(t)), {"token_input": 60, "token_output": 40}),
        (lambda t: StepBudget(max_wall_ms=200, **_with(t)), {}),
    ],
    ids=["latency", "cost", "token_budget", "step_budget"],
)
def test_budgets_apply_the_threshold_as_the_share_of_the_limit(factory: Any, metrics: dict[str, Any]) -> None:
    subject = build_trace("ok", latency_ms=100, metrics=metrics)
    within = factory(None).evaluate(subject)
    assert within.passed and within.score == pytest.approx(0.5) and within.detail["direction"] == "lower"
    tight = factory(0.4).evaluate(subject)
    assert not tight.passed and tight.detail["threshold"] == 0.4
    assert "within budget, but" in tight.reason and "threshold 40%" in tight.reason


def test_session_budget_applies_the_threshold_as_the_share_of_the_ceiling() -> None:
    turn = {"token_input": 30, "token_output": 20}
    conversation = Conversation.from_traces("s1", [build_trace("ok", question="hi", metrics=turn) for _ in range(2)])
    assert SessionBudget(max_tokens=200).evaluate(conversation).passed  # 100 of 200
    tight = SessionBudget(max_tokens=200, threshold=0.4).evaluate(conversation)
    assert not tight.passed and tight.score == pytest.approx(0.5)


async def test_agent_rubric_threshold_overrides_the_rubrics() -> None:
    rubric = Rubric(name="mentions", dimensions=[RubricDimension(name="mentions", weight=1.0)])
    subject, evaluators = build_trace("alpha"), {"mentions": ContainsText("alpha", "beta", threshold=0.0)}
    default = await AgentRubric(rubric=rubric, evaluators=evaluators).evaluate(subject)
    assert default.score == 0.5 and not default.passed and default.detail["threshold"] == 0.7
    lenient = await AgentRubric(rubric=rubric, evaluators=evaluators, threshold=0.5).evaluate(subject)
    assert lenient.passed and lenient.detail["threshold"] == 0.5
