"""Pure: ``invoke_model``'s model-native JSON bodies -> GenAI request attributes, messages and Outcome.

Each model family on Bedrock takes and returns its own body. A request's family is read from the model id where it
names its provider (``mistral.``, ``cohere.``..., after an inference profile's ``us.`` / ``eu.`` / ``global.`` and
an ARN's ``foundation-model/`` or ``inference-profile/``), as a bare ``prompt`` body (AWS's own examples: ``prompt``,
``max_tokens``, ``temperature``) is the same for several families; else from the body's shape, so a provisioned
or application-inference-profile ARN (which names no model) is read as well. Responses are read by shape:

============================  ==========================================  ============================================
family                        request keys                                response keys
============================  ==========================================  ============================================
Anthropic Messages            ``anthropic_version`` + ``messages``        ``type: message``, ``content``, ``usage``
Anthropic Text Completions    ``prompt`` + ``max_tokens_to_sample``       ``completion``, ``stop_reason``
Amazon Nova                   ``schemaVersion`` / Converse ``messages``   ``output.message``, ``stopReason``, ``usage``
Amazon Titan Text             ``inputText`` + ``textGenerationConfig``    ``results[]``, ``inputTextTokenCount``
Meta Llama                    ``prompt`` + ``max_gen_len``                ``generation``, ``*_token_count``
Cohere Command                ``prompt`` (+ ``p`` / ``k``)                ``generations[]``
Cohere Command R / R+         ``message`` + ``chat_history``              ``text``, ``tool_calls``, ``finish_reason``
Mistral                       ``prompt`` (+ ``top_k`` / ``stop``)        ``outputs[]``
DeepSeek-R1                   ``prompt`` (+ ``stop``)                     ``choices[].text``
AI21 Jurassic-2               ``prompt`` + ``maxTokens``                  ``completions[].data.text``
OpenAI-style chat (gpt-oss,   ``messages`` of role/content                ``choices[].message``
DeepSeek, AI21 Jamba,
Mistral Large's chat)
============================  ==========================================  ============================================

Token counts missing from a body come from the ``x-amzn-bedrock-*-token-count`` response headers (every
``invoke_model`` response carries them), read by the caller.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from evaltrace._internal import semconv as sc
from evaltrace._internal.anthropic import request as anthropic_request
from evaltrace._internal.anthropic.response import message_outcome, usage_of
from evaltrace._internal.engine.outcome import Outcome, Usage
from evaltrace._internal.engine.values import count
from evaltrace._internal.openai import request as openai_request
from evaltrace._internal.openai.parts import (
    Message,
    Part,
    reasoning_part,
    split_think,
    text_part,
)
from evaltrace._internal.openai.registry import EndpointKind
from evaltrace._internal.thinking import split_thinking
from evaltrace.instrumentation.bedrock import cohere_chat, converse
from evaltrace.instrumentation.bedrock.chat_bodies import chat_body_outcome, chat_choices

Attributes = dict[str, Any]

ANTHROPIC = "anthropic"
ANTHROPIC_COMPLETION = "anthropic_completion"
NOVA = "nova"
TITAN = "titan"
LLAMA = "llama"
COHERE = "cohere"
COHERE_CHAT = "cohere_chat"
MISTRAL = "mistral"
OPENAI_CHAT = "openai_chat"
AI21 = "ai21"


def load(body: Any) -> dict[str, Any] | None:
    """A request/response body (bytes or str) as a JSON object; None for anything else (a file, not JSON)."""
    if isinstance(body, bytes | bytearray | memoryview):
        body = bytes(body)
    elif not isinstance(body, str):
        return None  # a file object: reading it would take it from botocore / the user
    try:
        data = json.loads(body)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def request_family(body: Mapping[str, Any], model: str | None = None) -> str | None:
    """The family of a request body: from ``model``'s provider when it names one, else from the body's keys.

    Args:
        body: The parsed request body.
        model: The call's ``modelId`` (a model id, an inference profile id or an ARN), if any.

    Returns:
        One of the family names above, or None when neither the model nor the body says.
    """
    if "messages" in body:
        return _messages_family(body)
    if "inputText" in body:
        return TITAN
    if "message" in body:
        return COHERE_CHAT
    if "prompt" in body:
        return _PROMPT_PROVIDERS.get(provider_of(model) or "") or _prompt_family(body)
    return None


# The family of a ``prompt`` body per model provider: Mistral's, Cohere Command's and DeepSeek-R1's take the same
# bare ``prompt`` + ``max_tokens`` body, which no key tells apart from Llama's minimal one.
_PROMPT_PROVIDERS = {
    "anthropic": ANTHROPIC_COMPLETION,
    "meta": LLAMA,
    "cohere": COHERE,
    "mistral": MISTRAL,
    "deepseek": MISTRAL,  # the same parameter names: max_tokens, temperature, top_p, stop
    "ai21": AI21,
}
# Geographic prefixes of cross-region inference profiles (``us.anthropic...``, ``global.anthropic...``).
_PROFILE_PREFIXES = frozenset({"us", "eu", "apac", "global", "us-gov", "jp", "au", "ca"})


def provider_of(model: str | None) -> str | None:
    """The provider a model id names (``mistral`` for ``us.mistral.pixtral-large-2502-v1:0``), else None.

    An ARN is read after its last ``/`` (``foundation-model/<id>``, ``inference-profile/<profile id>``); an
    application inference profile or a provisioned model's ARN ends in an opaque id, which names none.
    """
    if not model:
        return None
    name = model.rsplit("/", 1)[-1] if model.startswith("arn:") else model
    pieces = name.split(".")
    if len(pieces) > 2 and pieces[0] in _PROFILE_PREFIXES:
        pieces = pieces[1:]
    return pieces[0] if len(pieces) > 1 and pieces[0] else None


def _messages_family(body: Mapping[str, Any]) -> str:
    if "anthropic_version" in body:
        return ANTHROPIC
    if "schemaVersion" in body or "inferenceConfig" in body or "toolConfig" in body:
        return NOVA
    messages = body.get("messages")
    first = messages[0] if isinstance(messages, list) and messages else None
    content = first.get("content") if isinstance(first, Mapping) else None
    if isinstance(content, list) and content and isinstance(content[0], Mapping) and "type" not in content[0]:
        return NOVA  # Converse-style blocks ({"text": ...}) without a schemaVersion
    return OPENAI_CHAT


def _prompt_family(body: Mapping[str, Any]) -> str:
    if "max_tokens_to_sample" in body or "anthropic_version" in body:
        return ANTHROPIC_COMPLETION
    if "max_gen_len" in body:
        return LLAMA
    if "maxTokens" in body or "topP" in body or "stopSequences" in body:
        return AI21  # Jurassic-2
    if "p" in body or "k" in body or "return_likelihoods" in body or "num_generations" in body:
        return COHERE
    if "top_k" in body or "stop" in body:
        return MISTRAL  # DeepSeek-R1's body too: the same parameter names
    return LLAMA  # a bare prompt: Llama's minimal body


# --- request ---------------------------------------------------------------------------------------------


def _params(body: Mapping[str, Any], keys: tuple[tuple[str, str], ...]) -> Attributes:
    """Copy numeric parameters (``(body key, attribute)``), stop sequences as a list of strings."""
    attrs: Attributes = {}
    for key, name in keys:
        value = body.get(key)
        if name == sc.GEN_AI_REQUEST_STOP_SEQUENCES:
            if isinstance(value, list | tuple) and value:
                attrs[name] = [str(v) for v in value]
        elif name in (sc.GEN_AI_REQUEST_MAX_TOKENS, sc.GEN_AI_REQUEST_TOP_K, sc.GEN_AI_REQUEST_SEED):
            if (number := count(value)) is not None:
                attrs[name] = number
        elif isinstance(value, int | float) and not isinstance(value, bool):
            attrs[name] = float(value)
    return attrs


_T, _P, _K = sc.GEN_AI_REQUEST_TEMPERATURE, sc.GEN_AI_REQUEST_TOP_P, sc.GEN_AI_REQUEST_TOP_K
_MAX, _STOP = sc.GEN_AI_REQUEST_MAX_TOKENS, sc.GEN_AI_REQUEST_STOP_SEQUENCES
_FAMILY_PARAMS: dict[str, tuple[tuple[str, str], ...]] = {
    ANTHROPIC_COMPLETION: (("max_tokens_to_sample", _MAX), ("temperature", _T), ("top_p", _P), ("top_k", _K),
                           ("stop_sequences", _STOP)),
    LLAMA: (("max_gen_len", _MAX), ("temperature", _T), ("top_p", _P)),
    COHERE: (("max_tokens", _MAX), ("temperature", _T), ("p", _P), ("k", _K), ("stop_sequences", _STOP)),
    COHERE_CHAT: (("max_tokens", _MAX), ("temperature", _T), ("p", _P), ("k", _K), ("stop_sequences", _STOP),
                  ("seed", sc.GEN_AI_REQUEST_SEED), ("frequency_penalty", sc.GEN_AI_REQUEST_FREQUENCY_PENALTY),
                  ("presence_penalty", sc.GEN_AI_REQUEST_PRESENCE_PENALTY)),
    MISTRAL: (("max_tokens", _MAX), ("temperature", _T), ("top_p", _P), ("top_k", _K), ("stop", _STOP)),
    AI21: (("maxTokens", _MAX), ("temperature", _T), ("topP", _P), ("stopSequences", _STOP)),
    TITAN: (("maxTokenCount", _MAX), ("temperature", _T), ("topP", _P), ("stopSequences", _STOP)),
}  # fmt: skip


def request_parameters(family: str | None, body: Mapping[str, Any]) -> Attributes:
    """``gen_ai.request.*`` parameters of a native body."""
    if family == ANTHROPIC:
        return anthropic_request.request_attributes(dict(body))
    if family == NOVA:
        attrs = converse.inference_attributes(body.get("inferenceConfig"))
        attrs.update(converse.output_attributes(None, body))  # Nova 2's top-level reasoningConfig
        return attrs
    if family == OPENAI_CHAT:
        return openai_request.request_attributes(EndpointKind.CHAT, dict(body))
    if family == TITAN:
        config = body.get("textGenerationConfig")
        return _params(config, _FAMILY_PARAMS[TITAN]) if isinstance(config, Mapping) else {}
    keys = _FAMILY_PARAMS.get(family or "")
    return _params(body, keys) if keys else {}


def request_content(
    family: str | None, body: Mapping[str, Any]
) -> tuple[list[Message], list[Part] | None, list[dict[str, Any]] | None]:
    """(input messages, system instructions, tool definitions) of a native body."""
    if family == ANTHROPIC:
        params = dict(body)
        return (
            anthropic_request.input_messages(params),
            anthropic_request.system_instructions(params),
            anthropic_request.tool_definitions(params),
        )
    if family == NOVA:
        return (
            converse.input_messages(body.get("messages")),
            converse.system_instructions(body.get("system")),
            converse.tool_definitions(body.get("toolConfig")),
        )
    if family == OPENAI_CHAT:
        params = dict(body)
        return (
            openai_request.input_messages(EndpointKind.CHAT, params),
            None,
            openai_request.tool_definitions(params),
        )
    if family == COHERE_CHAT:
        return cohere_chat.request_content(body)
    key = "inputText" if family == TITAN else "prompt"
    prompt = body.get(key)
    if not isinstance(prompt, str):
        return [], None, None
    if family == ANTHROPIC_COMPLETION:
        return (*_completion_turns(prompt), None)
    return [{"role": "user", "parts": [text_part(prompt)]}], None, None


_TURN = re.compile(r"\n\n(Human|Assistant):")


def _completion_turns(prompt: str) -> tuple[list[Message], list[Part] | None]:
    """A Text Completions prompt (``Human:`` and ``Assistant:`` turns) as (its turns, the system prompt).

    Text before the first turn is the system prompt (Claude 2.1's format); the open ``Assistant:`` turn at the end
    is the one being completed, not a message.
    """
    pieces = _TURN.split(prompt)
    system = [text_part(pieces[0].strip())] if pieces[0].strip() else None
    out: list[Message] = []
    for speaker, text in zip(pieces[1::2], pieces[2::2], strict=False):
        if text.strip():
            out.append({"role": "user" if speaker == "Human" else "assistant", "parts": [text_part(text.strip())]})
    return out, system


def embedding_attributes(body: Mapping[str, Any]) -> Attributes:
    """An embedding model's body -> the dimension count and encoding formats it asks for.

    Each family names them its own way: Titan Text Embeddings V2 ``dimensions`` and ``embeddingTypes``, Titan
    Multimodal ``embeddingConfig.outputEmbeddingLength``, Nova's ``singleEmbeddingParams.embeddingDimension``,
    Cohere's ``embedding_types`` and (Embed v4) ``output_dimension``.

    Args:
        body: The parsed request body.

    Returns:
        ``gen_ai.embeddings.dimension.count`` and ``gen_ai.request.encoding_formats``, those the body gives.
    """
    attrs: Attributes = {}
    config, nova = body.get("embeddingConfig"), body.get("singleEmbeddingParams")
    dimensions = count(body.get("dimensions"))
    if dimensions is None:
        dimensions = count(body.get("output_dimension"))
    if dimensions is None and isinstance(config, Mapping):
        dimensions = count(config.get("outputEmbeddingLength"))
    if dimensions is None and isinstance(nova, Mapping):
        dimensions = count(nova.get("embeddingDimension"))
    if dimensions is not None:
        attrs[sc.GEN_AI_EMBEDDINGS_DIMENSION_COUNT] = dimensions
    formats = body.get("embeddingTypes") or body.get("embedding_types")
    if isinstance(formats, list | tuple) and formats:
        attrs[sc.GEN_AI_REQUEST_ENCODING_FORMATS] = [str(f) for f in formats]
    return attrs


# --- response --------------------------------------------------------------------------------------------


GUARDRAIL_ACTION = "amazon-bedrock-guardrailAction"
"""The key Bedrock adds to a native body (or a stream chunk) when a guardrail ran; ``INTERVENED`` when it acted."""


def guardrail_intervened(outcome: Outcome) -> Outcome:
    """``outcome`` of an answer a guardrail intervened in: ``guardrail_intervened``, a ``content_filter`` finish.

    It is recorded as Converse records the same event (its ``stopReason``), whatever the body says of the model's
    own stop. A body whose answer the guardrail replaced has none, which would read as a cut-off answer
    (``error``); one the model ended (``end_turn``) before the guardrail masked or replaced it would read as the
    model's own stop, which it was not: the finish is the guardrail's. The text is left as the body or stream
    carried it (the model's own, in a stream whose guardrail runs asynchronously).
    """
    outcome.finish_reasons = ["guardrail_intervened"] * (len(outcome.finish_reasons) or 1)
    for message in outcome.output_messages or ():
        message["finish_reason"] = converse.finish_reason("guardrail_intervened")
    return outcome


def body_outcome(body: Mapping[str, Any], response_id: str | None, content: bool, request: Any = None) -> Outcome:
    """A native response body -> Outcome, by its shape; ``response_id`` is the request id (see ``__init__``).

    ``request`` is the call's raw request body: whether its prompt opened a ``<think>`` block (``text_parts``).
    """
    outcome = _body_outcome(body, response_id, content, request)
    return guardrail_intervened(outcome) if body.get(GUARDRAIL_ACTION) == "INTERVENED" else outcome


def _body_outcome(body: Mapping[str, Any], response_id: str | None, content: bool, request: Any) -> Outcome:
    if body.get("type") == "message" or ("content" in body and "stop_reason" in body):
        outcome = message_outcome(dict(body), content)
        outcome.response_id = response_id
        return outcome
    if "output" in body and isinstance(body.get("output"), Mapping):
        return converse.converse_outcome(body, response_id, content)
    if "choices" in body and chat_choices(body.get("choices")):
        return chat_body_outcome(body, response_id, content)
    if not _TEXT_KEYS.intersection(body):
        # Not a text answer (an image model's ``images``, an unknown family): its usage comes from the headers.
        return Outcome(response_id=response_id)
    text, reason, usage, calls = _text_shape(body)
    messages = None
    if content:
        parts = text_parts(text, request, body.get(GUARDRAIL_ACTION) == "INTERVENED")
        parts.extend(calls)
        messages = [converse.output_message(parts, reason)]
    return Outcome(
        response_id=response_id,
        finish_reasons=[reason] if isinstance(reason, str) and reason else [],
        output_messages=messages,
        usage=usage,
    )


_TEXT_KEYS = frozenset(
    {"completion", "completions", "generation", "results", "generations", "outputs", "choices", "text", "tool_calls"}
)


def text_parts(text: str, request: Any = None, intervened: bool = False) -> list[Part]:
    """A text family's answer -> its parts: the reasoning its text inlines first, then the answer's text.

    A ``<think>...</think>`` block (or an unclosed one, cut off while thinking) is reasoning, as in a chat answer
    (``split_think``). When the prompt opened a block (``request``, the call's raw request body, has a ``prompt``
    ending with ``<think>``, as AWS's DeepSeek-R1 template does) the answer starts inside it: a lone ``</think>``
    closes it, everything before it being reasoning too, and an answer without one never left it (cut off by
    ``max_tokens``, or stopped, while thinking) and is all reasoning, as an unclosed block of the answer's own is
    (an answer repeating the opening tag is read as its own block). The request is parsed only when its raw text
    has ``think`` in it, and scanned once.
    Not so when a guardrail ``intervened``: a tagless answer is then the guardrail's blocked message, what the user
    got in place of the model's, and stays text (a masked answer keeps the model's tags, and is split by them).
    Elsewhere (a Claude v2 completion quoting the tag) a lone ``</think>`` is answer text. Splitting that leaves
    neither reasoning nor answer (only empty tags, only whitespace) keeps the text as it was: a message always has
    its parts.
    """
    if not text:
        return []
    closed, opened = "</think>" in text, "<think>" in text
    # Each branch reads the request at most once; a tagless answer to a prompt without ``think`` skips the splits.
    if closed and prompt_opens_think(request):
        split = split_thinking(text)
        reasoning, answer = "\n\n".join(split.thoughts) or None, split.answer
    elif closed or opened:
        reasoning, answer = split_think(text)
    elif not intervened and prompt_opens_think(request):  # no tag in the answer: it never left the prompt's block
        reasoning, answer = text.strip() or None, ""
    else:
        return [text_part(text)]
    if reasoning or answer:
        parts = [reasoning_part(reasoning)] if reasoning else []
        if answer:
            parts.append(text_part(answer))
        return parts
    return [text_part(text)]


def raw_mentions_think(request: Any) -> bool:
    r"""Whether a raw request body (bytes or str) holds ``think`` at all: a scan, no JSON parse of the body.

    The word, not the tag: a JSON encoder may write ``<`` and ``>`` as ``\u003c`` / ``\u003e``.
    """
    if isinstance(request, bytes | bytearray | memoryview):
        return b"think" in (request.tobytes() if isinstance(request, memoryview) else request)
    return isinstance(request, str) and "think" in request


def prompt_opens_think(request: Any) -> bool:
    """Whether a raw request body's ``prompt`` ends with ``<think>`` (trailing whitespace aside)."""
    body = load(request) if raw_mentions_think(request) else None
    prompt = body.get("prompt") if body is not None else None
    return isinstance(prompt, str) and prompt.rstrip().endswith("<think>")


def _text_shape(body: Mapping[str, Any]) -> tuple[str, Any, Usage | None, list[Part]]:
    """(text, stop reason, usage, tool calls) of the prompt-in, text-out families."""
    if "completion" in body:  # Anthropic Text Completions
        return str(body.get("completion") or ""), body.get("stop_reason"), None, []
    if "generation" in body:  # Llama
        usage = Usage(count(body.get("prompt_token_count")), count(body.get("generation_token_count")))
        return str(body.get("generation") or ""), body.get("stop_reason"), usage, []
    if "results" in body:  # Titan Text
        results = [r for r in body.get("results") or () if isinstance(r, Mapping)]
        text = "".join(str(r.get("outputText") or "") for r in results)
        output = sum(count(r.get("tokenCount")) or 0 for r in results) if results else None
        usage = Usage(count(body.get("inputTextTokenCount")), output)
        return text, results[0].get("completionReason") if results else None, usage, []
    if "completions" in body:  # AI21 Jurassic-2
        completions = [c for c in body.get("completions") or () if isinstance(c, Mapping)]
        first = completions[0] if completions else {}
        reason = (
            (first.get("finishReason") or {}).get("reason") if isinstance(first.get("finishReason"), Mapping) else None
        )
        return str((first.get("data") or {}).get("text") or ""), reason, None, []
    if "generations" in body:  # Cohere Command
        generations = [g for g in body.get("generations") or () if isinstance(g, Mapping)]
        text = "".join(str(g.get("text") or "") for g in generations[:1])
        return text, generations[0].get("finish_reason") if generations else None, None, []
    if "outputs" in body or "choices" in body:  # Mistral; DeepSeek-R1's completion choices
        outputs = [o for o in body.get("outputs") or body.get("choices") or () if isinstance(o, Mapping)]
        text = "".join(str(o.get("text") or "") for o in outputs[:1])
        first = outputs[0] if outputs else {}
        return text, first.get("stop_reason") or first.get("finish_reason"), None, []
    return cohere_chat.response_shape(body)  # Cohere Command R: text, tool calls, finish reason, billed units


def header_usage(headers: Mapping[str, Any]) -> Usage | None:
    """``x-amzn-bedrock-{input,output,cache-read-input,cache-write-input}-token-count`` -> inclusive Usage."""
    counts = []
    for name in ("input", "output", "cache-read-input", "cache-write-input"):
        value = headers.get(f"x-amzn-bedrock-{name}-token-count")
        counts.append(int(value) if isinstance(value, str) and value.isdigit() else None)
    if counts[0] is None and counts[1] is None:
        return None
    return usage_of(*counts)
