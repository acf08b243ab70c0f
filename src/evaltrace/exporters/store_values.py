"""Values as the local store can hold them (text SQLite can encode, integers within 64 bits), and token and cost totals.

Imports nothing heavy: the writer, the importer and the span rows all use it, and ``traces list`` starts
without the OpenTelemetry SDK.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import Any, NamedTuple, TypeVar

from evaltrace._internal import semconv

__all__ = ["NO_USAGE", "Usage", "clamp_int", "clean_text", "span_usage", "trace_usage"]

_INT64_MAX = 2**63 - 1

# A span id: the store's hex text, or the SDK's int (export sampling sums a parked trace the same way).
_Id = TypeVar("_Id", bound=Hashable)


def clean_text(text: str) -> str:
    """``text`` as SQLite can store it: a lone surrogate (a ``surrogateescape`` file name) becomes U+FFFD.

    SQLite binds text as UTF-8, which a lone surrogate cannot be; unchecked, one such attribute would fail
    the whole batch. ASCII, most text, is returned at once.
    """
    if type(text) is not str:  # a str subclass (a StrEnum member): the writer process's pipe takes plain str only
        text = str.__str__(text)
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
    return text


def clamp_int(value: int) -> int:
    """``value`` within SQLite's signed 64-bit integers (a runaway token count is kept, as the largest)."""
    if -_INT64_MAX - 1 <= value <= _INT64_MAX:  # nearly always: one comparison, no call
        return value
    return max(-_INT64_MAX - 1, min(_INT64_MAX, value))


class Usage(NamedTuple):
    """Tokens and cost, of one span or a whole trace; None where nothing recorded it."""

    input_tokens: int | None
    output_tokens: int | None
    cost: float | None


def _number(value: Any) -> float | None:
    """A finite number, else None: SQLite stores NaN as NULL, and an infinite cost is not a cost."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return None
    try:
        number = float(value)
    except OverflowError:  # an int beyond any float
        return None
    return number if math.isfinite(number) else None


def _tokens(value: Any) -> int | None:
    return clamp_int(value) if isinstance(value, int) and not isinstance(value, bool) else None


NO_USAGE = Usage(None, None, None)


def span_usage(attributes: Mapping[str, Any]) -> Usage:
    """The tokens and cost one span records: ``gen_ai.usage.*_tokens``, ``evaltrace.cost_usd`` else ``gen_ai.usage.cost``.

    Token counts are whole numbers (clamped to 64 bits); a cost is a finite number. Anything else is None.
    """
    get = attributes.get
    tokens_in, tokens_out = get(semconv.GEN_AI_USAGE_INPUT_TOKENS), get(semconv.GEN_AI_USAGE_OUTPUT_TOKENS)
    cost = get(semconv.EVALTRACE_COST_USD)
    if tokens_in is None and tokens_out is None and cost is None and semconv.GEN_AI_USAGE_COST not in attributes:
        return NO_USAGE  # most spans: four lookups, nothing built
    number = _number(cost)
    if number is None:
        number = _number(get(semconv.GEN_AI_USAGE_COST))
    return Usage(_tokens(tokens_in), _tokens(tokens_out), number)


def _ancestors(parents: Mapping[_Id, _Id | None], span_ids: Iterable[_Id]) -> set[_Id]:
    """Every span (of ``parents``) above one of ``span_ids``; cycle-safe (a corrupt store could hold one)."""
    covered: set[_Id] = set()
    for span_id in span_ids:
        parent = parents.get(span_id)
        while parent is not None and parent in parents and parent not in covered:
            covered.add(parent)  # an ancestor already covered has its own ancestors covered: stop
            parent = parents[parent]
    return covered


def trace_usage(carriers: Sequence[tuple[_Id, Usage]], links: Iterable[tuple[_Id, _Id | None]]) -> Usage:
    """Tokens and cost of a whole trace: the one rule of ``traces list`` and ``traces show``.

    Each number is summed over the spans that carry it, leaving out a span when one of its descendants carries
    it too: an agent (or an ``@llm`` function around an instrumented call) that repeats the numbers of the
    model calls under it is not counted twice.

    Args:
        carriers: ``(span id, usage)`` of the spans that carry any number.
        links: ``(span id, parent span id)`` of every span of the trace; only read when several spans carry.
    """
    if len(carriers) < 2:
        return carriers[0][1] if carriers else NO_USAGE
    parents = dict(links)
    if all(None not in usage for _, usage in carriers):  # the usual case: each carrier records all three
        covered = _ancestors(parents, [span_id for span_id, _ in carriers])
        leaves = [usage for span_id, usage in carriers if span_id not in covered]
        return _usage(
            sum(u.input_tokens or 0 for u in leaves),
            sum(u.output_tokens or 0 for u in leaves),
            math.fsum(u.cost or 0.0 for u in leaves),
        )
    covered_by: dict[frozenset[_Id], set[_Id]] = {}  # the three numbers are usually carried by the same spans
    totals: list[float | None] = []
    for index in range(3):
        carrying = frozenset(span_id for span_id, usage in carriers if usage[index] is not None)
        if not carrying:
            totals.append(None)
            continue
        hidden = covered_by.get(carrying)
        if hidden is None:
            hidden = covered_by[carrying] = _ancestors(parents, carrying)
        values = [usage[index] for span_id, usage in carriers if span_id in carrying and span_id not in hidden]
        totals.append(sum(values) if index < 2 else math.fsum(values))  # type: ignore[arg-type]
    return _usage(*totals)


def _usage(tokens_in: float | None, tokens_out: float | None, cost: float | None) -> Usage:
    return Usage(
        None if tokens_in is None else clamp_int(int(tokens_in)),
        None if tokens_out is None else clamp_int(int(tokens_out)),
        cost if cost is None or math.isfinite(cost) else None,
    )
