"""Token log-likelihoods of a text from an OpenAI-compatible completions endpoint (``echo`` with ``logprobs``).

GPTScore and perplexity score how likely a model finds a text, so they need the model's log-probability of
every token of the *prompt*. Servers that return them (vLLM, llama.cpp's server and others) answer a completions
request with ``echo=True`` and ``logprobs`` with ``choices[0].logprobs.tokens`` / ``token_logprobs`` (and often
``text_offset``) covering the prompt. Most hosted chat APIs do not serve prompt log-probabilities; the call then
fails, and the evaluation is an error, never a score.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from evaltrace.evaluators._base import MissingInputError
from evaltrace.evaluators.judge import Judge, JudgeCall


class LogprobsError(Exception):
    """The endpoint answered without usable prompt log-probabilities (it does not support ``echo``+``logprobs``)."""


@dataclass(frozen=True)
class Likelihood:
    """Log-likelihood of the scored part of a prompt.

    Attributes:
        mean_nll: Average negative log-likelihood per scored token (natural log); lower is more likely.
        tokens: How many tokens were scored.
        call: The endpoint call's record (tokens and cost).
    """

    mean_nll: float
    tokens: int
    call: JudgeCall

    @property
    def perplexity(self) -> float:
        """``exp(mean_nll)``: the model's average branching factor over the scored tokens."""
        return math.exp(self.mean_nll)


def _offsets(tokens: Sequence[str], given: Any) -> list[int]:
    """Start offset of each token: the server's ``text_offset`` when it has one per token, else running lengths."""
    if isinstance(given, Sequence) and len(given) == len(tokens) and all(isinstance(o, int) for o in given):
        return list(given)
    starts, position = [], 0
    for token in tokens:
        starts.append(position)
        position += len(token)
    return starts


def scored_logprobs(logprobs: Any, start: int, end: int) -> list[float]:
    """Return the log-probabilities of the prompt tokens overlapping characters ``[start, end)``.

    A token straddling ``start`` counts (it carries part of the scored text); tokens at or past ``end`` were
    generated, not echoed, and are left out, as is the first token, which has no log-probability.

    Raises:
        LogprobsError: The reply has no per-token log-probabilities, or none for the scored characters.
        MissingInputError: The scored text is a lone first token, which has no log-probability.
    """
    tokens = getattr(logprobs, "tokens", None)
    values = getattr(logprobs, "token_logprobs", None)
    if not isinstance(tokens, list) or not isinstance(values, list) or len(tokens) != len(values) or not tokens:
        raise LogprobsError(
            "the endpoint returned no prompt logprobs (choices[0].logprobs.tokens/token_logprobs); it must support "
            "completions with echo=true and logprobs"
        )
    offsets = _offsets(tokens, getattr(logprobs, "text_offset", None))
    overlapping = [
        value
        for token, value, at in zip(tokens, values, offsets, strict=True)
        if at < end and at + len(str(token)) > start
    ]
    picked = [float(value) for value in overlapping if value is not None]
    if not picked and overlapping:  # one token with nothing before it: a model gives no probability for it
        raise MissingInputError("the text is a single token with no context: nothing to score")
    if not picked:
        raise LogprobsError("the endpoint returned no logprob for the scored text (echo ignored?)")
    return picked


async def likelihood(judge: Judge, prefix: str, text: str) -> Likelihood:
    """Score ``text`` following ``prefix`` (joined by one space when the prefix is not empty).

    Args:
        judge: The endpoint (the run's ``judge:`` block): base_url, model, api_key.
        prefix: The instruction and context conditioning the text (not scored).
        text: The scored text.

    Returns:
        The text's average negative log-likelihood.

    Raises:
        JudgeError: The endpoint failed.
        LogprobsError: It answered without usable prompt logprobs.
    """
    lead = f"{prefix} " if prefix else ""
    prompt = lead + text
    logprobs, call = await judge.prompt_logprobs(prompt)
    values = scored_logprobs(logprobs, len(lead), len(prompt))
    return Likelihood(-sum(values) / len(values), len(values), call)
