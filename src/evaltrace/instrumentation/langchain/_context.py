"""The OTel context of LangChain runs: what a run makes current, and how it is restored however runs end.

A run's start makes a context current so that code inside the run (the model SDK's call, a tool's body, an
``@evaltrace`` function) nests under the run's span. LangChain does not promise to end runs where it started
them: ``batch`` starts every input's run before ending them in start order, async runs end in a *copy* of the
caller's context (the end callbacks are ``shielded``: a task of their own), and LangGraph's async nodes start in
the graph's task and end in theirs. Two things keep that harmless:

* What the context holds is a :class:`RunSpan`: the run's span while it runs, then the span that was current
  before it. A context nobody could restore (it was left behind in a caller's context) parents later spans where
  they would have gone without the run, never under an ended span.
* :meth:`Contexts.leave` restores with the run's token when it can, in any order (see its docstring).
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping, Sequence
from contextvars import Token
from dataclasses import dataclass
from typing import Any

from opentelemetry.context import Context
from opentelemetry.trace import INVALID_SPAN, Span, SpanContext, Status, StatusCode
from opentelemetry.util.types import AttributeValue

from evaltrace._internal.fast_context import SPAN_KEY, attach, detach, get_current

_MAX_ATTACHED = 4096  # contexts of ended runs left behind (ended in another context) are pruned past this


@dataclass(slots=True, eq=False)
class Run:
    """What the handler keeps of one run between its start and its end."""

    span: Span | None  # None: a run shown through its nearest ancestor (hidden, or a model call the SDK records)
    shown: Span  # the span code inside the run sees: its own, else its nearest ancestor's
    context: Context  # the context the run's children start under
    previous: Context  # the context current when the run started
    kind: str
    started_ns: int = 0
    active: Context | None = None  # the context the run's start made current (None: it made none)
    token: Token[Context] | None = None  # restores the context before ``active``
    first_chunk_ns: int | None = None  # the first chunk carrying output (text, reasoning, tool-call arguments)
    last_chunk_ns: int | None = None
    chunks: int = 0
    ended: bool = False
    model: str | None = None  # a model call's request model and provider, to price it by
    provider: str | None = None
    namespace: str | None = None  # a LangGraph run's ``langgraph_checkpoint_ns``: a node's differs from its graph's
    graph_name: str | None = None  # a task run's name while it may be a LangGraph subgraph (see the handler)
    tool_call_id: str | None = None  # a tool run's call id, when LangChain gave one
    session: str | None = None  # the LangGraph thread stamped as ``session.id`` on this run and what runs inside it


def span_of(context: Context) -> Span:
    """The span current in ``context`` (``INVALID_SPAN`` when none is)."""
    span = context.get(SPAN_KEY)
    return span if isinstance(span, Span) else INVALID_SPAN


class RunSpan(Span):
    """The current span inside a run: the run's shown span while it runs, then the one current before it."""

    __slots__ = ("_run",)

    def __init__(self, run: Run) -> None:
        self._run = run

    def target(self) -> Span:
        """The span this stands for now."""
        run = self._run
        return span_of(run.previous) if run.ended else run.shown

    def get_span_context(self) -> SpanContext:
        """The target's span context (what a child span is parented to)."""
        return self.target().get_span_context()

    def is_recording(self) -> bool:
        """Whether the target records."""
        return bool(self.target().is_recording())

    def set_attributes(self, attributes: Mapping[str, AttributeValue]) -> None:
        """Set attributes on the target."""
        self.target().set_attributes(attributes)

    def set_attribute(self, key: str, value: AttributeValue) -> None:
        """Set one attribute on the target."""
        self.target().set_attribute(key, value)

    def add_event(self, name: str, attributes: Any = None, timestamp: int | None = None) -> None:
        """Add an event to the target."""
        self.target().add_event(name, attributes, timestamp)

    def add_link(self, context: SpanContext, attributes: Any = None) -> None:
        """Add a link to the target."""
        self.target().add_link(context, attributes)

    def update_name(self, name: str) -> None:
        """Rename the target."""
        self.target().update_name(name)

    def set_status(self, status: Status | StatusCode, description: str | None = None) -> None:
        """Set the target's status."""
        self.target().set_status(status, description)

    def record_exception(
        self, exception: BaseException, attributes: Any = None, timestamp: int | None = None, escaped: bool = False
    ) -> None:
        """Record an exception on the target."""
        self.target().record_exception(exception, attributes, timestamp, escaped)

    def end(self, end_time: int | None = None) -> None:
        """Not ours to end from outside: the run ends its span when LangChain ends the run."""


class WhileRequesting:
    """A context flag that is true while a model run makes its request: until its first chunk, or its end.

    A streamed model run (``model.stream()``) stays current in the caller's context while the caller's loop body
    runs between chunks; the request the model's SDK makes is done by the first chunk, so the flag (the
    LLM-suppression key) is false from then on, and the application's own model calls in that loop are traced.
    A key left behind in a context goes false by itself when the run ends.
    """

    __slots__ = ("_run",)

    def __init__(self, run: Run) -> None:
        self._run = run

    def __bool__(self) -> bool:
        run = self._run
        return not run.ended and not run.chunks


class Contexts:
    """The contexts runs made current, and their restoration.

    The table holds each context weakly: a context left behind in a task that is gone (every async run's, which
    ends in a copy of its context) takes its entry, its run and its span with it. A context left behind in a
    task that lives on (the caller's, across ``ainvoke`` calls) is released when the next run starts there on
    top of it (:meth:`_release_ended_below`), so nothing piles up between runs.
    """

    def __init__(self) -> None:
        # id(context a run's start made current) -> that context, weakly, until it is restored or released.
        self._attached: dict[int, weakref.ref[Context]] = {}

    def __len__(self) -> int:
        return len(self.runs())

    def runs(self) -> Sequence[Run]:
        """The runs whose contexts are not restored yet (for tests and debugging)."""
        runs = []
        for ref in list(self._attached.values()):  # one C-level copy: safe beside other threads
            context = ref()
            run = _run_in(context) if context is not None else None
            if run is not None:
                runs.append(run)
        return runs

    def _get(self, context: Context) -> Run | None:
        """The run whose start made ``context`` current, while its entry is kept."""
        ref = self._attached.get(id(context))
        if ref is None or ref() is not context:
            return None
        run = _run_in(context)
        return run if run is not None and run.active is context else None

    def outside(self, context: Context) -> Context:
        """``context`` without the runs of ours it is the context of (their starts made it current).

        A run LangChain reports without a parent is a sibling of our runs in flight here, never their child:
        ``batch`` starts every input's run before the first one ends, each making its span current.
        """
        while (run := self._get(context)) is not None:
            context = run.previous
        return context

    def enter(self, run: Run, current: Context, extra: Mapping[str, object] | None = None) -> None:
        """Make the run's :class:`RunSpan` (and ``extra`` values) current."""
        values: dict[str, object] = {**current, SPAN_KEY: RunSpan(run)}
        if extra:
            values.update(extra)
        active = Context(values)
        run.previous = self._release_ended_below(current)
        if len(self._attached) >= _MAX_ATTACHED:  # rare: forget what no restore can need any more
            for key, ref in list(self._attached.items()):  # one C-level copy: safe beside other threads
                left = ref()
                left_run = _run_in(left) if left is not None else None
                if left_run is None or left_run.ended:
                    self._attached.pop(key, None)
        run.active, run.token = active, attach(active)
        key, attached = id(active), self._attached

        def forget(ref: weakref.ref[Context]) -> None:  # the context is gone: so is any use of its entry
            if attached.get(key) is ref:
                attached.pop(key, None)

        attached[key] = weakref.ref(active, forget)

    def _release_ended_below(self, current: Context) -> Context:
        """Release the runs left behind under ``current`` when all of them ended; the context below them.

        Such runs ended in another context (an async run's end), so nothing restores them here, and no run of
        ours still going below them can walk past them in :meth:`leave`. Their entries and tokens are dropped and
        each stands for the context below them all (what their RunSpans stood for already), so a context left
        current in a long-lived task holds at most one ended run, never a chain of every run before it.
        """
        context, ended = current, []
        while (run := self._get(context)) is not None:
            if not run.ended:
                return current  # a run still going here: its leave may restore the ones above it
            ended.append(run)
            context = run.previous
        for run in ended:
            self._attached.pop(id(run.active), None)
            run.previous, run.token = context, None
        return context

    def leave(self, run: Run) -> None:
        """Restore the context the run's start replaced (``run.ended`` is set), whatever order runs end in.

        * In order (the common case): the run's context is the current one; its token restores the one before.
        * Runs started after it here are still going (``batch``): its context is restored with the last of them.
        * Runs started after it here ended elsewhere (LangGraph's async nodes): nothing restored their contexts,
          so the walk passes them and the run's token restores the context from before all of them.
        * The run ends in another context than it started in (an async run's end): its token cannot be used
          here. Its RunSpan, left current there, now stands for the span before it.
        """
        if run.token is None:
            return
        passed: list[Run] = []
        context = get_current()
        while context is not run.active:
            above = self._get(context)
            if above is None or not above.ended:
                return  # ended in another context, or a later run is still going here
            passed.append(above)
            context = above.previous
        try:
            detach(run.token)
        except (ValueError, RuntimeError):  # the same context's copy (a shielded end): the token is not its
            return
        for done in (*passed, run):
            self._attached.pop(id(done.active), None)
        # Ended runs whose contexts waited under this one (batch) are restored with it.
        while (below := self._get(context := get_current())) is not None and below.ended:
            try:
                detach(below.token)  # type: ignore[arg-type]  # every attached run has its token
            except (ValueError, RuntimeError):
                return
            self._attached.pop(id(context), None)


def _run_in(context: Context) -> Run | None:
    """The run whose :class:`RunSpan` ``context`` holds (every context :meth:`Contexts.enter` makes does)."""
    span = context.get(SPAN_KEY)
    return span._run if isinstance(span, RunSpan) else None
