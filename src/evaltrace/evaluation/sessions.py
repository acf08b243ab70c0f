"""Session buffer of session-scope evaluation: the completed traces of each session until the session is judged.

A *session* is every trace sharing ``session.id``. Its traces arrive here one by one as they complete (the trace
completion buffer decides that, see ``completion``), already mapped to :class:`~evaltrace.schema.Trace`. A session
is *due* once no trace of it arrived for ``quiet_s`` seconds, or at once after ``end(session_id)`` (the
``evaltrace.end_session()`` call, or a span carrying the ``evaltrace.session.end`` marker); in both cases only when
no trace of it is still being mapped (``expect``/``settle`` count those), so a turn that completed just before
``end_session()`` is part of the judgement.

A judged session stays here: a trace of it arriving later (a user coming back, a late span re-opening a turn)
makes it due again, as a new *revision* judged on every turn. Score ids do not depend on the revision, so sinks
upsert the new verdict over the old one. A trace re-evaluated after late spans replaces its earlier version.

Bounds (memory): ``max_sessions`` sessions, ``max_traces`` traces per session, ``max_bytes`` (an estimate of the
traces' JSON size) over all sessions. Past a bound the least recently active session is evicted (or, within a
session, its oldest turn); each loss is counted (:class:`SessionStats`) and reported once per episode. A session
evicted is never judged again from what arrives later, whether it was judged before or not (its id is remembered,
``4 * max_sessions`` ids): judging its later turns alone as the whole conversation would give false verdicts, and a
judged one's partial verdict would replace its full one under the same score id. A process restart forgets those
ids (as it forgets the sessions themselves): a session going on across a restart is judged on the turns after it.
The byte bound uses :func:`trace_size`, an estimate of the memory the traces' Python objects take (from their JSON:
its length plus an overhead per value, measured), not their JSON length, which is up to 5 times smaller.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from evaltrace._internal.errors import log_internal_error, mapping_failure
from evaltrace.mapping._lazy import materialize
from evaltrace.schema import Trace
from evaltrace.schema.conversation import Conversation

DEFAULT_SESSION_QUIET_PERIOD_S = 120.0
DEFAULT_SESSION_MAX_SESSIONS = 1000
DEFAULT_SESSION_MAX_TRACES = 200
DEFAULT_SESSION_MAX_BYTES = 64 * 1024 * 1024


@dataclass
class SessionStats:
    """Counters of the session buffer (``stats()["sessions"]``).

    Attributes:
        open_sessions: Sessions held now (judged or waiting).
        traces: Traces held now.
        bytes: Estimated size of the traces held now.
        traces_added: Completed traces added (a re-evaluated trace counts again).
        judged: Session judgements handed out (each revision counts).
        rejudged: Of those, revisions after the first.
        ended: Sessions asked to end (``end_session()``, end markers); a call that also marked the turn it was
            made in counts once.
        evicted_sessions: Sessions evicted by a bound before their latest traces were judged (lost judgements).
        forgotten_sessions: Judged sessions evicted by a bound (a later trace of theirs is not judged: counted in
            ``after_eviction``).
        dropped_turns: Oldest turns dropped from a session over ``max_traces`` (the session is judged without them).
        after_eviction: Traces of an evicted session (judged or not), not added (never judged from a part).
        without_session: Completed traces a session-scope evaluator applied to that carry no ``session.id``.
    """

    open_sessions: int = 0
    traces: int = 0
    bytes: int = 0
    traces_added: int = 0
    judged: int = 0
    rejudged: int = 0
    ended: int = 0
    evicted_sessions: int = 0
    forgotten_sessions: int = 0
    dropped_turns: int = 0
    after_eviction: int = 0
    without_session: int = 0


@dataclass
class OpenSession:
    """One session held: its latest traces by trace id (in arrival order) and what to judge them with."""

    session_id: str
    last: float
    traces: OrderedDict[str, Trace] = field(default_factory=OrderedDict)
    sizes: dict[str, int] = field(default_factory=dict)
    specs: dict[int, Any] = field(default_factory=dict)  # id(evaluator) -> spec, in first-seen order
    user_id: str | None = None
    revision: int = 0
    dirty: bool = False
    ended: bool = False
    pending: int = 0
    dropped_turns: int = 0

    @property
    def size(self) -> int:
        """Estimated bytes of the traces held."""
        return sum(self.sizes.values())


@dataclass(frozen=True)
class DueSession:
    """A session handed out for judgement: the conversation (revision in ``extra``) and the evaluators to run.

    ``conversation`` is None when a turn's Trace has a field that failed to map (``FieldMappingFailed``), or the
    conversation could not be built from its turns for another reason (both bugs of ours): the session is not
    judged (``mapping_failed``) rather than judged without that turn or that field.
    """

    session_id: str
    conversation: Conversation | None
    specs: tuple[Any, ...]
    revision: int


# A held trace's Python objects cost its text (about its JSON length) plus a fixed overhead per value (the str,
# int, dict or model object around it, and its slot in a dict or list). Measured with tracemalloc on traces from
# bare to long answers: JSON length alone is 1.1 to 5.4 times too small; this estimate is 1.0 to 1.3 times the
# measured size.
BYTES_PER_VALUE = 60


def trace_size(trace: Trace) -> int:
    """Estimate the memory a held trace costs: its JSON length plus ``BYTES_PER_VALUE`` per JSON value."""
    try:
        text = trace.model_dump_json()
    except Exception:  # never lose a trace over an estimate
        return 64 * 1024
    return len(text) + BYTES_PER_VALUE * (text.count('":') + text.count(",") + 1)


class SessionBuffer:
    """Completed traces per session until the session is due; see the module docstring.

    Args:
        quiet_s: Seconds without a new trace before a session is due.
        max_sessions: Sessions held at once.
        max_traces: Traces held per session.
        max_bytes: Estimated bytes held over all sessions.
        on_loss: Called (outside the lock) with a description whenever something is given up (one WARNING per
            episode is the caller's job).
        clock: Monotonic seconds (injectable for tests).
    """

    def __init__(
        self,
        quiet_s: float,
        max_sessions: int,
        max_traces: int,
        max_bytes: int,
        on_loss: Callable[[int, str], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.quiet_s = quiet_s
        self._max_sessions = max_sessions
        self._max_traces = max_traces
        self._max_bytes = max_bytes
        self._on_loss = on_loss
        self._clock = clock
        self._sessions: OrderedDict[str, OpenSession] = OrderedDict()  # least recently active first
        self._evicted: OrderedDict[str, None] = OrderedDict()  # evicted (judged or not): never judged from a part
        self._ended: OrderedDict[str, None] = OrderedDict()  # end_session() before any trace of it arrived
        self._bytes = 0
        self._traces = 0  # traces held over all sessions (a running total: add() must not sum every session)
        self._losses: list[tuple[int, str]] = []  # noted under the lock, reported outside it
        self._lock = threading.Lock()
        self.stats = SessionStats()

    def expect(self, session_id: str) -> None:
        """A trace of ``session_id`` completed and is being mapped: the session is not due before it arrives."""
        with self._lock:
            entry = self._sessions.get(session_id)
            if entry is None:
                if session_id in self._evicted:
                    return
                entry = self._insert(session_id)
            entry.pending += 1
        self._report()

    def settle(self, session_id: str) -> None:
        """A trace :meth:`expect` announced will not arrive (its mapping failed, or it was cut short)."""
        with self._lock:
            entry = self._sessions.get(session_id)
            if entry is not None and entry.pending > 0:
                entry.pending -= 1

    def add(
        self,
        session_id: str,
        trace: Trace,
        specs: Sequence[Any],
        *,
        user_id: str | None = None,
        ended: bool = False,
        expected: bool = True,
    ) -> None:
        """Add (or replace, by trace id) a completed trace of ``session_id`` with the evaluators that apply.

        Args:
            session_id: The session.
            trace: The mapped trace.
            specs: Session-scope evaluator specs admitted for it.
            user_id: The session's user, when the trace tells.
            ended: The trace carries the session end marker: the session is due at once.
            expected: The trace was announced with :meth:`expect`.
        """
        # Imported here: the mapping package is not loaded with the processor (start-up), only with a first trace.
        from evaltrace.mapping._lazy import release

        release(trace)  # held until the session is judged: its values, never the spans a lazy Trace maps from
        size = trace_size(trace)
        with self._lock:
            entry = self._sessions.get(session_id)
            if entry is None:
                if session_id in self._evicted:
                    self.stats.after_eviction += 1
                    return
                entry = self._insert(session_id)
            elif expected and entry.pending > 0:
                entry.pending -= 1
            key = str(trace.extra.get("trace_id") or f"#{len(entry.traces)}")
            if key in entry.traces:
                self._bytes -= entry.sizes.pop(key, 0)
                del entry.traces[key]
                self._traces -= 1
            entry.traces[key] = trace
            self._traces += 1
            entry.sizes[key] = size
            self._bytes += size
            for spec in specs:
                entry.specs.setdefault(id(spec.evaluator), spec)
            entry.user_id = entry.user_id or user_id
            entry.dirty = True
            if session_id in self._ended:  # end_session() came before this trace had completed (counted then)
                del self._ended[session_id]
                entry.ended = True
            if ended and not entry.ended:  # the marker of an end_session() call applied already counts once
                entry.ended = True
                self.stats.ended += 1
            entry.last = self._clock()
            self._sessions.move_to_end(session_id)
            self.stats.traces_added += 1
            while len(entry.traces) > self._max_traces:
                oldest, _ = entry.traces.popitem(last=False)
                self._bytes -= entry.sizes.pop(oldest, 0)
                self._traces -= 1
                entry.dropped_turns += 1
                self.stats.dropped_turns += 1
                self._losses.append((1, f"sessions hold at most {self._max_traces} traces; the oldest turn is dropped"))
            while self._bytes > self._max_bytes and len(self._sessions) > 1:
                self._evict_oldest(f"session traces exceed {self._max_bytes} bytes")
            self._count()
        self._report()

    def end(self, session_id: str) -> None:
        """``evaltrace.end_session(session_id)``: judge the session as soon as no trace of it is being mapped.

        A session judged already with nothing new (no trace since, none being mapped) has nothing to judge: the
        request is counted and dropped, so the user's next trace waits for its quiet period as usual.
        """
        with self._lock:
            entry = self._sessions.get(session_id)
            if entry is not None:
                if not entry.ended:  # its end marker arrived already: that was this request, counted once
                    self.stats.ended += 1
                entry.ended = entry.dirty or entry.pending > 0
                return
            self.stats.ended += 1
            self._ended[session_id] = None
            while len(self._ended) > self._max_sessions:
                self._ended.popitem(last=False)

    def collect(self, *, drain: bool = False) -> list[DueSession]:
        """Take the sessions due now; ``drain`` (shutdown, ``force_flush``) takes every session with new traces."""
        now = self._clock()
        due: list[DueSession] = []
        with self._lock:
            for entry in self._sessions.values():
                if not entry.dirty or not entry.specs:
                    continue
                quiet = entry.last + self.quiet_s <= now
                if not (drain or (entry.pending <= 0 and (entry.ended or quiet))):
                    continue
                entry.dirty = False
                entry.ended = False
                entry.revision += 1
                self.stats.judged += 1
                if entry.revision > 1:
                    self.stats.rejudged += 1
                extra: dict[str, Any] = {"revision": entry.revision}
                if entry.dropped_turns:
                    extra["dropped_turns"] = entry.dropped_turns
                try:
                    traces = list(entry.traces.values())
                    for trace in traces:
                        # Every field mapped now: a turn with a field that failed to map (FieldMappingFailed) makes
                        # the session not evaluated, rather than judged on what a session evaluator happens to read.
                        materialize(trace)
                    conversation = Conversation.from_traces(entry.session_id, traces, user_id=entry.user_id, **extra)
                except Exception as exc:  # FieldMappingFailed, maybe wrapped by the validation reading the field
                    if mapping_failure(exc) is None:
                        # Any other failure to build it is a bug of ours too: this session is counted as not
                        # evaluated (never judged from a part) and the other sessions due now still go out.
                        log_internal_error("building a session's conversation")
                    # A field's failure was logged once already, when add()'s release() first read the field.
                    due.append(DueSession(entry.session_id, None, tuple(entry.specs.values()), entry.revision))
                    continue
                # In turn order (from_traces sorts by start time), not arrival order: trace_ids[i] is turn i's.
                keys = {id(trace): key for key, trace in entry.traces.items()}
                conversation.extra["trace_ids"] = [keys.get(id(turn.trace), "") for turn in conversation.turns]
                due.append(DueSession(entry.session_id, conversation, tuple(entry.specs.values()), entry.revision))
        return due

    def is_latest(self, session_id: str, revision: int) -> bool:
        """Whether no newer revision of ``session_id`` was handed out (an older verdict must not overwrite it)."""
        with self._lock:
            entry = self._sessions.get(session_id)
            return entry is None or entry.revision <= revision

    def waiting(self) -> bool:
        """Whether a session waits to be judged (the timer keeps ticking while one does)."""
        with self._lock:
            return any(entry.dirty for entry in self._sessions.values())

    def __len__(self) -> int:
        return len(self._sessions)

    # --- under the lock -----------------------------------------------------------------------------------

    def _insert(self, session_id: str) -> OpenSession:
        while len(self._sessions) >= self._max_sessions:
            self._evict_oldest(f"{self._max_sessions} sessions are held already")
        entry = OpenSession(session_id, last=self._clock())
        self._sessions[session_id] = entry
        self._count()
        return entry

    def _evict_oldest(self, why: str) -> None:
        _, oldest = self._sessions.popitem(last=False)
        self._bytes -= oldest.size
        self._traces -= len(oldest.traces)
        # Remembered either way: a later trace alone would be judged as the whole session, and for a judged one
        # that partial verdict would replace the full one (same score id) in every sink but the local store.
        self._evicted[oldest.session_id] = None
        self._evicted.move_to_end(oldest.session_id)
        while len(self._evicted) > 4 * self._max_sessions:
            self._evicted.popitem(last=False)
        if oldest.dirty or oldest.pending > 0:  # turns not judged yet: a judgement lost
            self.stats.evicted_sessions += 1
            self._losses.append((1, f"{why}; a session is evicted before it was judged"))
            return
        self.stats.forgotten_sessions += 1  # judged already: only a later re-judgement is given up

    def _count(self) -> None:
        self.stats.open_sessions = len(self._sessions)
        self.stats.traces = self._traces
        self.stats.bytes = self._bytes

    def _report(self) -> None:
        """Tell ``on_loss`` what was given up since the last report (outside the lock: it logs)."""
        if not self._losses:
            return
        with self._lock:
            losses, self._losses = self._losses, []
        if self._on_loss is None:
            return
        for count, what in losses:
            try:  # it logs, maybe on the application's thread (a root's end): a failing log filter stays here
                self._on_loss(count, what)
            except Exception:
                log_internal_error("reporting a session loss")
