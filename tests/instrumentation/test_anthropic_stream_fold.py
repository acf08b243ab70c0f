"""The Anthropic accumulator's batch fold reads exactly what ``add`` reads, event by event (real SDK event types)."""

from __future__ import annotations

from typing import Any

import pytest

anthropic = pytest.importorskip("anthropic")

from anthropic._models import construct_type  # noqa: E402
from anthropic.types import RawMessageStreamEvent  # noqa: E402
from anthropic.types.beta import BetaRawMessageStreamEvent  # noqa: E402

from evaltrace._internal.anthropic.accumulate import MessagesAccumulator  # noqa: E402


def _events(union: Any) -> list[Any]:
    raw: list[dict[str, Any]] = [
        {"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": ""}},
        *(
            {"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": f"t{i} "}}
            for i in range(70)
        ),
        {"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "sig"}},
        {"type": "content_block_stop", "index": 0},
        {"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}},
        *(
            {"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": f"w{i} "}}
            for i in range(100)
        ),
        # A delta kind this SDK does not know: built as the union's first variant (a TextDelta with no text).
        {"type": "content_block_delta", "index": 1, "delta": {"type": "future_delta", "x": 1}},
        {"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "end"}},
        {"type": "content_block_delta", "index": 7, "delta": {"type": "text_delta", "text": "no block"}},
        {"type": "content_block_stop", "index": 1},
        {
            "type": "content_block_start",
            "index": 2,
            "content_block": {"type": "tool_use", "id": "t", "name": "f", "input": {}},
        },
        {"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": '{"a"'}},
        {"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": ": 1}"}},
        {"type": "content_block_stop", "index": 2},
    ]
    return [construct_type(value=e, type_=union) for e in raw]


@pytest.mark.parametrize("union", [RawMessageStreamEvent, BetaRawMessageStreamEvent], ids=["messages", "beta"])
@pytest.mark.parametrize("batch", [1, 3, 64, 1000])
def test_batches_fold_to_what_add_folds_event_by_event(union: Any, batch: int) -> None:
    events = _events(union)
    one_by_one = MessagesAccumulator()
    for event in events:
        one_by_one.add(event)
    batched = MessagesAccumulator()
    for start in range(0, len(events), batch):
        batched.add_batch(events[start : start + batch])
    assert batched.outcome() == one_by_one.outcome()
    text = batched.outcome().output_messages[0]["parts"]
    assert any(p.get("content", "").endswith("w99 end") for p in text)  # the unknown delta kept nothing
