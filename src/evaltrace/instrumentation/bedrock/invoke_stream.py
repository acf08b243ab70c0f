"""Stream accumulator of ``invoke_model_with_response_stream``: ``{"chunk": {"bytes": <model-native JSON>}}`` events.

The chunks are the model family's own stream, read by shape on the first chunk that says which it is:

* Anthropic Messages events (``type``: ``message_start``, ``content_block_delta``, ...): the Anthropic
  instrumentation's accumulator, fed the parsed chunk;
* Amazon Nova (``messageStart``, ``contentBlockDelta``, ``messageStop``, ``metadata``): the Converse stream's;
* the text families, one text fragment per chunk: Anthropic Text Completions (``completion``), Llama
  (``generation``), Titan (``outputText``), Cohere Command (``generations[0].text``), Cohere Command R
  (``event_type`` ``text-generation`` / ``tool-calls-generation`` / ``stream-end``), Mistral (``outputs``) and
  OpenAI-style chunks (``choices[0].delta``).

Bedrock adds ``amazon-bedrock-invocationMetrics`` (``inputTokenCount``, ``outputTokenCount``, cache counts) to the
last chunk of every family: the token counts when the family's own chunks report none. ``add`` parses one chunk
(O(its size)) and appends; nothing is joined before the end. ``add_batch`` (the stream proxy's batch fold) reads an
Anthropic content delta of the compact shape Bedrock sends without building its dicts (see ``_delta_head``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from types import SimpleNamespace
from typing import Any

from evaltrace._internal import semconv as sc
from evaltrace._internal.anthropic.accumulate import MessagesAccumulator
from evaltrace._internal.anthropic.response import usage_of
from evaltrace._internal.engine.codec import chunk_failed
from evaltrace._internal.engine.outcome import Outcome, Summary, Usage
from evaltrace._internal.engine.values import count
from evaltrace._internal.openai.parts import Part, assistant_parts, tool_call_part
from evaltrace.instrumentation.bedrock import converse, converse_stream
from evaltrace.instrumentation.bedrock.bodies import GUARDRAIL_ACTION, guardrail_intervened, text_parts
from evaltrace.instrumentation.bedrock.cohere_chat import cohere_usage

_CONVERSE_EVENTS = frozenset({"messageStart", "contentBlockStart", "contentBlockDelta", "contentBlockStop",
                              "messageStop", "metadata"})  # fmt: skip
_METRICS = "amazon-bedrock-invocationMetrics"
_DELTA_FIELDS = {"text_delta": "text", "input_json_delta": "partial_json", "thinking_delta": "thinking"}
"""An Anthropic content delta's ``type`` -> the field of it ``MessagesAccumulator.add`` keeps (others: nothing)."""


# json.loads' own C scanner, with the default decoder's settings (typeshed does not declare ``scan_once``).
_SCAN: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]
# ... and the string scanner it calls for each JSON string (strict, as json.loads: no raw control characters).
_SCAN_STRING: Callable[[str, int], tuple[str, int]] = json.decoder.scanstring  # type: ignore[attr-defined]


def _loads(data: bytes | str) -> Any:
    """``json.loads(data)`` of one chunk, a JSON object in UTF-8 bytes scanned without ``json.loads``' wrappers.

    ``json.loads`` spends more on its Python layers (encoding detection, two whitespace matches) than on a small
    chunk's scan. Bytes that open with ``{`` and no NUL byte second decode as UTF-8 there too;
    anything else, a scan that fails or that stops before the end goes through ``json.loads``, so the value, and
    any error, is its own.
    """
    # ``json.detect_encoding`` of bytes opening with ``{`` (no BOM) says UTF-8 unless their second byte is NUL. One
    # slice compared: ``find(b"\x00", 0, 4)`` parses its arguments as a tuple on 3.11 (~1k instructions).
    if type(data) is bytes and data[:1] == b"{" and data[1:2] != b"\x00":
        try:
            # Strict UTF-8 (no arguments: no codec lookup by name) is ``surrogatepass``' text wherever it
            # succeeds; an encoded surrogate (or invalid bytes) raises here and ``json.loads`` decodes it.
            text = data.decode()
            value, end = _SCAN(text, 0)
        except (StopIteration, ValueError):
            return json.loads(data)
        if end == len(text):
            return value
    return json.loads(data)


_DELTA_OPEN = b'{"type":"content_block_delta","index":'
# What follows a compact delta's index, up to its fragment's value, for each kind ``add`` keeps (in that order).
_DELTA_TAILS = tuple(b',"delta":{"type":"%s","%s":' % (k.encode(), n.encode()) for k, n in _DELTA_FIELDS.items())


def _delta_head(data: bytes) -> tuple[bytes, int] | None:
    """The bytes a compact Anthropic content delta opens with, up to its fragment's string, and its block index.

    Bedrock sends each delta as compact JSON, ``{"type":"content_block_delta","index":0,"delta":{"type":
    "text_delta","text":"..."}}``. A chunk that is this head, one JSON string and ``}}`` parses to exactly that
    dict with that string, whatever the string holds, so ``add_batch`` reads the chunks after one of this shape
    by that test alone. None for any other shape (whitespace, key order, a kind ``add`` keeps nothing of).
    """
    comma = data.find(b",", len(_DELTA_OPEN))
    digits = data[len(_DELTA_OPEN) : comma]
    if (
        comma < 0
        or data[: len(_DELTA_OPEN)] != _DELTA_OPEN
        or not digits.isdigit()
        or (digits[:1] == b"0" and len(digits) > 1)
    ):
        return None
    # The head is ``data[:comma]`` and one of the tails: compared as slices of ``data`` (formatting each head and
    # ``startswith`` cost ~14k instructions a call, once per run).
    for tail in _DELTA_TAILS:
        end = comma + len(tail)
        if data[comma:end] == tail:
            return data[:end], int(digits)
    return None


_STOP_OPEN = b'{"type":"content_block_stop","index":'


_NO_RUN: tuple[bytes, int, Any] = (b"", 0, None)


def _block_stop(data: bytes) -> bool:
    """Whether a chunk's ``data`` is a compact ``content_block_stop``.

    Such bytes (the head, a JSON integer, ``}``) parse to ``{"type": "content_block_stop", "index": N}`` and no
    more, which ``add`` hands to ``MessagesAccumulator.add``, which keeps nothing of it: ``add_batch`` reads one
    Claude chunk in ten (one per content block) without parsing it (~14k instructions each through ``add``).
    """
    if data[: len(_STOP_OPEN)] != _STOP_OPEN or data[-1:] != b"}":
        return False
    digits = data[len(_STOP_OPEN) : -1]
    return digits.isdigit() and (digits[:1] != b"0" or len(digits) == 1)  # a JSON integer: no leading zero


def _event(body: dict[str, Any]) -> SimpleNamespace:
    """An Anthropic event read by attribute (as the anthropic SDK's objects), its nested values left dicts."""
    event = SimpleNamespace(**body)
    delta = body.get("delta")
    if isinstance(delta, dict):
        event.delta = SimpleNamespace(**delta)
    return event


class InvokeStreamAccumulator:
    """Accumulates the decoded chunks of one ``invoke_model_with_response_stream`` body."""

    __slots__ = ("anthropic", "calls", "chat", "converse", "delta", "fragments", "guardrail", "input_tokens", "metrics",
                 "model", "output_tokens", "reasoning", "request", "response_id", "stop_reason", "stopped", "tool_calls",
                 "usage")  # fmt: skip

    def __init__(self, response_id: str | None = None, request: Any = None) -> None:
        self.response_id = response_id
        self.request = request  # the raw request body: whether its prompt opened a ``<think>`` block (``text_parts``)
        self.anthropic: MessagesAccumulator | None = None
        self.converse: converse_stream.ConverseStreamAccumulator | None = None
        self.fragments: list[str] = []
        self.reasoning: list[str] = []  # an OpenAI-style delta's ``reasoning_content`` / ``reasoning`` fragments
        self.chat = False  # OpenAI-style chat chunks (a ``delta`` each): their text is split as a whole answer's
        self.calls: list[Part] = []
        # OpenAI-style tool call deltas by their index: [id, name, argument fragments]
        self.tool_calls: dict[Any, list[Any]] = {}
        self.model: str | None = None  # an OpenAI-style chunk's ``model``
        self.stop_reason: str | None = None
        self.stopped = False
        self.input_tokens: int | None = None
        self.output_tokens: int | None = None
        self.usage: Usage | None = None  # a family's own complete usage (Cohere Command R's billed units)
        self.metrics: Usage | None = None
        self.guardrail = False  # a chunk said a guardrail intervened
        # the bytes of the Anthropic content delta the last ``add`` folded (None: the last ``add`` folded none)
        self.delta: bytes | None = None

    def add(self, event: Any) -> bool:
        """Fold one ``{"chunk": {"bytes": ...}}`` event in; True when it carried output."""
        self.delta = None
        # botocore's events are dicts: checked exactly first, as ``isinstance(..., Mapping)`` is an ABC check.
        chunk = event.get("chunk") if type(event) is dict or isinstance(event, Mapping) else None
        data = chunk.get("bytes") if type(chunk) is dict or isinstance(chunk, Mapping) else None
        if not isinstance(data, (bytes, str)):  # a tuple: ``bytes | str`` would build a union per call
            return False
        body = _loads(data)
        if not isinstance(body, dict):
            return False
        metrics = body.get(_METRICS)
        if metrics is not None and isinstance(metrics, Mapping):  # on the last chunk only
            self._metrics(metrics)
        if GUARDRAIL_ACTION in body:  # sticky: a later chunk's ``NONE`` does not undo an intervention
            self.guardrail |= body[GUARDRAIL_ACTION] == "INTERVENED"
        if self.anthropic is not None:
            if not self.anthropic.add(_event(body)):
                return False
            if type(data) is bytes:  # a content delta (the only output): where ``add_batch`` may start a run
                self.delta = data
            return True
        if self.converse is not None:
            return self.converse.add(body)
        kind = body.get("type")
        if isinstance(kind, str) and kind.startswith(("message_", "content_block_", "ping", "error")):
            self.anthropic = MessagesAccumulator()
            return self.anthropic.add(_event(body))
        if not _CONVERSE_EVENTS.isdisjoint(body):
            self.converse = converse_stream.ConverseStreamAccumulator(self.response_id)
            return self.converse.add(body)
        return self._text_chunk(body)

    def add_batch(self, events: list[Any]) -> None:
        """``add`` for each event in order, in one frame (the stream proxy's batch fold).

        Claude's stream over Bedrock is mostly runs of content deltas of one block and kind, each a small JSON
        document that ``add`` parses into dicts and reads through an event view. Once ``add`` has folded a delta
        of the compact shape (``_delta_head``), the next chunks that are the same head, one JSON string and ``}}``
        are read here: the string decoded by ``json``'s own string scanner (the one ``json.loads`` calls for it,
        so the text and what counts as valid are its own) and appended to the block's fragments, which is all
        ``add`` does with such a delta. Any other chunk goes to ``add`` and ends the run. A run goes on into the
        next batch (and into the first one, after the proxy's own ``add`` of the first delta): it starts from the
        delta the last ``add`` folded (``self.delta``), which every ``add`` sets or clears.
        """
        head, skip, append = self._run()
        add = self.add
        for event in events:
            if head and type(event) is dict:
                try:
                    chunk = event["chunk"]
                    data = chunk["bytes"] if type(chunk) is dict else None
                    # Slices compared, not ``startswith`` / ``endswith``: on 3.11 those parse their arguments
                    # as a tuple (~1k instructions a call), a slice and a compare cost a third of that.
                    if type(data) is bytes and data[:skip] == head:
                        # The whole chunk decoded (its head is ASCII: one character a byte), its string scanned
                        # from the character after the opening quote. Strict UTF-8 (no arguments: no codec
                        # lookup) gives what ``json.loads``' ``surrogatepass`` gives wherever it succeeds; where it
                        # fails (an encoded surrogate, invalid bytes), ``add`` reads the chunk. The string ends at
                        # its closing quote (``end`` is past it), so ``}}`` after it, and nothing more, is the
                        # compact delta's end: one slice compared, rather than the bytes' last three before the
                        # decode and a ``len`` after the scan.
                        text = data.decode()
                        value, end = _SCAN_STRING(text, skip)
                        if text[end:] == "}}":
                            append(value)
                            continue
                except (KeyError, ValueError):  # no such key, invalid UTF-8 or not one valid string: ``add``'s
                    pass
            if self.anthropic is not None:
                try:
                    run = self._compact(event)
                except Exception:
                    run = None
                    chunk_failed()
                if run is not None:
                    head, skip, append = run
                    continue
            try:
                add(event)
            except Exception:
                chunk_failed()
            head, skip, append = self._run()

    def _compact(self, event: Any) -> tuple[bytes, int, Any] | None:
        """Fold ``event`` as ``add`` would when it is a compact block stop or the first delta of a run; else None.

        A compact content delta (``_delta_head``) of a block the stream started, whose value is one JSON string and
        ``}}``, is what a run is made of: its string is appended to the block's fragments and the run that follows
        is returned (``add`` appends the same, then ``_run`` finds the same run, ~30k instructions together). A
        compact ``content_block_stop`` (``_block_stop``) ends the run: ``add`` keeps nothing of it. Only for Claude's
        stream (``self.anthropic`` is set), once the stream's first output went through ``add``.
        """
        anthropic = self.anthropic
        chunk = event.get("chunk") if type(event) is dict else None
        data = chunk.get("bytes") if type(chunk) is dict else None
        if anthropic is None or type(data) is not bytes:
            return None
        if data[: len(_DELTA_OPEN)] == _DELTA_OPEN:
            found = _delta_head(data)
            block = anthropic.blocks.get(found[1]) if found is not None else None
            if found is None or block is None:
                return None  # no such block: ``add`` reads it (and keeps nothing)
            head = found[0] + b'"'
            skip = len(head)
            if data[:skip] != head:
                return None  # the value is not a string
            try:  # as the run's own chunks are read in ``add_batch``
                text = data.decode()
                value, end = _SCAN_STRING(text, skip)
            except ValueError:
                return None
            if text[end:] != "}}":
                return None
            append = block.fragments.append
            append(value)
            self.delta = data  # as ``add`` leaves it: where the next batch's run starts
            return head, skip, append
        if _block_stop(data):
            self.delta = None  # all ``add`` does with it: ``MessagesAccumulator.add`` keeps nothing of a stop
            return _NO_RUN
        return None

    def _run(self) -> tuple[bytes, int, Any]:
        """The run the delta ``add`` last folded starts: its head and opening quote, their length, its ``append``.

        The ``append`` is the block's fragments'. ``(b"", 0, None)`` (no run) when the last ``add`` folded no compact content delta of a block it has.
        """
        data = self.delta
        if data is not None and self.anthropic is not None:
            found = _delta_head(data)
            block = self.anthropic.blocks.get(found[1]) if found is not None else None
            if found is not None and block is not None:
                head = found[0] + b'"'
                return head, len(head), block.fragments.append
        return _NO_RUN

    def _metrics(self, metrics: Mapping[str, Any]) -> None:
        self.metrics = usage_of(
            count(metrics.get("inputTokenCount")),
            count(metrics.get("outputTokenCount")),
            count(metrics.get("cacheReadInputTokenCount")),
            count(metrics.get("cacheWriteInputTokenCount")),
        )

    def _text_chunk(self, body: dict[str, Any]) -> bool:
        """One chunk of a text family: its fragment, and the stop reason and counts when it has them."""
        text: Any = None
        reason: Any = None
        thought = False  # an OpenAI-style chunk of reasoning: output too
        if "completion" in body:  # Anthropic Text Completions
            text, reason = body.get("completion"), body.get("stop_reason")
        elif "generation" in body:  # Llama: prompt count on the first chunk, the output count per chunk
            text, reason = body.get("generation"), body.get("stop_reason")
            self.input_tokens = count(body.get("prompt_token_count")) or self.input_tokens
            self.output_tokens = count(body.get("generation_token_count")) or self.output_tokens
        elif "outputText" in body:  # Titan
            text, reason = body.get("outputText"), body.get("completionReason")
            self.input_tokens = count(body.get("inputTextTokenCount")) or self.input_tokens
            self.output_tokens = count(body.get("totalOutputTextTokenCount")) or self.output_tokens
        elif "generations" in body:  # Cohere Command
            generations = body.get("generations") or [{}]
            first = generations[0] if isinstance(generations[0], Mapping) else {}
            text, reason = first.get("text"), first.get("finish_reason")
        elif "event_type" in body or "is_finished" in body:  # Cohere Command R
            text, reason = self._cohere_chat(body)
        elif "outputs" in body:  # Mistral
            outputs = body.get("outputs") or [{}]
            first = outputs[0] if isinstance(outputs[0], Mapping) else {}
            text, reason = first.get("text"), first.get("stop_reason")
        elif "choices" in body:  # OpenAI-style chunk
            text, reason, thought = self._chat_chunk(body)
        if isinstance(reason, str) and reason:
            self.stop_reason = reason
            self.stopped = True
        if isinstance(text, str) and text:
            self.fragments.append(text)
            return True
        return thought

    def _chat_chunk(self, body: dict[str, Any]) -> tuple[Any, Any, bool]:
        """(text, finish reason, whether it had reasoning) of an OpenAI-style chunk.

        Its tool call deltas, reasoning and model are kept as the body's are. The reasoning is ``reasoning_content``,
        else ``reasoning`` (vLLM's name), as the OpenAI paths read a delta's extras.
        """
        choices = body.get("choices") or [{}]
        first = choices[0] if isinstance(choices[0], Mapping) else {}
        delta = first.get("delta") or {}
        text = thinking = None
        if "delta" in first:
            self.chat = True
        if isinstance(delta, Mapping):
            text = delta.get("content")
            if delta.get("tool_calls"):
                self._tool_call_deltas(delta["tool_calls"])
            thinking = delta.get("reasoning_content")
            if thinking is None:
                thinking = delta.get("reasoning")
            if isinstance(thinking, str) and thinking:
                self.reasoning.append(thinking)
            else:
                thinking = None
        if isinstance(body.get("model"), str):
            self.model = body["model"]
        if text is None:  # DeepSeek-R1's completion chunks: the text on the choice itself
            text = first.get("text")
        return text, first.get("finish_reason") or first.get("stop_reason"), thinking is not None

    def _tool_call_deltas(self, deltas: Any) -> None:
        """OpenAI-style ``delta.tool_calls``: each call by its index, its arguments' fragments in order."""
        for call in deltas if isinstance(deltas, list) else ():
            if not isinstance(call, Mapping):
                continue
            function: Mapping[str, Any] = call["function"] if isinstance(call.get("function"), Mapping) else {}
            slot = self.tool_calls.get(call.get("index", 0))
            if slot is None:
                slot = self.tool_calls[call.get("index", 0)] = [call.get("id"), function.get("name"), []]
            if isinstance(function.get("arguments"), str) and function["arguments"]:
                slot[2].append(function["arguments"])

    def _cohere_chat(self, body: dict[str, Any]) -> tuple[Any, Any]:
        event = body.get("event_type")
        if event == "tool-calls-generation":
            for call in body.get("tool_calls") or ():
                self.calls.append(tool_call_part(None, call.get("name"), call.get("parameters")))
            return None, None
        if event == "stream-end" or body.get("is_finished") is True:
            response = body.get("response")
            if isinstance(response, Mapping):
                self.usage = cohere_usage(response) or self.usage
            return None, body.get("finish_reason")
        return body.get("text") if event in (None, "text-generation") else None, None

    def end_reason(self) -> str:
        """``exhausted`` once the family's terminal signal arrived (a stop reason, ``message_stop``)."""
        if self.anthropic is not None:
            return self.anthropic.end_reason()
        if self.converse is not None:
            return self.converse.end_reason()
        return sc.STREAM_END_EXHAUSTED if self.stopped else sc.STREAM_END_TRUNCATED

    def failure(self) -> tuple[str, str] | None:
        """An Anthropic ``error`` event in the body (botocore raises the service's own stream errors)."""
        return self.anthropic.failure() if self.anthropic is not None else None

    def _usage(self, own: Usage | None) -> Usage | None:
        """The family's own counts (``own``), else the invocation metrics'."""
        if own is None and (self.input_tokens is not None or self.output_tokens is not None):
            own = Usage(self.input_tokens, self.output_tokens)
        if self.metrics is not None and (own is None or own.input_tokens is None):
            return self.metrics
        return own

    def summary(self) -> Summary:
        """Model and token counts, without joining the text."""
        model = None
        if self.anthropic is not None:
            own = self.anthropic.summary()
            if own.input_tokens is not None:
                return own
            model, usage = own.response_model, self._usage(None)
        elif self.converse is not None:  # Nova's events: the model a prompt router chose, as ``outcome`` has it
            usage, model = self._usage(self.converse.usage), self.converse.response_model
        else:
            usage, model = self._usage(self.usage), self.model
        return Summary(model) if usage is None else Summary(model, usage.input_tokens, usage.output_tokens)

    def outcome(self) -> Outcome:
        """What the chunks so far amount to; the invocation metrics fill in counts the family did not send."""
        outcome = self._outcome()
        return guardrail_intervened(outcome) if self.guardrail else outcome

    def _outcome(self) -> Outcome:
        if self.anthropic is not None:
            outcome = self.anthropic.outcome()
            outcome.response_id = self.response_id
            outcome.usage = self._usage(outcome.usage)
            return outcome
        if self.converse is not None:
            outcome = self.converse.outcome()
            outcome.usage = self._usage(outcome.usage)
            return outcome
        parts: list[Part]
        if self.chat:  # as a whole chat answer: any ``<think>`` block in the joined text is reasoning, after the field
            parts = assistant_parts("".join(self.reasoning) or None, "".join(self.fragments))
        else:  # a text family's: its inline reasoning split out of the joined text, as a whole body's is
            parts = text_parts("".join(self.fragments), self.request, self.guardrail)
        parts.extend(self.calls)
        parts.extend(tool_call_part(i, name, "".join(args)) for i, name, args in self.tool_calls.values())
        reason = self.stop_reason
        return Outcome(
            response_id=self.response_id,
            response_model=self.model,
            finish_reasons=[reason] if reason else [],
            output_messages=[converse.output_message(parts, reason)],
            usage=self._usage(self.usage),
        )
