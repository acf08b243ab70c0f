"""Pure: an ``invoke_model`` body of OpenAI-style chat choices (gpt-oss, DeepSeek, AI21 Jamba, Mistral Large's chat).

Read as the OpenAI paths read a ``ChatCompletion`` (``chat_outcome``), plus what a plain dict does not hold as the
SDK's pydantic extras: the reasoning beside the answer. ``bodies.body_outcome`` sends a body here when its
``choices`` carry a ``message`` each; completion choices (a ``text`` each) stay with the text families there.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from evaltrace._internal.engine.outcome import Outcome
from evaltrace._internal.openai.parts import Message, reasoning_part
from evaltrace._internal.openai.response import chat_outcome


def chat_body_outcome(body: Mapping[str, Any], response_id: str | None, content: bool) -> Outcome:
    """OpenAI-style chat choices (gpt-oss, DeepSeek, Mistral Large's chat completion) -> Outcome.

    Read as the OpenAI paths read a ``ChatCompletion``, plus what those find in the SDK's pydantic extras and a
    plain dict does not hold as extras: the reasoning beside the answer (``reasoning_content``, else
    ``reasoning``) is a reasoning part, first. Mistral Large's chat completion names its stop ``stop_reason``
    (AWS's Mistral chat completion parameters): it is the finish reason when the choice has no ``finish_reason``
    (vLLM-style servers send both, and their ``stop_reason`` is then the stop string matched, not the reason).
    """
    choices = [
        {**c, "finish_reason": c["stop_reason"]}
        if isinstance(c, Mapping) and c.get("finish_reason") is None and isinstance(c.get("stop_reason"), str)
        else c
        for c in body["choices"]
    ]
    outcome = chat_outcome({**body, "choices": choices}, content)
    outcome.response_id = response_id
    for choice, message in zip(choices, outcome.output_messages or (), strict=False):
        _add_reasoning(message, choice.get("message") if isinstance(choice, Mapping) else None)
    return outcome


def _add_reasoning(message: Message, answer: Any) -> None:
    """Put an OpenAI-style answer's ``reasoning_content`` / ``reasoning`` first, as ``assistant_parts`` does."""
    if not isinstance(answer, Mapping):
        return
    reasoning = answer.get("reasoning_content")
    if reasoning is None:
        reasoning = answer.get("reasoning")
    if not isinstance(reasoning, str) or not reasoning:
        return
    parts = message["parts"]
    if parts and parts[0].get("type") == "reasoning":  # the answer's ``<think>`` block: after this, as there
        parts[0] = reasoning_part(f"{reasoning}\n\n{parts[0]['content']}")
    else:
        parts.insert(0, reasoning_part(reasoning))


def chat_choices(choices: Any) -> bool:
    """OpenAI-style chat choices (a ``message`` each), not completion choices (a ``text`` each)."""
    first = choices[0] if isinstance(choices, list) and choices else None
    return isinstance(first, Mapping) and "message" in first
