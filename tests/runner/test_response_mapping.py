"""response_mapping: the four provider presets field for field, explicit selectors, and errors, over real HTTP."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from evaltrace.runner import RunConfigError, run_eval
from evaltrace.runner.response_mapping import MappingFailure, ResponseMapping, ResponseMappingError
from evaltrace.schema import ToolCall, Trace

from . import provider_bodies as bodies
from .canned_server import CannedServer, serve
from .conftest import Project

CASE = [{"id": "c1", "input": {"question": "q"}}]


@pytest.fixture
def provider() -> Iterator[CannedServer]:
    served: dict[str, Any] = {f"/openai/{k}": v for k, v in bodies.openai_bodies().items()}
    served |= {
        "/anthropic/tools": bodies.ANTHROPIC_THINKING_TOOL_USE,
        "/anthropic/answer": bodies.ANTHROPIC_ANSWER,
        "/anthropic/thinking_details": bodies.ANTHROPIC_THINKING_DETAILS,
        "/anthropic/thinking_flat": bodies.ANTHROPIC_THINKING_FLAT,
        "/deepseek/reasoner": bodies.DEEPSEEK_REASONER,
        "/deepseek/r1": bodies.DEEPSEEK_R1_INLINE,
        "/deepseek/tools": bodies.DEEPSEEK_TOOLS,
        "/gemini/rest": bodies.GEMINI_THOUGHTS_TOOL,
        "/gemini/sdk": bodies.GEMINI_SDK_SNAKE_CASE,
        "/text": "<think>plain text reasoning</think>Plain answer.",
    }
    with serve(served) as server:
        yield server


def _variant(name: str, url: str, mapping: dict[str, Any] | None = None, **config: Any) -> dict[str, Any]:
    if mapping is not None:
        config["response_mapping"] = mapping
    return {"name": name, "adapter": "http", "config": {"url": url, **config}}


def _run(project: Project, variants: list[dict[str, Any]], evaluators: list[dict[str, Any]] | None = None) -> Any:
    config: dict[str, Any] = {"name": "mapping", "variants": variants, "concurrency": 4}
    if evaluators:
        config["evaluators"] = evaluators
    return run_eval(project.write(config, cases=CASE), runs_dir=project.runs_dir)


def _tokens(trace: Trace) -> tuple[int | None, int | None, int | None]:
    return trace.metrics.token_input, trace.metrics.token_output, trace.metrics.token_thinking


# (variant, url path, preset) -> (final_answer, thinking, tool calls, (input, output, thinking tokens))
SHAPES: dict[str, tuple[str, str, str | None, str | None, list[ToolCall], tuple[int | None, ...]]] = {
    "anthropic_tools": (
        "/anthropic/tools",
        "anthropic",
        "I'll check the current weather in Paris.",
        "The user wants the weather in Paris. I should call get_weather with the city.",
        [
            ToolCall(
                id="toolu_01A09q90qw90lq917835lq9",
                name="get_weather",
                arguments={"location": "Paris, France", "unit": "celsius"},
            )
        ],
        (472 + 128, 197, None),  # cache reads count as input, as in OpenAI's prompt_tokens
    ),
    "anthropic_answer": (
        "/anthropic/answer",
        "anthropic",
        "27 × 453 = 12,231.",
        "27 * 453: 27 * 400 = 10800, 27 * 53 = 1431, total 12231.",
        [],
        (30, 90, None),
    ),
    "anthropic_thinking_details": (
        "/anthropic/thinking_details",
        "anthropic",
        "27 × 453 = 12,231.",
        "27 * 453: 27 * 400 = 10800, 27 * 53 = 1431, total 12231.",
        [],
        (30, 90, 61),  # the thinking count is inside output_tokens: never added to it
    ),
    "anthropic_thinking_flat": (
        "/anthropic/thinking_flat",
        "anthropic",
        "27 × 453 = 12,231.",
        "27 * 453: 27 * 400 = 10800, 27 * 53 = 1431, total 12231.",
        [],
        (30, 90, 61),
    ),
    "openai_chat": ("/openai/chat", "openai", "This is a test.", None, [], (12, 5, 0)),
    "openai_chat_tools": (
        "/openai/chat_tools",
        "openai",
        None,
        None,
        [
            ToolCall(
                id="call_eqbDFUdPqay2WjsSzZEiAn0U", name="get_current_weather", arguments={"location": "Seattle, WA"}
            ),
            ToolCall(
                id="call_tn3sgasg6GaftTdancBYJNJN",
                name="get_current_weather",
                arguments={"location": "San Francisco, CA"},
            ),
        ],
        (75, 51, 0),
    ),
    "openai_responses": ("/openai/responses", "openai", "TRANSPOSE", None, [], (44, 288, 9)),
    "openai_responses_summary": (
        "/openai/responses_summary",
        "openai",
        "TRANSPOSE",
        "**Transposing rows**\n\nSplit the rows, then emit each column.",
        [],
        (44, 288, 9),
    ),
    "openai_responses_tools": (
        "/openai/responses_tools",
        "openai",
        None,
        None,
        [
            ToolCall(
                id="call_90uO5LcGP5vTBTCrjyhYtWsA", name="get_current_weather", arguments={"location": "Seattle, WA"}
            )
        ],
        (72, 8, 0),
    ),
    "deepseek_reasoner": (
        "/deepseek/reasoner",
        "deepseek",
        "9.8 is greater than 9.11.",
        "Compare 9.11 and 9.8: 9.8 = 9.80, and 0.80 > 0.11, so 9.8 is greater.",
        [],
        (18, 420, 376),
    ),
    "deepseek_r1_inline": (
        "/deepseek/r1",
        "deepseek",
        "Paris.",
        "The user asks for the capital of France. That is Paris.",
        [],
        (12, 25, None),
    ),
    "deepseek_tools": (
        "/deepseek/tools",
        "deepseek",
        "",
        None,
        [ToolCall(id="call_0_8b2c", name="get_weather", arguments={"location": "Hangzhou"})],
        (120, 20, None),
    ),
    "gemini_rest": (
        "/gemini/rest",
        "gemini",
        "Let me look that up. One moment.",
        "**Finding the weather**\n\nThe user asks about Paris; the get_weather tool answers that.",
        [ToolCall(id="fc-1", name="get_weather", arguments={"location": "Paris"})],
        (58, 21 + 102, 102),  # candidatesTokenCount leaves the thoughts out; evaltrace's output count holds them
    ),
    "gemini_sdk": (
        "/gemini/sdk",
        "gemini",
        "Take the train.",
        "Weighing both options before answering.",
        [ToolCall(name="book_ticket", arguments={"mode": "train"})],
        (40, 9 + 55, 55),
    ),
}


def test_presets_map_every_provider_shape(project: Project, provider: CannedServer) -> None:
    variants = [
        _variant(name, f"{provider.url}{path}", {"preset": preset}) for name, (path, preset, *_) in SHAPES.items()
    ]
    outcome = _run(project, variants)
    traces = {t.variant_name: t for t in outcome.traces}
    responses_text = bodies.openai_bodies()["responses"]["output"][1]["content"][0]["text"]
    for name, (_, _, answer, thinking, calls, tokens) in SHAPES.items():
        trace = traces[name]
        assert trace.error is None, name
        expected_answer = responses_text if answer == "TRANSPOSE" else answer
        assert trace.output.final_answer == expected_answer, name
        assert trace.output.thinking == thinking, name
        assert trace.tool_calls == calls, name
        assert _tokens(trace) == tokens, name
        assert trace.output.structured is None, name  # the provider's envelope is not the system's structured output
        if thinking is not None and expected_answer:
            assert thinking not in expected_answer and "<think>" not in expected_answer
        # The answer, reasoning and calls become the assistant's messages (one tool call per message).
        assistant = [m for m in trace.messages if m.role == "assistant"]
        assert [m.tool_call for m in assistant if m.tool_call] == calls, name
        if expected_answer:
            assert assistant[0].content == expected_answer and assistant[0].thinking == thinking, name


def test_full_run_with_anthropic_preset_and_field_evaluators(project: Project, provider: CannedServer) -> None:
    outcome = _run(
        project,
        [_variant("claude", f"{provider.url}/anthropic/answer", {"preset": "anthropic"})],
        evaluators=[
            {"name": "contains_text", "args": ["12,231"], "as": "answer_has_result"},
            {"name": "not_contains", "args": ["27 * 400"], "as": "no_reasoning_in_answer"},
            {"name": "contains_text", "args": ["27 * 400"], "field": "output.thinking", "as": "reasoning_shown"},
            {"name": "contains_text", "args": ["x"], "field": "output.structured.verdict", "as": "no_structured"},
        ],
    )
    results = {r.evaluator: r for r in outcome.results}
    assert results["answer_has_result"].passed
    assert results["no_reasoning_in_answer"].passed
    assert results["reasoning_shown"].passed
    skipped = results["no_structured"]
    assert skipped.status == "skipped" and not skipped.passed and "output.structured.verdict" in skipped.reason
    (variant,) = outcome.summary.variants
    assert variant.pass_rate == 1.0
    # What traces.jsonl holds is what the evaluators saw.
    stored = [Trace.model_validate_json(line) for line in (outcome.run.path / "traces.jsonl").read_text().splitlines()]
    assert stored[0].output.thinking == "27 * 453: 27 * 400 = 10800, 27 * 53 = 1431, total 12231."
    assert stored[0].metrics.token_output == 90


def test_explicit_selectors_override_the_preset_and_add_custom_metrics(
    project: Project, provider: CannedServer
) -> None:
    mapping = {
        "preset": "openai",
        "final_answer": "$.model",  # replaces the preset's selector for this field only
        "structured": "$.usage",
        "cost_usd": "$.usage.total_tokens",
        "custom": {"fingerprint": "$.system_fingerprint", "finish": "$.choices[*].finish_reason", "none": "$.nope"},
    }
    outcome = _run(project, [_variant("v", f"{provider.url}/openai/chat", mapping)])
    (trace,) = outcome.traces
    assert trace.error is None
    assert trace.output.final_answer == "gpt-4o-mini-2024-07-18"
    assert trace.output.structured is not None and trace.output.structured["total_tokens"] == 17
    assert _tokens(trace) == (12, 5, 0)  # still the preset's
    assert trace.metrics.cost_usd == 17.0
    assert trace.metrics.custom == {"fingerprint": "fp_0ba0d124f1", "finish": "stop"}


def test_mapping_without_preset_and_text_bodies(project: Project, provider: CannedServer) -> None:
    mapping = {
        "final_answer": '$.content[?@.type == "text"].text',
        "thinking": '$.content[?@.type == "thinking"].thinking',
        "token_input": "$.usage.input_tokens",
    }
    outcome = _run(
        project,
        [
            _variant("custom", f"{provider.url}/anthropic/answer", mapping),
            # A text body has nothing to select from: it is the answer, its inline reasoning split off.
            _variant("text", f"{provider.url}/text", {"preset": "openai"}),
            # Only what is mapped is filled: no answer guessing once a mapping is given.
            _variant("tokens_only", f"{provider.url}/openai/chat", {"token_output": "$.usage.completion_tokens"}),
        ],
    )
    traces = {t.variant_name: t for t in outcome.traces}
    assert traces["custom"].output.final_answer == "27 × 453 = 12,231."
    assert traces["custom"].output.thinking is not None and "10800" in traces["custom"].output.thinking
    assert _tokens(traces["custom"]) == (30, None, None)
    assert traces["text"].output.final_answer == "Plain answer."
    assert traces["text"].output.thinking == "plain text reasoning"
    assert traces["tokens_only"].output.final_answer is None
    assert _tokens(traces["tokens_only"]) == (None, 5, None)
    # token_* selectors are not secrets: config.yaml keeps them (and so the config hash sees them change).
    config_text = (outcome.run.path / "config.yaml").read_text()
    assert "$.usage.input_tokens" in config_text and "$.usage.completion_tokens" in config_text


def test_a_match_of_the_wrong_type_is_an_adapter_error(project: Project, provider: CannedServer) -> None:
    outcome = _run(
        project,
        [
            _variant("bad_tokens", f"{provider.url}/openai/chat", {"preset": "openai", "token_input": "$.model"}),
            _variant("bad_answer", f"{provider.url}/openai/chat", {"final_answer": "$.usage"}),
        ],
        evaluators=[{"name": "contains_text", "args": ["test"]}],
    )
    traces = {t.variant_name: t for t in outcome.traces}
    error = traces["bad_tokens"].error
    assert error is not None and error.type == "adapter_error"
    assert error.message == (
        "response_mapping.token_input: selector '$.model' matched \"gpt-4o-mini-2024-07-18\", expected an integer"
    )
    bad_answer = traces["bad_answer"].error
    assert bad_answer is not None and bad_answer.type == "adapter_error"
    assert (
        "response_mapping.final_answer: selector '$.usage'" in bad_answer.message
        and "expected text" in bad_answer.message
    )
    assert all(v.pass_rate == 0.0 for v in outcome.summary.variants)


@pytest.mark.parametrize(
    ("mapping", "key", "problem"),
    [
        ({"preset": "mistral"}, "response_mapping.preset", "unknown preset 'mistral'"),
        ({"final_answer": "$.choices[0"}, "response_mapping.final_answer", "invalid JSONPath '$.choices[0'"),
        ({"custom": {"n": 3}}, "response_mapping.custom.n", "expected a JSONPath selector"),
        ("openai", "response_mapping", "expected a mapping"),
    ],
)
def test_bad_mappings_stop_the_run_before_any_call(
    project: Project, provider: CannedServer, mapping: Any, key: str, problem: str
) -> None:
    path = project.write({"name": "bad", "variants": [_variant("v", f"{provider.url}/openai/chat", mapping)]}, CASE)
    with pytest.raises(RunConfigError) as raised:
        run_eval(path, runs_dir=project.runs_dir)
    message = str(raised.value)
    assert f"{key}:" in message and problem in message
    assert provider.requests == []


# --- the mapping on its own (pure) -------------------------------------------------------------------


def test_selector_semantics() -> None:
    body = {
        "parts": [{"t": "a"}, {"t": None}, {"t": "b"}],
        "steps": [{"cost": 0.5, "tokens": 3}, {"cost": 0.25, "tokens": 4.0}],
        "obj": {"k": 1},
        "calls": [
            {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "f", "arguments": "[1, 2]"},
            {"name": "g", "arguments": "not json"},
            {"name": "h", "input": {"x": 1}},
        ],
    }
    mapped = ResponseMapping.from_config(
        {
            "final_answer": "$.parts[*].t",
            "thinking": "$.parts[*].t",
            "token_input": "$.steps[*].tokens",
            "cost_usd": "$.steps[*].cost",
            "structured": "$.obj",
            "tool_calls": "$.calls",
        }
    ).apply(body)
    assert mapped.final_answer == "ab"  # nulls skipped, fragments joined as they are
    assert mapped.thinking == "a\n\nb"  # separate reasoning blocks
    assert mapped.metrics["token_input"] == 7 and mapped.metrics["cost_usd"] == 0.75
    assert mapped.structured == {"k": 1}
    assert mapped.tool_calls == [
        ToolCall(id="call_1", name="f", arguments={"_raw": "[1, 2]"}),
        ToolCall(name="g", arguments={"_raw": "not json"}),
        ToolCall(name="h", arguments={"x": 1}),
    ]


@pytest.mark.parametrize(
    ("config", "body", "message"),
    [
        ({"token_output": "$.n"}, {"n": 1.5}, "expected an integer"),
        ({"token_output": "$.n"}, {"n": True}, "expected an integer"),
        ({"cost_usd": "$.n"}, {"n": "0.1"}, "expected a number"),
        ({"structured": "$.a[*]"}, {"a": [{}, {}]}, "expected one JSON object"),
        ({"structured": "$.a"}, {"a": [1]}, "expected one JSON object"),
        ({"tool_calls": "$.a[*]"}, {"a": [{"arguments": "{}"}]}, "expected a tool call object with a name"),
        ({"thinking": "$.a"}, {"a": {"text": "x"}}, "expected text"),
    ],
)
def test_wrong_types_name_field_and_selector(config: dict[str, str], body: Any, message: str) -> None:
    (field, selector), *_ = config.items()
    with pytest.raises(MappingFailure, match=message) as raised:
        ResponseMapping.from_config(config).apply(body)
    assert str(raised.value).startswith(f"response_mapping.{field}: selector {selector!r} matched ")


def test_unknown_key_and_explicit_token_output_keeps_gemini_counts_as_written() -> None:
    with pytest.raises(ResponseMappingError) as raised:
        ResponseMapping.from_config({"final_anwser": "$.a"})
    assert raised.value.key == "final_anwser" and "unknown key" in raised.value.problem
    explicit = ResponseMapping.from_config({"preset": "gemini", "token_output": "$.usageMetadata.candidatesTokenCount"})
    assert explicit.apply(bodies.GEMINI_THOUGHTS_TOOL).metrics["token_output"] == 21


def test_presets_price_the_call_from_model_and_tokens_unless_the_body_or_a_selector_gives_the_cost() -> None:
    """Providers send no cost: a preset prices the call (cache reads and writes at their own rates)."""
    from evaltrace import pricing

    body = {
        "model": "claude-sonnet-4-5",
        "content": [{"type": "thinking", "thinking": "t", "signature": "s"}, {"type": "text", "text": "a"}],
        "usage": {
            "input_tokens": 1000,
            "cache_read_input_tokens": 4000,
            "cache_creation_input_tokens": 500,
            "output_tokens": 2000,
        },
    }
    pricing.set_model_price("claude-sonnet-4-5", input=3.0, output=15.0, cached_input=0.3, cache_write=3.75)
    try:
        mapped = ResponseMapping.from_config({"preset": "anthropic"}).apply(body)
        expected = (1000 * 3.0 + 4000 * 0.3 + 500 * 3.75 + 2000 * 15.0) / 1e6
        assert mapped.metrics["token_input"] == 5500
        assert mapped.metrics["cost_usd"] == pytest.approx(expected)
        # A cost_usd selector wins over the price table, and an unknown model leaves the cost unknown.
        own = ResponseMapping.from_config({"preset": "anthropic", "cost_usd": "$.usage.output_tokens"}).apply(body)
        assert own.metrics["cost_usd"] == 2000.0
        unknown = ResponseMapping.from_config({"preset": "anthropic"}).apply({**body, "model": "no-such-model-x"})
        assert "cost_usd" not in unknown.metrics
    finally:
        pricing.clear_model_prices()


def test_openai_preset_prices_reasoning_tokens_on_a_recorded_body() -> None:
    from evaltrace import pricing

    body = {
        "model": "o4-mini-2025-04-16",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "4"}, "finish_reason": "stop"}],
        "usage": {
            "prompt_tokens": 100,
            "completion_tokens": 300,
            "completion_tokens_details": {"reasoning_tokens": 256},
            "prompt_tokens_details": {"cached_tokens": 0},
        },
    }
    mapped = ResponseMapping.from_config({"preset": "openai"}).apply(body)
    cost = pricing.cost_of("o4-mini-2025-04-16", input_tokens=100, output_tokens=300, reasoning_tokens=256)
    assert cost is not None
    assert mapped.metrics["cost_usd"] == pytest.approx(cost.total_usd)
    assert mapped.metrics["cost_thinking_usd"] == pytest.approx(cost.reasoning_usd) and cost.reasoning_usd > 0
