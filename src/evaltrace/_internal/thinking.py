"""Inline reasoning (``<think>...</think>``) split out of answer text, so it never counts as the answer.

Reasoning models served raw (DeepSeek-R1 and its distills, QwQ, many vLLM/llama.cpp setups) write their reasoning
into the content itself. Shapes handled, each seen in the wild:

* ``<think>reasoning</think>answer``, any number of blocks anywhere in the text;
* ``reasoning</think>answer``: no opening tag, because the chat template already put ``<think>`` in the prompt;
* ``answer<think>reasoning`` with no closing tag: the model was cut off (max tokens) while thinking, so
  everything after the tag is reasoning, and the answer is what came before it (often nothing).

Only the exact lowercase tags count; text without them is returned unchanged.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["ThinkSplit", "join_thinking", "split_thinking"]

_OPEN = "<think>"
_CLOSE = "</think>"
_BLOCK = re.compile(r"<think>(.*?)</think>", re.DOTALL)


@dataclass(frozen=True)
class ThinkSplit:
    """A text with its inline reasoning taken out."""

    answer: str
    """The text without reasoning; stripped of surrounding whitespace when reasoning was removed."""
    thoughts: tuple[str, ...]
    """The reasoning blocks in order, each stripped; empty when the text had none."""


def split_thinking(text: str) -> ThinkSplit:
    """Move ``<think>`` reasoning out of ``text``.

    Args:
        text: Model output that may inline its reasoning.

    Returns:
        The answer and the reasoning blocks (see the module docstring for the shapes recognised).
    """
    if _OPEN not in text and _CLOSE not in text:
        return ThinkSplit(text, ())
    thoughts: list[str] = []
    head, close, rest = text.partition(_CLOSE)
    if close and _OPEN not in head:  # "reasoning</think>answer": the opening tag was in the prompt
        thoughts.append(head)
        text = rest
    pieces: list[str] = []
    position = 0
    for match in _BLOCK.finditer(text):
        pieces.append(text[position : match.start()])
        thoughts.append(match.group(1))
        position = match.end()
    tail = text[position:]
    before, opened, unclosed = tail.partition(_OPEN)
    pieces.append(before)
    if opened:  # cut off while thinking
        thoughts.append(unclosed)
    kept = tuple(t.strip() for t in thoughts if t.strip())
    return ThinkSplit("".join(pieces).strip(), kept)


def join_thinking(*parts: str | None) -> str | None:
    """Join reasoning texts with blank lines, skipping empty ones and exact repeats; None when nothing is left.

    Repeats are dropped because one reasoning often reaches a trace twice (an LLM span's message and the
    function's returned text that carried it).
    """
    seen: list[str] = []
    for part in parts:
        if part and part.strip() and part.strip() not in seen:
            seen.append(part.strip())
    return "\n\n".join(seen) or None
