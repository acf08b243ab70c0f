"""Tool spans: match each to the assistant tool call it executed, or add it as a call plus result of its own."""

from __future__ import annotations

from typing import Any, NamedTuple

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import StatusCode

from evaltrace._internal import semconv as sc
from evaltrace.mapping import conventions
from evaltrace.mapping._call_index import CallIndex
from evaltrace.mapping._messages import tool_arguments, tool_content
from evaltrace.mapping._pairing import answered_calls
from evaltrace.mapping._placement import positions, spliced
from evaltrace.mapping._spans import MISSING, attrs, compact, json_attr, timestamp
from evaltrace.schema import ToolCall, TraceMessage


class Adoption(NamedTuple):
    """A call a tool span appended, and the copy of it a later model call's input holds, which stands for it."""

    call: ToolCall
    copy: ToolCall
    removed: list[TraceMessage]  # the call's message and its result message, taken out of the conversation


class ToolPlacer:
    """Places tool spans in a conversation; results of matched calls wait for ``insert_results``."""

    def __init__(self, notes: list[str]) -> None:
        self.notes = notes
        self.matched: set[int] = set()  # id() of assistant ToolCalls already claimed by a tool span
        # Claimed calls by their call id, with the number of model calls placed when claimed: a span under the
        # same id after a later model call is that call's (some servers number ids per response), not a re-run.
        self.by_id: dict[str, tuple[ToolCall, int]] = {}
        self.model_calls = 0  # model calls placed so far (``model_call``)
        self.answers: dict[int, TraceMessage] = {}  # id() of an appended call -> the result message appended
        self.produced: set[int] = set()  # id() of the result messages tool spans gave (appended or inserted)
        self.pending: list[tuple[ToolCall, Any]] = []
        # id() of the calls whose (last) tool span ended in error: their result is an error, whatever text the model
        # was sent for it (a retry prompt, the failure's description)
        self.failed: set[int] = set()
        # Calls appended by their tool span (no model call had asked for them yet), by id(): their last result.
        self.appended: dict[int, Any] = {}
        self.ran_at: dict[int, int] = {}  # id() of an appended call -> ``model_calls`` when its span ran
        # The calls a tool span matched in the conversation, with ``model_calls`` when it ran (``rehome``).
        self.matched_at: list[tuple[ToolCall, int]] = []
        # id() of a tool message a model was sent for a failed call -> the error result the tool result views give
        # (the message keeps what the model was sent: ``messages`` is the conversation as it happened).
        self.errors: dict[int, dict[str, Any]] = {}
        # The conversation's calls and their pairing, kept current as it grows (``_index``): built once, not per span.
        self._calls: CallIndex | None = None

    def add(self, messages: list[TraceMessage], span: ReadableSpan) -> ToolCall:
        """Stamp the call ``span`` executed with its start time, or append it to ``messages`` as call and result.

        Returns:
            The call the span executed, as it stands in ``messages`` (the matched one, or the one appended).
        """
        call, result, failed = self._read(span)
        matched = self._match(messages, call)
        again = (self._claimed_by_id(call) or self._matched_again(call)) if matched is None else None
        if again is not None:
            # The same call id run again: a call that waited for approval and ran on resume, or a retry. One call
            # the model asked for, so one call here; the result that arrived last is the one it was given.
            again.started_at = again.started_at or call.started_at
            self._mark(again, failed)
            if result is not MISSING and id(again) in self.appended:
                self.appended[id(again)] = result
            if result is not MISSING:
                answer = self.answers.get(id(again))
                if answer is not None:  # appended with the call: its message takes the new result
                    answer.content = tool_content(result)
                else:
                    self.pending = [(c, r) for c, r in self.pending if c is not again]
                    self.pending.append((again, result))
            return again
        if matched is not None:
            matched.started_at = call.started_at
            self._mark(matched, failed)
            self.pending.append((matched, result))
            if matched.id:
                self.by_id[matched.id] = (matched, self.model_calls)
            return matched
        # No model call's output holds it (none recorded one, or the application called the tool): the span's own
        # call, marked so. A later model input's copy of it takes its place (``adopt``), unmarked.
        call.from_tool_span = True
        messages.append(TraceMessage(role="assistant", tool_call=call))
        self._mark(call, failed)
        # Claimed at once: a later identical span (a repeated call) is a call of its own, not this one again.
        self.matched.add(id(call))
        self.appended[id(call)] = result
        self.ran_at[id(call)] = self.model_calls
        if call.id:
            self.by_id[call.id] = (call, self.model_calls)
        if result is not MISSING:
            content = tool_content(result)
            answer = TraceMessage(role="tool", name=call.name, tool_call_id=call.id, content=content)
            messages.append(answer)
            self.answers[id(call)] = answer
            self.produced.add(id(answer))
        return call

    def _read(self, span: ReadableSpan) -> tuple[ToolCall, Any, bool]:
        """Return the call a tool span made, its result (``MISSING`` when it recorded none) and whether it failed."""
        span_attrs = attrs(span)
        foreign = conventions.tool_run(span_attrs) or conventions.ToolRun()  # OpenInference, OpenLLMetry, Vercel
        name = span_attrs.get(sc.GEN_AI_TOOL_NAME)
        if not isinstance(name, str):
            name = foreign.name or span.name.removeprefix(f"{sc.OP_EXECUTE_TOOL} ")
        call_id = span_attrs.get(sc.GEN_AI_TOOL_CALL_ID)
        call_id = call_id if isinstance(call_id, str) else foreign.call_id
        args = json_attr(span, sc.GEN_AI_TOOL_CALL_ARGUMENTS, self.notes)
        if args is MISSING and foreign.has_arguments:
            args = foreign.arguments
        if args is MISSING:
            args = json_attr(span, sc.INPUT_VALUE, self.notes)
        result = json_attr(span, sc.GEN_AI_TOOL_CALL_RESULT, self.notes)
        if result is MISSING and foreign.has_result:
            result = foreign.result
        if result is MISSING:
            result = json_attr(span, sc.OUTPUT_VALUE, self.notes)
        # A deferred tool (waiting for an approval or an external result) did not fail, though pydantic-ai's
        # instrumentation versions below 5 end its span in error: it has no result yet.
        failed = span.status.status_code is StatusCode.ERROR and sc.PYDANTIC_AI_TOOL_DEFERRAL_NAME not in span_attrs
        if failed:
            result = failure(result if result is not MISSING else _raised(span))
        call = ToolCall(id=call_id, name=name, arguments=tool_arguments(args), started_at=timestamp(span.start_time))
        return call, result, failed

    def adopt(
        self, messages: list[TraceMessage], inputs: list[TraceMessage], own: set[int], since: int | None = None
    ) -> list[Adoption]:
        """Give the calls tool spans appended to the copies a model call's input (``inputs``) holds of them.

        A run resumed after an approval (or an external tool's result) runs the call before its first model call,
        which is then sent the history with that call and its result in their place; a model call that recorded no
        output has its calls run by tool spans, and the next model call's input holds them. The appended call and
        its result message are taken out of ``messages``; the input's copy of the call takes the span's start time
        and result (``insert_results`` gives it), so the conversation holds the call once, where it was made.

        A call with an id takes the input's latest call with the same id and tool name (and the same arguments,
        when both recorded some): some servers number call ids per response (``call_0``), so an earlier turn's call
        in the history may share the id of the call this run made. A call without one (Gemini, Ollama) takes the
        earliest copy of its tool (and arguments) after the input's last user message (an earlier turn's calls come
        before it), skipping the copies of the calls this turn counted already (``own``: a step whose model call
        recorded the same call, made before). Each call adopts one copy, each copy one call.

        ``since``: when the previous model call recorded no output, its index (``model_calls`` then): only the
        calls tool spans ran since then are its calls, so only those adopt (a tool the application ran before is
        not the call the model asked for).

        Returns:
            Each call taken out of ``messages``, the input's copy standing for it, and the messages removed.
        """
        adopted: list[Adoption] = []
        if not self.appended:
            return adopted
        mine_calls = [
            m.tool_call
            for m in messages
            if m.tool_call is not None
            and id(m.tool_call) in self.appended
            and (since is None or self.ran_at.get(id(m.tool_call), since) >= since)
        ]
        free: list[ToolCall] | None = None  # the input's copies an id-less call may take, once computed
        # The id-less calls adopted here, each with its copy and ``model_calls`` when its span ran.
        taken: list[tuple[ToolCall, ToolCall, int | None]] = []
        for mine in mine_calls:
            rerun = None
            if mine.id:
                copy = self._copy_of(mine, inputs)
            else:
                if free is None:
                    free = _turn_copies(messages, inputs, own, self.appended)
                copy = next((c for c in free if _same_call(c, mine) and id(c) not in self.matched), None)
                if copy is not None:
                    free.remove(copy)
                    taken.append((mine, copy, self.ran_at.get(id(mine))))
                else:
                    copy = rerun = self._rerun_copy(mine, taken)
            if copy is None:
                continue
            result = self.appended.pop(id(mine))
            self.ran_at.pop(id(mine), None)
            answer = self.answers.pop(id(mine), None)
            removed = [m for m in messages if m.tool_call is mine or m is answer]
            messages[:] = [m for m in messages if m.tool_call is not mine and m is not answer]
            self._calls = None  # messages taken out: the index is rebuilt from the list as it stands
            self.matched.discard(id(mine))
            self.matched.add(id(copy))
            claim = self.by_id.get(mine.id or "")
            if claim is not None and claim[0] is mine:
                self.by_id[mine.id] = (copy, claim[1])  # type: ignore[index]  # mine.id is a non-empty str here
            if rerun is None:
                copy.started_at = mine.started_at
            if rerun is not None or id(mine) in self.failed:  # a re-run's failure (or success) is the last word
                self._mark(copy, id(mine) in self.failed)
                self.failed.discard(id(mine))
            if answer is not None:
                self.produced.discard(id(answer))
            if rerun is not None:
                self.pending = [(c, r) for c, r in self.pending if c is not copy or result is MISSING]
            self.pending.append((copy, result))
            adopted.append(Adoption(mine, copy, removed))
        return adopted

    def _rerun_copy(self, mine: ToolCall, taken: list[tuple[ToolCall, ToolCall, int | None]]) -> ToolCall | None:
        """The copy an equal id-less call adopted, run with no model call between: ``mine`` is that call run again.

        The input holding fewer copies than tool spans ran the call (an application retrying a failed tool), the
        model asked for it once: one call, whose last run's result is the one the model was sent.
        """
        for earlier, copy, ran in reversed(taken):
            if earlier.name == mine.name and earlier.arguments == mine.arguments and self.ran_at.get(id(mine)) == ran:
                return copy
        return None

    def rehome(self, new: list[TraceMessage], since: int, keep: set[int]) -> list[tuple[ToolCall, ToolCall]]:
        """Move the calls tool spans ran since a silent model call from the history to that call's copies.

        A model call that recorded no output made calls the conversation does not hold yet: a tool span that ran
        one since could only match an equal call of the history (one a user message left unanswered). The next
        model call's input shows the silent call's calls (``new``: what it holds beyond the conversation); a copy
        there with the same id, tool and arguments is the call the span ran, and takes its start time and result.
        ``keep``: id() of the calls a model call of the trace answered with, which stay the span's.

        Returns:
            Each history call given up, and the copy now standing for it.
        """
        moved: list[tuple[ToolCall, ToolCall]] = []
        runs = [(call, at) for call, at in self.matched_at if at >= since and id(call) not in keep]
        if not runs:
            return moved
        copies = [m.tool_call for m in new if m.role != "tool" and m.tool_call is not None]
        for call, _ in runs:
            copy = next(
                (c for c in copies if c.id == call.id and _same_call(c, call) and id(c) not in self.matched), None
            )
            if copy is None:
                continue
            copies.remove(copy)
            self.matched.discard(id(call))
            self.matched.add(id(copy))
            copy.started_at, call.started_at = call.started_at, None
            self.pending = [(copy if c is call else c, r) for c, r in self.pending]
            if id(call) in self.failed:
                self.failed.discard(id(call))
                self.failed.add(id(copy))
            claim = self.by_id.get(call.id or "")
            if claim is not None and claim[0] is call:
                self.by_id[call.id] = (copy, claim[1])  # type: ignore[index]  # call.id is a non-empty str here
            moved.append((call, copy))
        moved_ids = {id(call) for call, _ in moved}
        self.matched_at = [(c, at) for c, at in self.matched_at if id(c) not in moved_ids]
        return moved

    def _copy_of(self, mine: ToolCall, inputs: list[TraceMessage]) -> ToolCall | None:
        """The input's latest copy of ``mine`` not adopted yet: same id, tool name and (if both have some) arguments."""
        for message in reversed(inputs):
            copy = message.tool_call
            if copy is not None and copy is not mine and copy.id == mine.id and _same_call(copy, mine):
                if id(copy) not in self.matched:
                    return copy
        return None

    def _mark(self, call: ToolCall, failed: bool) -> None:
        if failed:
            self.failed.add(id(call))
        else:
            self.failed.discard(id(call))

    def model_call(self) -> None:
        """Note that a model call was placed: a tool span after it runs a call of a later step."""
        self.model_calls += 1
        if self.matched_at:  # only the spans since the previous model call may be rehomed: the list stays short
            self.matched_at = [(c, at) for c, at in self.matched_at if at >= self.model_calls - 1]

    def _claimed_by_id(self, call: ToolCall) -> ToolCall | None:
        """The call already claimed under the same id and tool name with no model call since: a run of it again.

        Another tool under a reused id, or the same tool after a later model call (some servers number ids per
        response: a later step's ``call_0`` whose model call recorded no output), is a call of its own.
        """
        claim = self.by_id.get(call.id) if call.id else None
        if claim is None or claim[0].name != call.name or claim[1] != self.model_calls:
            return None
        return claim[0]

    def _matched_again(self, call: ToolCall) -> ToolCall | None:
        """The model's call without an id a span ran with no model call since, the same tool and arguments: a re-run.

        No other call of the conversation is left for this span (``_match`` found none): the model asked once and
        the application ran it twice (a retry after a failure), so the last run's result is the call's.
        """
        if call.id:
            return None
        for earlier, at in reversed(self.matched_at):
            same = earlier.name == call.name and earlier.arguments == call.arguments
            if same and not earlier.id and at == self.model_calls:
                return earlier
        return None

    def _match(self, messages: list[TraceMessage], call: ToolCall) -> ToolCall | None:
        """Find the unmatched assistant tool call a tool span executed: same id, else same name and arguments.

        Of several (a reused id, or no ids: an earlier turn's call of the same tool with the same arguments), the
        first still waiting for its result (the span runs it before its result is sent), else the latest no tool
        message answers; never one answered already.
        """
        calls = self._index(messages)
        matched = self.matched
        same = [c for c in calls.with_id(call.id) if id(c) not in matched] if call.id else []
        if not same:
            same = [c for c in calls.like(call) if id(c) not in matched and not (c.id and call.id)]
        if not same:
            return None
        # A call a tool message answers already had its result sent before this span ran: an earlier turn's (its
        # history), not this span's, which is then a call of its own (its model call recorded no output). Of the
        # others, one still waiting for its result (the first: parallel calls run in order), else the latest: a
        # user message since closed an earlier one (a call the history left unanswered, asked again).
        pairing = calls.pairing
        found = next((c for c in same if pairing.is_waiting(c)), None)
        if found is None:
            found = next((c for c in reversed(same) if pairing.is_unanswered(c)), None)
        if found is not None:
            self.matched.add(id(found))
            self.matched_at.append((found, self.model_calls))
        return found

    def _index(self, messages: list[TraceMessage]) -> CallIndex:
        """The index of ``messages``' calls, fed what was appended since the last lookup (rebuilt if it changed)."""
        calls = self._calls
        if calls is None or not calls.current(messages):
            calls = self._calls = CallIndex(messages)
        calls.catch_up()
        return calls

    def insert_results(self, messages: list[TraceMessage]) -> None:
        """Insert the results of executed calls that no tool message answers, after the call's tool messages.

        The tool message answering a call whose span failed (a later model call's input: what the model was sent
        for it) stays as sent, and its result in the tool result views is an error (``errors``): a tool that raised,
        asked the model to retry or was given arguments its schema refused did not return, whatever text the model
        got in its place.
        """
        if not self.pending:
            return
        # The tool message answering each call, by position (a reused id's earlier answer is an earlier call's).
        answers = answered_calls(messages).answers
        answer_of: dict[int, TraceMessage] = {}  # id() of a call -> the first tool message answering it
        for message in messages:
            answered = answers.get(id(message)) if message.role == "tool" else None
            if answered is not None:
                answer_of.setdefault(id(answered), message)
        first_at, past_tools = positions(messages)
        # Results to insert before the message at each position (len(messages): at the end), in ``pending`` order:
        # inserting them one by one put each after the tool messages inserted before it at the same place.
        inserts: dict[int, list[TraceMessage]] = {}
        for call, result in self.pending:
            index = first_at.get(id(call))
            if result is MISSING or index is None:
                continue
            answer = answer_of.get(id(call))
            if answer is not None:
                if id(call) in self.failed:
                    self.errors[id(answer)] = failure(answer.content)
                continue
            message = TraceMessage(role="tool", name=call.name, tool_call_id=call.id, content=tool_content(result))
            inserts.setdefault(past_tools[index + 1], []).append(message)
            self.produced.add(id(message))
        if inserts:
            messages[:] = spliced(messages, inserts)
            self._calls = None  # messages inserted: the index is rebuilt from the list as it stands


def _same_call(copy: ToolCall, mine: ToolCall) -> bool:
    """Whether ``copy`` may be ``mine``: the same tool, and the same arguments when both recorded some."""
    return copy.name == mine.name and (copy.arguments == mine.arguments or not copy.arguments or not mine.arguments)


def after_last_user(messages: list[TraceMessage]) -> list[TraceMessage]:
    """The messages after the last user message (all of them without one): the current turn's."""
    for at in range(len(messages) - 1, -1, -1):
        if messages[at].role == "user":
            return messages[at + 1 :]
    return messages


def _turn_copies(
    messages: list[TraceMessage], inputs: list[TraceMessage], own: set[int], appended: dict[int, Any]
) -> list[ToolCall]:
    """The calls of the input's current turn (after its last user message) that no counted call accounts for.

    Each call the conversation's current turn counted already (``own``, the appended ones aside: they are what
    adopts) accounts for one copy of it, the earliest: the model is sent the turn's calls in the order made. An
    input whose last user message the conversation does not hold starts a turn of its own (a second turn in the
    same trace): the conversation's calls all came before that message, so none accounts for a copy after it.
    """
    turn = after_last_user(messages)
    asking = next((m for m in reversed(inputs) if m.role == "user"), None)
    if asking is not None and not any(m.role == "user" and m.content == asking.content for m in messages):
        turn = []
    counted = [
        m.tool_call
        for m in turn
        if m.role != "tool"
        and m.tool_call is not None
        and id(m.tool_call) not in appended
        and (id(m) in own or id(m.tool_call) in own)
    ]
    free: list[ToolCall] = []
    for message in after_last_user(inputs):
        copy = message.tool_call
        if message.role == "tool" or copy is None:
            continue
        known = next((c for c in counted if _same_call(copy, c) and copy.id == c.id), None)
        if known is not None:
            counted.remove(known)
        else:
            free.append(copy)
    return free


def failure(result: Any) -> dict[str, Any]:
    """A failed call's result as an error result (``{"error": ...}``, what ``is_error_result`` recognises).

    ``result``: what the call's span or the model's next input recorded for it (kept as the error's text), or an
    error result already.
    """
    if isinstance(result, dict) and result.get("error"):
        return result
    if result is None or result == "":
        return {"error": "tool raised"}
    return {"error": result if isinstance(result, str) else compact(result)}


def _raised(span: ReadableSpan) -> str:
    """What a failed tool span says of its failure: its status description, else its exception event."""
    if span.status.description:
        return span.status.description
    for event in reversed(span.events):
        if event.name == sc.EXCEPTION_EVENT:
            event_attrs = event.attributes or {}
            kind, message = event_attrs.get(sc.EXCEPTION_TYPE), event_attrs.get(sc.EXCEPTION_MESSAGE)
            kind = str(kind).rsplit(".", 1)[-1] if kind else ""  # the class name, as the exception's repr shows it
            if kind and message:
                return f"{kind}: {message}"
            if kind or message:
                return str(message or kind)
    return ""
