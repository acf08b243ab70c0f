"""``slot_reader``: a batch fold's read of a pydantic model's ``__dict__`` / extras is the attribute itself."""

from __future__ import annotations

from typing import Any

import pydantic

from evaltrace._internal.engine.codec import slot_reader


class _Delta(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="allow")
    content: str | None = None


class _Choice(pydantic.BaseModel):
    index: int = 0
    delta: _Delta | None = None

    def __getattr__(self, name: str) -> Any:  # a model's own hook: the descriptor is still read first
        return super().__getattr__(name)


def test_the_reader_returns_the_very_object_the_attribute_read_returns() -> None:
    fields_of = slot_reader((_Choice, _Delta), "__dict__")
    extra_of = slot_reader((_Choice, _Delta), "__pydantic_extra__")
    delta = _Delta.model_validate({"content": "hi", "channel": "final"})
    choice = _Choice(index=2, delta=delta)
    assert fields_of is not None and extra_of is not None
    assert fields_of(choice) is choice.__dict__ and fields_of(choice) == {"index": 2, "delta": delta}
    assert fields_of(delta) is delta.__dict__
    assert extra_of(delta) is delta.__pydantic_extra__ and extra_of(delta) == {"channel": "final"}
    assert extra_of(_Delta()) == {}


def test_no_reader_where_the_attribute_is_not_one_shared_data_descriptor() -> None:
    class Plain:  # no class-level descriptor named so: the instance's own value would win
        pass

    assert slot_reader((_Delta,), "no_such_attribute") is None
    assert slot_reader((_Delta, Plain), "__pydantic_extra__") is None  # not shared by every class
    assert slot_reader((_Delta,), "model_dump") is None  # a function: not a data descriptor
    assert slot_reader((_Delta, Plain), "__dict__") is None  # two different descriptors
    reader = slot_reader((Plain,), "__dict__")  # a plain class's own ``__dict__`` getset: one class, one descriptor
    plain = Plain()
    assert reader is not None and reader(plain) is plain.__dict__
