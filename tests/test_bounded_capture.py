"""Captured values are capped with bounded work: the cost of capture depends on the cap, not on the value.

Two kinds of checks, none timed: every entry point that records a value (decorator input and output, tool
arguments and results, evaluator reasons on span attributes, events, log events and score comments) writes at
most the cap, as the valid-JSON truncation marker; and values that count how often they are read (a dict whose
``items()`` counts, a list whose ``__iter__`` counts, a huge string measured by allocations) are read O(cap)
times, not O(size). A differential check keeps the output of values that fit identical to the C encoder's.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import decimal
import enum
import json
import math
import re
import tracemalloc
import uuid
from collections.abc import Callable, Iterator, Mapping
from pathlib import PurePosixPath
from typing import Any

import pydantic
import pytest
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import evaltrace
from evaltrace import mapping
from evaltrace._internal import settings
from evaltrace._internal.jsonutil import (
    MINIMUM_KEY,
    TRUNCATED_KEY,
    _dumps,
    _short_repr,
    _work_limit,
    capped_json,
    capped_text,
)
from evaltrace.evaluation import evaluation_event_attributes, result_to_score, span_result_attributes
from evaltrace.evaluation.telemetry import LogEventEmitter
from evaltrace.schema import EvaluationResult

CAP = 2_000
HUGE = "é" * 3_000_000  # escapes to itself; 3M characters, 1500 times the cap


@pytest.fixture
def small_cap() -> Iterator[None]:
    previous = settings.replace(settings.CaptureSettings(max_attribute_length=CAP))
    yield
    settings.replace(previous)


def assert_capped_marker(value: Any, minimum: int) -> None:
    """``value`` is a truncation marker within the cap standing for a value at least ``minimum`` long."""
    assert isinstance(value, str)
    assert len(value) <= CAP
    marker = json.loads(value)
    assert marker[TRUNCATED_KEY] is True
    assert marker["original_length"] >= minimum


# --- every entry point is capped ------------------------------------------------------------------------


def _only(exporter: InMemorySpanExporter) -> ReadableSpan:
    (span,) = exporter.get_finished_spans()
    return span


def _decorator_input(exporter: InMemorySpanExporter) -> Any:
    @evaltrace.trace
    def task(text: str) -> int:
        return 1

    task(HUGE)
    return (_only(exporter).attributes or {})["input.value"]


def _decorator_output(exporter: InMemorySpanExporter) -> Any:
    @evaltrace.trace
    def task() -> dict[str, str]:
        return {"answer": HUGE}

    task()
    return (_only(exporter).attributes or {})["output.value"]


def _tool_argument(exporter: InMemorySpanExporter) -> Any:
    @evaltrace.tool
    def search(query: dict[str, int]) -> int:
        return 1

    search({f"k{i}": i for i in range(300_000)})
    return (_only(exporter).attributes or {})["gen_ai.tool.call.arguments"]


def _tool_result(exporter: InMemorySpanExporter) -> Any:
    @evaltrace.tool
    def search() -> list[str]:
        return [HUGE]

    search()
    return (_only(exporter).attributes or {})["gen_ai.tool.call.result"]


def _reason(status: str = "completed") -> EvaluationResult:
    if status == "skipped":
        return EvaluationResult(evaluator="judge", passed=False, status="skipped", reason=HUGE)
    return EvaluationResult(evaluator="judge", passed=False, reason=HUGE, detail={"label": "x" * 100_000})


def _event_explanation(exporter: InMemorySpanExporter) -> Any:
    return evaluation_event_attributes(_reason())["gen_ai.evaluation.explanation"]


def _event_label(exporter: InMemorySpanExporter) -> Any:
    return evaluation_event_attributes(_reason())["gen_ai.evaluation.score.label"]


def _span_skip_reason(exporter: InMemorySpanExporter) -> Any:
    return span_result_attributes([_reason("skipped")])["evaltrace.eval.judge.skip_reason"]


def _log_event_explanation(exporter: InMemorySpanExporter) -> Any:
    logs = InMemoryLogRecordExporter()
    provider = LoggerProvider()
    provider.add_log_record_processor(SimpleLogRecordProcessor(logs))
    with TracerProvider().get_tracer("t").start_as_current_span("chat") as span:
        pass
    assert isinstance(span, ReadableSpan)
    LogEventEmitter(provider).emit(span, _reason())
    (record,) = logs.get_finished_logs()
    provider.shutdown()
    return dict(record.log_record.attributes or {})["gen_ai.evaluation.explanation"]


def _score_comment(exporter: InMemorySpanExporter) -> Any:
    score = result_to_score(_reason(), "0" * 31 + "1", "0" * 15 + "1")
    assert score is not None
    return score.comment


def _score_label(exporter: InMemorySpanExporter) -> Any:
    result = EvaluationResult(evaluator="judge", passed=True, reason="ok", detail={"label": HUGE})
    score = result_to_score(result, "0" * 31 + "1", "0" * 15 + "1")
    assert score is not None
    return score.string_value


ENTRY_POINTS: dict[str, tuple[Callable[[InMemorySpanExporter], Any], int]] = {
    "decorator input": (_decorator_input, len(HUGE)),
    "decorator output": (_decorator_output, len(HUGE)),
    "tool argument (300k-key dict)": (_tool_argument, _work_limit(CAP)),
    "tool result": (_tool_result, len(HUGE)),
    "evaluator reason on the event": (_event_explanation, len(HUGE)),
    "evaluator label on the event": (_event_label, 100_000),
    "skip reason on the span": (_span_skip_reason, len(HUGE)),
    "evaluator reason on the log event": (_log_event_explanation, len(HUGE)),
    "score comment": (_score_comment, len(HUGE)),
    "score label": (_score_label, len(HUGE)),
}


@pytest.mark.parametrize("entry", list(ENTRY_POINTS), ids=list(ENTRY_POINTS))
@pytest.mark.usefixtures("small_cap", "provider")
def test_every_entry_point_writes_at_most_the_cap(entry: str, exporter: InMemorySpanExporter) -> None:
    produce, minimum = ENTRY_POINTS[entry]
    assert_capped_marker(produce(exporter), minimum)


@pytest.mark.usefixtures("small_cap")
def test_the_result_itself_keeps_the_full_reason() -> None:
    result = _reason()
    evaluation_event_attributes(result)
    result_to_score(result, "0" * 31 + "1", "0" * 15 + "1")
    assert result.reason == HUGE


@pytest.mark.usefixtures("small_cap")
def test_short_reasons_are_written_unchanged() -> None:
    result = EvaluationResult(evaluator="judge", passed=True, reason="fine", detail={"label": "good"})
    score = result_to_score(result, "0" * 31 + "1", "0" * 15 + "1")
    assert score is not None and score.comment == "fine"
    assert evaluation_event_attributes(result)["gen_ai.evaluation.explanation"] == "fine"


# --- bounded work, counted ------------------------------------------------------------------------------


class CountingDict(dict[str, int]):
    """A dict that counts the items read through ``items()`` (what the encoder walks)."""

    reads = 0

    def items(self) -> Iterator[tuple[str, int]]:  # type: ignore[override]
        for pair in super().items():
            CountingDict.reads += 1
            yield pair


class CountingList(list[int]):
    """A list that counts the items read through iteration."""

    reads = 0

    def __iter__(self) -> Iterator[int]:
        for item in super().__iter__():
            CountingList.reads += 1
            yield item


class CountingMapping(Mapping[str, int]):
    """A non-dict mapping (goes through the ``default`` hook) that counts the keys it hands out."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.reads = 0

    def __getitem__(self, key: str) -> int:
        return int(key[1:])

    def __iter__(self) -> Iterator[str]:
        for i in range(self.size):
            self.reads += 1
            yield f"k{i}"

    def __len__(self) -> int:
        return self.size


@pytest.mark.parametrize("size", [10_000, 1_000_000])
def test_a_big_dict_is_read_only_as_far_as_the_cap(size: int) -> None:
    CountingDict.reads = 0
    value = CountingDict({f"key{i}": i for i in range(size)})
    out = capped_json({"arg": value}, CAP)
    assert json.loads(out)[TRUNCATED_KEY] is True
    # Each item emits at least 5 characters, so no more than limit/5 items can be read, whatever the size.
    assert CountingDict.reads <= _work_limit(CAP) // 5 + 1


def test_a_big_list_is_read_only_as_far_as_the_cap() -> None:
    CountingList.reads = 0
    out = capped_json(CountingList(range(1_000_000)), CAP)
    assert json.loads(out)[TRUNCATED_KEY] is True
    assert CountingList.reads <= _work_limit(CAP) // 2 + 1


def test_a_big_mapping_and_set_are_not_materialised() -> None:
    mapping = CountingMapping(1_000_000)
    capped_json(mapping, CAP)
    assert mapping.reads <= 1_000  # the hook keeps the first 1000 items and reads no further


def test_a_huge_string_is_sliced_before_it_is_escaped() -> None:
    text = "\u2028\n" * 5_000_000  # 10M characters; escaping all of it would allocate tens of MB
    tracemalloc.start()
    try:
        out = capped_json({"text": text}, CAP)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(out) <= CAP
    marker = json.loads(out)
    assert marker[MINIMUM_KEY] is True and marker["original_length"] >= len(text)
    assert peak < 50 * _work_limit(CAP)  # O(cap) bytes, not O(len(text))


def test_a_huge_custom_repr_is_cut() -> None:
    class Loud:
        def __repr__(self) -> str:
            return "x" * 1_000_000

    out = capped_json({"obj": Loud(), "nan": math.nan}, CAP)  # NaN: the fallback's rules, where repr is used too
    assert len(out) <= CAP
    assert json.loads(out)["obj"].endswith("...")
    deep = capped_json([_nested(20, list(range(10**6))), math.nan], CAP)  # repr of a big list at depth 12
    assert len(deep) <= CAP


def test_capped_text_reads_only_a_prefix() -> None:
    text = "\n" * 20_000_000
    tracemalloc.start()
    try:
        out = capped_text(text, CAP)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(out) <= CAP and json.loads(out)[TRUNCATED_KEY] is True
    assert peak < 50 * _work_limit(CAP)


# --- values that fit are unchanged ----------------------------------------------------------------------


class Colour(enum.Enum):
    RED = "red"


class Level(enum.IntEnum):
    HIGH = 3


class Model(pydantic.BaseModel):
    name: str
    tags: list[str]


class Broken(pydantic.BaseModel):
    def model_dump(self, **kwargs: Any) -> dict[str, Any]:
        raise RuntimeError("boom")


@dataclasses.dataclass
class Point:
    x: int
    y: list[int]


class Opaque:
    def __repr__(self) -> str:
        return "<Opaque>"


def _circular() -> list[Any]:
    items: list[Any] = [1, {"a": 2}]
    items.append(items)
    return items


def _nested(depth: int, leaf: Any) -> Any:
    value = leaf
    for _ in range(depth):
        value = [value]
    return value


CORPUS: dict[str, Any] = {
    "plain": {"question": "What is the weather?", "context": {"user": "ada", "turn": 3}, "n": [1.5, None, True]},
    "unicode and escapes": ['é\u2028\n"\\', "\x00"],
    "model": {"m": Model(name="m", tags=["a"]), "broken": Broken()},
    "dataclass": Point(1, [2, 3]),
    "sets": [{3, 1, 2}, frozenset({"b", "a"}), {1, "a"}],
    "tuple": (1, (2, 3)),
    "bytes": [b"abc", bytearray(b"\x00" * 100), memoryview(b"xyz")],
    "dates and enums": [dt.datetime(2026, 1, 2, 3, 4, 5), dt.date(2026, 1, 2), Colour.RED, Level.HIGH],
    "scalars by str": [uuid.UUID(int=1), decimal.Decimal("1.10"), PurePosixPath("/a/b"), complex(1, 2)],
    "non-finite floats": {"x": math.nan, "y": [math.inf, -math.inf], "z": Opaque()},
    "circular": _circular(),
    "odd keys": {1: "a", 2.5: "b", None: "c", False: "d", (1, 2): "e", "1": "f", -3.0: "g"},
    "float keys": {1.5: "a", "s": {3}},
    "deep plain": _nested(300, "leaf"),
    "deep with a set": _nested(300, {1}),
    "very deep": _nested(3_000, 1),
    "dict subclass": CountingDict({"a": 1}),
    "mapping": CountingMapping(3),
    "opaque": Opaque(),
    "long list with nan": [*range(1_500), math.nan, {1}],
    "repr of nested containers": [_nested(20, {"k": (1,), "s": {"x"}, "f": frozenset()}), math.nan],
    "huge int": 10**5000,
    "long ints": [10**4000, -(10**300), {"k": 2**64}],
}


@pytest.mark.parametrize("name", list(CORPUS), ids=list(CORPUS))
def test_values_that_fit_serialise_exactly_as_the_c_encoder_does(name: str) -> None:
    value = CORPUS[name]
    reference = _dumps_or_repr(value)
    assert capped_json(value, 1_000_000) == reference
    assert capped_json(value, 0) == reference
    if len(reference) > 100:  # over a small cap: the same marker as before, unless the walk stopped early
        marker = json.loads(capped_json(value, 100))
        assert marker.get(MINIMUM_KEY) or marker["original_length"] == len(reference)


def _dumps_or_repr(value: Any) -> str:
    try:
        return _dumps(value)
    except Exception:
        return capped_json(value, 0)


@pytest.mark.parametrize(
    "value",
    [
        [1, "a", (2,), {"k": {3}}],
        {"x": [None] * 100, "y": "z" * 300},
        _nested(40, ("a", frozenset({1}))),
        _circular(),
        (),
        set(),
        "it's",
        b"\x00" * 500,
    ],
    ids=["mixed", "long", "deep", "circular", "empty tuple", "empty set", "quote", "bytes"],
)
def test_short_repr_is_the_start_of_repr(value: Any) -> None:
    full = repr(value)
    assert _short_repr(value) == (full if len(full) <= 200 else full[:197] + "...")


@pytest.mark.usefixtures("small_cap", "provider")
def test_mapping_says_a_stopped_length_is_a_minimum(exporter: InMemorySpanExporter) -> None:
    _decorator_input(exporter)
    trace = mapping.trace_from_spans(exporter.get_finished_spans())
    (note,) = trace.extra["enrichment_errors"]
    assert note["enricher"] == "evaltrace.mapping"
    found = re.search(r"\(original length at least (\d+)\)", note["error"])
    assert found is not None and int(found[1]) >= len(HUGE)
