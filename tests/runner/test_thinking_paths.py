"""Reasoning never lands in final_answer, whatever the adapter: python str/dict, http text/json, LLM span content."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Iterator
from typing import Any

import pytest

from evaltrace._internal import settings
from evaltrace._internal.thinking import ThinkSplit, split_thinking
from evaltrace.runner import run_eval
from evaltrace.schema import Trace

from .canned_server import CannedServer, serve
from .conftest import Project

pytest.importorskip("openai")

SUT = """
import openai

import evaltrace


def multi_block(question):
    return "<think>first thought</think>Answer A<think>second thought</think> continued."


def template_prefix(question):
    # The chat template put <think> in the prompt: the model's text starts inside the reasoning.
    return "reasoning begun in the prompt</think>\\n\\nAnswer B"


def cut_off(question):
    return "Answer C so far<think>ran out of tokens while thi"


def dict_inline(question):
    return {"answer": "<think>inline D</think>Answer D", "reasoning": "stated D"}


def dict_thinking_key(question):
    return {"final_answer": "Answer E", "thinking": "stated E", "score": 1}


def _chat(base_url):
    client = openai.OpenAI(api_key="test", base_url=base_url, max_retries=0)
    reply = client.chat.completions.create(model="r1", messages=[{"role": "user", "content": "capital?"}])
    return reply.choices[0].message.content


@evaltrace.agent
def llm_then_dict(question, base_url):
    _chat(base_url)
    return {"status": "done"}


@evaltrace.agent
def llm_raw_text(question, base_url):
    return _chat(base_url)
"""

R1_COMPLETION = {
    "id": "chatcmpl-r1",
    "object": "chat.completion",
    "created": 1737525700,
    "model": "r1",
    "choices": [
        {
            "index": 0,
            "finish_reason": "stop",
            "message": {"role": "assistant", "content": "<think>\nFrance's capital is Paris.\n</think>\n\nParis."},
        }
    ],
    "usage": {"prompt_tokens": 9, "completion_tokens": 14, "total_tokens": 23},
}


@pytest.fixture
def provider() -> Iterator[CannedServer]:
    with serve(
        {
            "/v1/chat/completions": R1_COMPLETION,
            "/text": "<think>http text reasoning</think>\nAnswer F",
            "/json": {"answer": "<think>http json inline</think>Answer G", "reasoning_content": "stated G"},
        }
    ) as server:
        yield server


@pytest.fixture
def instrumented() -> Iterator[None]:
    from evaltrace.instrumentation.openai import OpenAIInstrumentor

    previous = settings.replace(settings.CaptureSettings(capture_content=True))
    instrumentor = OpenAIInstrumentor()
    instrumentor.instrument()
    yield
    instrumentor.uninstrument()
    settings.replace(previous)


def _function(project: Project, name: str, **kwargs: Any) -> dict[str, Any]:
    config: dict[str, Any] = {"target": f"{project.module}_think:{name}"}
    if kwargs:
        config["kwargs"] = kwargs
    return {"name": name, "adapter": "python_function", "config": config}


@pytest.mark.usefixtures("instrumented")
def test_thinking_never_in_final_answer_on_any_adapter(project: Project, provider: CannedServer) -> None:
    (project.root / f"{project.module}_think.py").write_text(textwrap.dedent(SUT))
    base_url = f"{provider.url}/v1"
    variants = [
        _function(project, "multi_block"),
        _function(project, "template_prefix"),
        _function(project, "cut_off"),
        _function(project, "dict_inline"),
        _function(project, "dict_thinking_key"),
        _function(project, "llm_then_dict", base_url=base_url),
        _function(project, "llm_raw_text", base_url=base_url),
        {"name": "http_text", "adapter": "http", "config": {"url": f"{provider.url}/text"}},
        {"name": "http_json", "adapter": "http", "config": {"url": f"{provider.url}/json"}},
    ]
    path = project.write(
        {"name": "think", "variants": variants, "evaluators": [{"name": "not_contains", "args": ["<think>"]}]},
        cases=[{"id": "c1", "input": {"question": "q"}}],
    )
    try:
        outcome = run_eval(path, runs_dir=project.runs_dir)
    finally:
        sys.modules.pop(f"{project.module}_think", None)
    traces: dict[str, Trace] = {t.variant_name: t for t in outcome.traces}
    expected = {
        "multi_block": ("Answer A continued.", "first thought\n\nsecond thought"),
        "template_prefix": ("Answer B", "reasoning begun in the prompt"),
        "cut_off": ("Answer C so far", "ran out of tokens while thi"),
        "dict_inline": ("Answer D", "stated D\n\ninline D"),
        "dict_thinking_key": ("Answer E", "stated E"),
        "llm_then_dict": ("Paris.", "France's capital is Paris."),
        "llm_raw_text": ("Paris.", "France's capital is Paris."),  # once, though both the span and the return had it
        "http_text": ("Answer F", "http text reasoning"),
        "http_json": ("Answer G", "stated G\n\nhttp json inline"),
    }
    for name, (answer, thinking) in expected.items():
        trace = traces[name]
        assert trace.error is None, (name, trace.error)
        assert (trace.output.final_answer, trace.output.thinking) == (answer, thinking), name
        assert "<think>" not in (trace.output.final_answer or "") and "</think>" not in (
            trace.output.final_answer or ""
        )
    for name in ("llm_then_dict", "llm_raw_text"):
        assistant = [m for m in traces[name].messages if m.role == "assistant"]
        assert [(m.content, m.thinking) for m in assistant] == [("Paris.", "France's capital is Paris.")], name
    assert traces["dict_thinking_key"].output.structured == {
        "final_answer": "Answer E",
        "thinking": "stated E",
        "score": 1,
    }
    assert all(v.pass_rate == 1.0 for v in outcome.summary.variants)


@pytest.mark.parametrize(
    ("text", "answer", "thoughts"),
    [
        ("no reasoning here", "no reasoning here", ()),
        ("  spaced  ", "  spaced  ", ()),  # untouched when there is nothing to take out
        ("<think>a</think>\n\nB", "B", ("a",)),
        ("<think>a</think>B<think>c</think>D", "BD", ("a", "c")),
        ("<think></think>B", "B", ()),
        ("a</think>B", "B", ("a",)),
        ("<think>cut", "", ("cut",)),
        ("B<think>cut", "B", ("cut",)),
        ("<think>a</think>B<think>cut", "B", ("a", "cut")),
    ],
)
def test_split_thinking(text: str, answer: str, thoughts: tuple[str, ...]) -> None:
    assert split_thinking(text) == ThinkSplit(answer, thoughts)
