"""Inline ``<think>`` reasoning in ``invoke_model``'s text-completion bodies, whole and streamed, through real boto3.

DeepSeek-R1's Bedrock prompt template ends the prompt with ``<think>`` (AWS's DeepSeek model-parameter page), so
its ``choices[].text`` holds the reasoning, a lone ``</think>``, then the answer; a distilled reasoning model
imported with Custom Model Import answers in its architecture's text shape (Llama's ``generation``, an
OpenAI-style completion's ``choices[].text``), usually with both tags. Synthetic: no recording holds these bodies;
they are the documented response shapes, served by the replay server on 127.0.0.1 (streams as AWS event-stream
``chunk`` frames that botocore parses).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

boto3 = pytest.importorskip("boto3")

from bedrock_replay import attrs_json, chunk_frame, client, read_stream, synthetic  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402

from cassettes import ReplayServer  # noqa: E402

pytestmark = pytest.mark.usefixtures("bedrock_instrumented")

DEEPSEEK = "us.deepseek.r1-v1:0"
IMPORTED = "arn:aws:bedrock:us-east-1:123456789012:imported-model/k2x9abcd1234"
# AWS's DeepSeek-R1 prompt template: the assistant turn opens the thinking block.
R1_PROMPT = "<｜begin▁of▁sentence｜><｜User｜>Why is the sky blue?<｜Assistant｜><think>\n"
HEADERS = [
    ("Content-Type", "application/json"),
    ("X-Amzn-Bedrock-Input-Token-Count", "11"),
    ("X-Amzn-Bedrock-Output-Token-Count", "7"),
]
METRICS = {"amazon-bedrock-invocationMetrics": {"inputTokenCount": 11, "outputTokenCount": 7}}
THOUGHT = [
    {"type": "reasoning", "content": "Short waves scatter."},
    {"type": "text", "content": "Rayleigh scattering."},
]


def _deepseek(text: str, reason: str | None) -> dict[str, Any]:
    return {"choices": [{"text": text, "stop_reason": reason}]}


def _completion(text: str, reason: str | None) -> dict[str, Any]:
    return {"choices": [{"index": 0, "text": text, "finish_reason": reason}]}


def _llama(text: str, reason: str | None) -> dict[str, Any]:
    return {"generation": text, "prompt_token_count": 11, "generation_token_count": 7, "stop_reason": reason}


# (model id, request body, the family's body of one text and stop reason, the answer's text)
FAMILIES = {
    "deepseek-r1 (the opening tag in the prompt)": (
        DEEPSEEK,
        {"prompt": R1_PROMPT, "max_tokens": 512},
        _deepseek,
        "Short waves scatter.\n</think>\n\nRayleigh scattering.",
    ),
    "an imported model's completion choices": (
        IMPORTED,
        {"prompt": "Why is the sky blue?", "max_tokens": 512},
        _completion,
        "<think>\nShort waves scatter.\n</think>\n\nRayleigh scattering.",
    ),
    "an imported llama's generation": (
        IMPORTED,
        {"prompt": "Why is the sky blue?", "max_gen_len": 512},
        _llama,
        "<think>Short waves scatter.</think>Rayleigh scattering.",
    ),
}


def _parts(exporter: InMemorySpanExporter) -> list[list[dict[str, Any]]]:
    """Each finished span's output parts, in the order the calls ended."""
    return [attrs_json(span, "gen_ai.output.messages")[0]["parts"] for span in exporter.get_finished_spans()]


def _whole_and_streamed(
    model: str,
    request: dict[str, Any] | str | bytes,
    make: Any,
    text: str,
    reason: str | None,
    extra: dict[str, Any] | None = None,
) -> None:
    """The call whole, then streamed; ``extra`` keys go into the whole body and the stream's last chunk."""
    if isinstance(request, dict):
        request = json.dumps(request)
    extra = extra or {}
    with ReplayServer([synthetic("m/invoke", json.dumps({**make(text, reason), **extra}).encode(), HEADERS)]) as server:
        client(server).invoke_model(modelId=model, body=request)
    # Fragments cut inside the tags: the split is made once the stream's text is joined.
    cuts = sorted({c for c in (0, 3, 9, len(text) // 2, len(text) - 12, len(text) - 3, len(text)) if c >= 0})
    fragments = [text[a:b] for a, b in zip(cuts, cuts[1:], strict=False)]
    chunks = [make(f, None) for f in fragments[:-1]] + [{**make(fragments[-1], reason), **extra, **METRICS}]
    body = b"".join(chunk_frame(c) for c in chunks)
    with ReplayServer([synthetic("m/invoke-with-response-stream", body)]) as server:
        read_stream(client(server).invoke_model_with_response_stream(modelId=model, body=request))


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_a_text_bodys_inline_reasoning_is_a_reasoning_part_whole_and_streamed(
    exporter: InMemorySpanExporter, family: str
) -> None:
    model, request, make, text = FAMILIES[family]
    _whole_and_streamed(model, request, make, text, "stop")
    assert _parts(exporter) == [THOUGHT, THOUGHT]


def test_an_answer_cut_off_while_thinking_is_all_reasoning(exporter: InMemorySpanExporter) -> None:
    """``max_tokens`` reached inside the block: nothing was answered, so there is no text part."""
    _whole_and_streamed(DEEPSEEK, {"prompt": R1_PROMPT, "max_tokens": 8}, _deepseek, "<think>Short waves scatter.",
                        "length")  # fmt: skip
    assert _parts(exporter) == [THOUGHT[:1], THOUGHT[:1]]
    for span in exporter.get_finished_spans():
        assert attrs_json(span, "gen_ai.output.messages")[0]["finish_reason"] == "length"


@pytest.mark.parametrize("reason", ["length", "stop"])
@pytest.mark.parametrize("encoding", ["plain-json", "json-escaping-the-tag", "bytes", "bytes-escaping-the-tag"])
def test_an_answer_that_never_closed_the_prompts_block_is_all_reasoning(
    exporter: InMemorySpanExporter, reason: str, encoding: str
) -> None:
    """DeepSeek-R1's prompt opened the block and the answer has no ``</think>``: it never left the block.

    Cut off by ``max_tokens`` (``length``) while thinking, or stopped there (a stop sequence): reasoning, no text
    part, as an unclosed block of the answer's own is. The prompt is found also when the body's JSON writes the
    tag's brackets as ``\\u003c`` / ``\\u003e`` (as HTML-safe encoders do), and in a body given as bytes (as
    ``json.dumps(...).encode()`` gives it), which boto3 sends unchanged.
    """
    text = json.dumps({"prompt": R1_PROMPT, "max_tokens": 8})
    if "escaping" in encoding:
        text = text.replace("<", "\\u003c").replace(">", "\\u003e")
        assert "<think>" not in text and json.loads(text)["prompt"] == R1_PROMPT
    body: str | bytes = text.encode() if encoding.startswith("bytes") else text
    _whole_and_streamed(DEEPSEEK, body, _deepseek, "Short waves scatter.\n", reason)
    assert _parts(exporter) == [THOUGHT[:1], THOUGHT[:1]]
    for span in exporter.get_finished_spans():
        assert attrs_json(span, "gen_ai.output.messages")[0]["finish_reason"] == reason


# The message Bedrock sends in place of an answer a guardrail blocked (the guardrail's configured blocked message).
BLOCKED = "Sorry, the model cannot answer this question."
INTERVENED = {"amazon-bedrock-guardrailAction": "INTERVENED"}


@pytest.mark.parametrize(
    ("model", "request_body", "make"),
    [
        (DEEPSEEK, {"prompt": R1_PROMPT, "max_tokens": 512}, _deepseek),
        (IMPORTED, {"prompt": "<|user|>Why is the sky blue?<|assistant|><think>\n", "max_gen_len": 512}, _llama),
    ],
    ids=["deepseek-r1", "an-imported-llamas-generation"],
)
def test_a_guardrails_blocked_message_to_a_prompt_opening_a_block_is_answer_text(
    exporter: InMemorySpanExporter, model: str, request_body: dict[str, Any], make: Any
) -> None:
    """The prompt opened a block, but a guardrail intervened: the tagless text is Bedrock's blocked message.

    That message is what the user received in place of the model's answer, never the model's thinking: it stays a
    text part, and the finish is the guardrail's, whole and streamed.
    """
    _whole_and_streamed(model, request_body, make, BLOCKED, None, INTERVENED)
    assert _parts(exporter) == [[{"type": "text", "content": BLOCKED}]] * 2
    for span in exporter.get_finished_spans():
        assert span.attributes is not None
        assert span.attributes["gen_ai.response.finish_reasons"] == ("guardrail_intervened",)
        assert attrs_json(span, "gen_ai.output.messages")[0]["finish_reason"] == "content_filter"


def test_an_answer_a_guardrail_masked_keeps_the_models_own_split(exporter: InMemorySpanExporter) -> None:
    """A guardrail that masked (not blocked) the answer leaves the model's text and its ``</think>``: still split.

    Only a tagless answer is read as the blocked message; the mask does not make the model's thinking its answer.
    """
    text = "Short waves {NAME} scatter.</think>Rayleigh scattering."
    _whole_and_streamed(DEEPSEEK, {"prompt": R1_PROMPT, "max_tokens": 512}, _deepseek, text, "stop", INTERVENED)
    masked = [{"type": "reasoning", "content": "Short waves {NAME} scatter."}, THOUGHT[1]]
    assert _parts(exporter) == [masked, masked]


def test_an_answer_without_tags_to_a_prompt_not_opening_a_block_is_answer_text(exporter: InMemorySpanExporter) -> None:
    """Cut off too, and the prompt speaks of thinking, but opens no block: the text is the answer, as before."""
    request = {"prompt": "<｜User｜>Think about why the sky is blue.<｜Assistant｜>", "max_tokens": 8}
    _whole_and_streamed(DEEPSEEK, request, _deepseek, "The sky is blue because", "length")
    assert _parts(exporter) == [[{"type": "text", "content": "The sky is blue because"}]] * 2


def test_a_text_body_without_tags_is_unchanged(exporter: InMemorySpanExporter) -> None:
    """No tag, no split: an answer's own whitespace is kept, as before."""
    _whole_and_streamed(IMPORTED, {"prompt": "Hi", "max_gen_len": 9}, _llama, "  Hello there.\n", "stop")
    assert _parts(exporter) == [[{"type": "text", "content": "  Hello there.\n"}]] * 2


CLAUDE_V2 = "anthropic.claude-v2:1"
CLAUDE_V2_PROMPT = {"prompt": "\n\nHuman: Explain the tags.\n\nAssistant:", "max_tokens_to_sample": 300}


def _claude_v2(text: str, reason: str | None) -> dict[str, Any]:
    return {"completion": text, "stop_reason": reason}


def test_a_lone_closing_tag_the_prompt_did_not_open_is_answer_text(exporter: InMemorySpanExporter) -> None:
    """A Claude v2 completion that writes ``</think>`` literally: no block was opened, so nothing is reasoning."""
    text = " The reasoning ends at the </think> tag, then the answer follows."
    _whole_and_streamed(CLAUDE_V2, CLAUDE_V2_PROMPT, _claude_v2, text, "stop_sequence")
    assert _parts(exporter) == [[{"type": "text", "content": text}]] * 2


def test_a_deepseek_prompt_of_its_own_without_the_opening_tag_keeps_a_lone_close(
    exporter: InMemorySpanExporter,
) -> None:
    """The lone-close reading is DeepSeek-R1's template's (prompt ending ``<think>``), not the model id's."""
    text = "Write </think> to close a block."
    _whole_and_streamed(DEEPSEEK, {"prompt": "How do I close a think block?", "max_tokens": 64}, _deepseek, text,
                        "stop")  # fmt: skip
    assert _parts(exporter) == [[{"type": "text", "content": text}]] * 2


def test_a_prompt_opening_the_block_before_trailing_whitespace_splits_a_lone_close(
    exporter: InMemorySpanExporter,
) -> None:
    """``<think>`` then whitespace ends the prompt: the answer's lone ``</think>`` closes that block."""
    request = {"prompt": "<｜User｜>Why is the sky blue?<｜Assistant｜><think> \n\n", "max_tokens": 512}
    _whole_and_streamed(DEEPSEEK, request, _deepseek, "Short waves scatter.</think>Rayleigh scattering.", "stop")
    assert _parts(exporter) == [THOUGHT, THOUGHT]


@pytest.mark.parametrize(
    ("request_body", "text"),
    [
        ({"prompt": R1_PROMPT, "max_tokens": 8}, "  </think>  "),  # the block opened and closed with nothing in it
        (CLAUDE_V2_PROMPT, "  <think> </think>  "),  # an empty block, no prompt opening one
    ],
    ids=["opened-by-the-prompt", "a-block-of-its-own"],
)
def test_an_answer_that_is_only_empty_tags_keeps_its_text(
    exporter: InMemorySpanExporter, request_body: dict[str, Any], text: str
) -> None:
    """Splitting leaves neither reasoning nor answer: the text is kept, never a message without parts."""
    model = DEEPSEEK if "max_tokens" in request_body else CLAUDE_V2
    make = _deepseek if model == DEEPSEEK else _claude_v2
    _whole_and_streamed(model, request_body, make, text, "stop")
    assert _parts(exporter) == [[{"type": "text", "content": text}]] * 2


def test_several_think_blocks_are_one_reasoning_part_joined_by_blank_lines(exporter: InMemorySpanExporter) -> None:
    _whole_and_streamed(IMPORTED, {"prompt": "Hi", "max_gen_len": 64}, _llama, "<think>a</think>x<think>b</think>y",
                        "stop")  # fmt: skip
    assert _parts(exporter) == [[{"type": "reasoning", "content": "a\n\nb"}, {"type": "text", "content": "xy"}]] * 2
