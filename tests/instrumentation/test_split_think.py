"""``split_think`` moves ``<think>`` blocks out of an answer exactly as the regular expression it replaced did.

The answer of a reasoning model served through an OpenAI-compatible API (DeepSeek R1 on Groq, vLLM, Ollama)
carries its thinking inside ``<think>...</think>``, and a stream cut short leaves the block unclosed. The split
was ``findall`` / ``sub`` of ``<think>(.*?)(?:</think>|\\Z)`` (DOTALL), which cost a few hundred instructions per
character of the answer; it is now found with ``str.find``. Every string built from the pieces that matter (both
tags, partial tags, nesting, whitespace, newlines, text) must give the same reasoning and answer, so no recorded
``gen_ai.output.messages`` changes.
"""

from __future__ import annotations

import itertools
import random
import re

from evaltrace._internal.openai.parts import assistant_parts, split_think

_THINK = re.compile(r"<think>(.*?)(?:</think>|\Z)", re.DOTALL)


def _by_regex(text: str) -> tuple[str | None, str]:
    """The definition before: the regular expression's matches are the thoughts, the rest is the answer."""
    if "<think>" not in text:
        return None, text
    thoughts = [m.strip() for m in _THINK.findall(text)]
    answer = _THINK.sub("", text).strip()
    reasoning = "\n\n".join(t for t in thoughts if t)
    return (reasoning or None), answer


PIECES = ["<think>", "</think>", "<think", "think>", "</", "a", "Okay.", " ", "\n", "\t", "", "<THINK>", "é"]


def test_every_short_combination_splits_as_the_regular_expression() -> None:
    for size in range(5):
        for combo in itertools.product(PIECES, repeat=size):
            text = "".join(combo)
            assert split_think(text) == _by_regex(text), repr(text)


def test_long_random_answers_split_as_the_regular_expression() -> None:
    rng = random.Random(28)
    for _ in range(3000):
        text = "".join(rng.choice(PIECES) for _ in range(rng.randrange(5, 40)))
        assert split_think(text) == _by_regex(text), repr(text)


def test_a_streamed_answer_cut_inside_its_thinking_is_all_reasoning() -> None:
    text = "<think>\nOkay. I need to" + " think" * 200
    reasoning, answer = split_think(text)
    assert reasoning == text.removeprefix("<think>").strip()
    assert answer == ""
    assert assistant_parts(None, text) == [{"type": "reasoning", "content": reasoning}]
    both = assistant_parts("earlier", "<think> a </think> b <think>c</think>\n d ")
    assert both == [{"type": "reasoning", "content": "earlier\n\na\n\nc"}, {"type": "text", "content": "b \n d"}]
