"""A ``trace_from_spans`` that also proves the lazy mapping equal to the eager one on the same spans.

``tests/conftest.py`` puts :func:`checked_trace_from_spans` in place of ``trace_from_spans`` in every test module
that imported it, so each mapping test input is mapped both ways: every field read alone on a fresh lazy Trace (the
others left unmapped), every field read in reverse order, then the whole Trace dumped, compared, pickled, printed
and copied, all equal to the eager Trace, which the test then receives and checks as before.
"""

from __future__ import annotations

import copy
import pickle
from collections.abc import Callable, Sequence
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan

from evaltrace.mapping import _build
from evaltrace.mapping._lazy import _DICT, FIELDS, LazyTrace
from evaltrace.schema import Trace

ORIGINAL = _build.trace_from_spans
READS = (*FIELDS, "latency_ms")
WHOLE_READS: tuple[Callable[[Trace], Any], ...] = (
    repr,
    str,
    copy.copy,
    copy.deepcopy,
    Trace.model_copy,
    Trace.model_dump,
    lambda trace: trace.model_dump(exclude_unset=True),
    lambda trace: trace.model_dump(mode="json"),
)


def unmapped(trace: Trace) -> set[str]:
    """The fields of a lazy Trace not mapped yet (none for a plain Trace)."""
    return set(FIELDS) - set(_DICT.__get__(trace)) if type(trace) is LazyTrace else set()


def check_lazy(spans: Sequence[ReadableSpan], root: Any, eager: Trace) -> None:
    """Assert that every read of the lazy Trace of ``spans`` gives what ``eager`` holds."""
    for name in READS:  # one field alone: equal, and no other field mapped (identity aside)
        lazy = ORIGINAL(spans, root, lazy=True)
        assert type(lazy) is LazyTrace
        assert getattr(lazy, name) == getattr(eager, name), name
        assert type(lazy) is LazyTrace, f"reading {name} mapped the whole trace"
    lazy = ORIGINAL(spans, root, lazy=True)
    for name in reversed(READS):
        assert getattr(lazy, name) == getattr(eager, name), name
    assert lazy.model_fields_set == eager.model_fields_set
    assert lazy.model_dump_json() == eager.model_dump_json()  # same values, same field order
    assert type(lazy) is Trace  # read whole: a plain Trace from then on
    fresh = ORIGINAL(spans, root, lazy=True)
    assert fresh == eager and eager == ORIGINAL(spans, root, lazy=True)
    unpickled = pickle.loads(pickle.dumps(ORIGINAL(spans, root, lazy=True)))
    assert type(unpickled) is Trace and unpickled.model_dump() == eager.model_dump()
    # Each other whole read, first thing on a fresh lazy Trace: the same text, dump or copy as the eager Trace's.
    for read in WHOLE_READS:
        fresh = ORIGINAL(spans, root, lazy=True)
        got, want = read(fresh), read(eager)
        assert got == want, read
        if isinstance(got, Trace):
            assert type(got) is Trace and got.model_fields_set == want.model_fields_set, read
            assert got.model_dump_json() == want.model_dump_json(), read
        assert type(fresh) is Trace, read


def checked_trace_from_spans(
    spans: Sequence[ReadableSpan], root: ReadableSpan | int | str | None = None, **kwargs: Any
) -> Trace:
    """``trace_from_spans(spans, root)``, after checking the lazy mapping of the same spans against it."""
    eager = ORIGINAL(spans, root, **kwargs)
    if not kwargs.get("lazy"):
        check_lazy(spans, root, eager)
    return eager
