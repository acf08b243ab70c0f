"""Pure: a ``litellm.rerank`` / ``arerank`` call -> request attributes, its ``RerankResponse`` -> ``Outcome``.

LiteLLM follows Cohere's rerank API whatever the provider: the request (``query``, ``documents``, ``top_n``...) and
the ``RerankResponse`` (``id``, ``results[i].index`` / ``relevance_score``, ``meta.billed_units`` / ``meta.tokens``)
are Cohere's shape, so the span is the Cohere rerank span, read by the Cohere instrumentation's own functions: a
``rerank`` operation on a ``task`` span (not an LLM step), the query and documents as ``input.value``, the ranking
as ``output.value`` (with content capture), never as ``gen_ai.retrieval.documents``.

The usage is where each provider's counts differ, as LiteLLM maps them into ``meta``:

* Cohere: its own ``meta`` (``usage_of``: billed tokens, else the model's), and its ``cohere.usage.*`` counts
  (``search_units``...) as the Cohere span has them. No other provider's span has ``cohere.*`` attributes:
  LiteLLM writes ``search_units`` for providers that bill none (Bedrock and Hugging Face: always 1).
* Any other provider: ``meta.tokens.input_tokens``, else ``meta.billed_units.total_tokens`` (Jina's, Voyage's...
  ``usage.total_tokens``: a rerank writes nothing, so its total is its input), as input tokens; output tokens when
  a provider counts some.
* Not tokens, so not recorded: NVIDIA NIM's ``total_tokens`` when NIM sent no usage (LiteLLM then writes the number
  of results there), and Hugging Face's counts (LiteLLM's own estimate, as a chat stream's estimate is not
  recorded either).

Jina's and NVIDIA NIM's answers have no id: the one LiteLLM makes up for them (a random UUID) is not recorded.
"""

from __future__ import annotations

from typing import Any

from evaltrace._internal.engine.outcome import Outcome, Summary, Usage
from evaltrace._internal.openai.parts import field
from evaltrace.instrumentation.cohere.codec import usage_attributes, usage_of
from evaltrace.instrumentation.cohere.embed_rerank import rerank_outcome, rerank_request_attributes

Attributes = dict[str, Any]

COHERE = "cohere"  # ``gen_ai.provider.name`` of LiteLLM's ``cohere`` provider
_NVIDIA_NIM = "nvidia_nim"  # LiteLLM's names, kept as the span's provider (OTel names neither)
_ESTIMATED = frozenset(("huggingface",))
# Providers whose documented rerank answer has no id: LiteLLM makes one up (a random UUID), which names nothing.
_NO_ID = frozenset(("jina_ai", _NVIDIA_NIM))


def request_attributes(params: dict[str, Any], capture: bool, max_len: int) -> Attributes:
    """The Cohere rerank span's: ``top_n`` / ``max_tokens_per_doc`` as model parameters, the inputs with ``capture``."""
    return rerank_request_attributes(params, capture, max_len)


def _count(value: Any) -> int | None:
    """A token count: an int (or a whole float), not a bool; else None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return int(value) if value == int(value) else None


def usage(response: Any, provider: str) -> Usage | None:
    """The token usage of a ``RerankResponse`` from ``provider`` (``gen_ai.provider.name``); None when it has none.

    See the module's docstring for where each provider's count is, and which counts are not tokens.
    """
    meta = field(response, "meta")
    if meta is None:
        return None
    if provider == COHERE:
        return usage_of(meta)
    if provider in _ESTIMATED:
        return None
    input_tokens = _count(field(field(meta, "tokens"), "input_tokens"))
    output_tokens = _count(field(field(meta, "tokens"), "output_tokens"))
    if input_tokens is None:
        total = _count(field(field(meta, "billed_units"), "total_tokens"))
        results = field(response, "results")
        if provider == _NVIDIA_NIM and isinstance(results, list) and total == len(results):
            total = None  # LiteLLM's stand-in when NIM sent no usage: the number of results, not a token count
        input_tokens = total
    if input_tokens is None and not output_tokens:
        return None
    return Usage(input_tokens=input_tokens, output_tokens=output_tokens or None)


def outcome(response: Any, provider: str, capture: bool, max_len: int) -> Outcome:
    """``RerankResponse`` -> Outcome: the id, the usage, the ranking with ``capture``; Cohere's own counts."""
    result = rerank_outcome(response, usage(response, provider), capture, max_len)
    if provider in _NO_ID:
        result.response_id = None
    if provider == COHERE:
        counts = usage_attributes(field(response, "meta"))
        if counts:
            result.attributes = {**(result.attributes or {}), **counts}
    return result


def summary(response: Any, provider: str) -> Summary:
    """Token counts of a ``RerankResponse`` (it names no model), read without the content."""
    counts = usage(response, provider)
    return Summary(None) if counts is None else Summary(None, counts.input_tokens, counts.output_tokens)
