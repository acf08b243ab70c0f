"""What a provider plugs into the engine: its endpoint rows, a ``Codec`` and (if it streams) an ``Accumulator``.

The engine (``engine.wrappers``, ``engine.call``, ``engine.stream``) owns everything that is the same for every
provider: wrapping, suppression, the span's lifecycle, errors, stream proxies, metrics, cost. A codec only
translates: request params -> attributes, a response -> ``Outcome``, stream chunks -> ``Outcome``. Every hook
receives the endpoint's ``kind`` (the codec's own key for an operation: an enum member, a string, anything
hashable) so one codec serves all of a provider's endpoints.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from opentelemetry import context as otel_context

from evaltrace._internal import semconv as sc
from evaltrace._internal.engine.errortype import error_type_of
from evaltrace._internal.engine.outcome import EMPTY_SUMMARY, Outcome, Summary
from evaltrace._internal.errors import handle_internal_errors

if TYPE_CHECKING:
    from evaltrace._internal.engine.call import Call

IN_CALL = otel_context.create_key("evaltrace-llm-call")
"""Set in the context for the duration of a call we trace (its request, retries and stream opening), whatever the
provider: a wrapped call inside it (an SDK delegating to another wrapped method, LiteLLM calling openai) makes no
second span."""

Attributes = dict[str, Any]
Server = tuple[str | None, int | None]


@dataclass(frozen=True)
class Endpoint:
    """One wrapped callable: ``{module}.{cls}.{method}``, or the module function ``{module}.{method}``.

    Attributes:
        module: The module that defines (or re-exports) the class or function; patched when it is imported.
        cls: The class owning ``method`` (dotted for a nested class); None for a module-level function.
        method: The method or function name.
        kind: The codec's key for the operation, handed to every codec hook (an enum member, a string...).
        is_async: True when calling it returns an awaitable (``async def``): the async wrapper awaits it.
        own_request_only: Wrap only if the method's own code posts its request (``self._post``), for Stainless
            SDKs (openai, anthropic, groq) where some versions delegate a helper to a method wrapped already.
        deferred: The method sends nothing: it returns a manager whose ``__enter__``/``__aenter__`` sends the
            request (anthropic's ``messages.stream()``). ``Codec.deferred_request`` finds that request.
    """

    module: str
    cls: str | None
    method: str
    kind: Hashable
    is_async: bool
    own_request_only: bool = False
    deferred: bool = False


def owning_class(module: ModuleType, endpoint: Endpoint) -> Any:
    """The imported ``module``'s object owning ``endpoint`` (its class, or the module for a function); None if absent.

    A dotted ``cls`` is followed attribute by attribute (a nested class). ``own_request_only`` rows are kept only
    when the method's own code posts its request (``inspect``, once, at patch time).
    """
    owner: Any = module
    for name in (endpoint.cls or "").split(".") if endpoint.cls else ():
        owner = getattr(owner, name, None)
    if owner is None or (endpoint.cls and not isinstance(owner, type)) or not hasattr(owner, endpoint.method):
        return None
    if endpoint.own_request_only and not _sends_own_request(getattr(owner, endpoint.method)):
        return None
    return owner


def _sends_own_request(method: Any) -> bool:
    """True when ``method``'s own code calls ``self._post`` (it does not delegate to a traced method).

    Feature detection on the function itself: a delegating helper wrapped too would make two spans for one call,
    a posting one left unwrapped would make none.
    """
    code = getattr(inspect.unwrap(method), "__code__", None)
    return code is not None and "_post" in code.co_names


class Accumulator(Protocol):
    """A stream's chunks in, one ``Outcome`` out. ``add`` must be O(1) per chunk (append; join at the end).

    The stream proxy folds chunks in as they arrive until one carries output (``add``'s answer times the first
    chunk), then in batches of held chunks: through the accumulator's ``add_batch(chunks)`` when it has one (the
    same as ``add`` on each chunk in order, written out in one frame, with ``chunk_failed()`` called for a chunk
    that raised), else ``add_each``. Every chunk is folded in before ``end_reason`` / ``outcome`` / ``summary`` /
    ``failure`` are read. A batch holds at most ``stream.BATCH`` chunks, or the accumulator's own ``batch_size``
    (an optional class attribute) when it has one.
    """

    def add(self, chunk: Any) -> bool:
        """Fold one chunk in; return True when it carries output (for time to first chunk)."""
        ...

    def end_reason(self) -> str:
        """How a stream read to its end ended: ``sc.STREAM_END_EXHAUSTED`` only if it carried its terminal signal.

        Return ``sc.STREAM_END_TRUNCATED`` when the chunks never said the answer was complete (a server that
        hung up early looks like a finished stream to the SDK).
        """
        ...

    def outcome(self) -> Outcome:
        """Return what the chunks so far amount to (called once, when the span is read or ends)."""
        ...

    def summary(self) -> Summary:
        """Return the response model and token counts ``outcome()`` would report, cheaply (no content)."""
        ...

    def failure(self) -> tuple[str, str] | None:
        """(``error.type``, message) when the stream itself reported that the call failed, else None."""
        ...


def chunk_failed() -> None:
    """Route an error of ours from folding a chunk in through the one boundary (re-raised under tests).

    Call it from the ``except`` block around one chunk, so that one bad chunk costs only itself.
    """
    with handle_internal_errors("processing a stream chunk"):
        raise


def add_each(add: Callable[[Any], object], chunks: list[Any]) -> None:
    """Fold ``chunks`` in with ``add``, one call per chunk: the batch fold of an accumulator without ``add_batch``."""
    for chunk in chunks:
        try:
            add(chunk)
        except Exception:
            chunk_failed()


def plain_fields(cls: type, names: tuple[str, ...]) -> bool:
    """Whether ``getattr(obj, name)`` of a ``cls`` instance is its ``__dict__`` entry, else its pydantic extra.

    True for a pydantic (v2) model where no class in the MRO has an attribute of any of ``names`` (a descriptor
    would be read first) and none is a private attribute (read from ``__pydantic_private__``). A batch fold reads
    such fields from the instance (a dict lookup) instead of through pydantic's ``__getattr__`` hook.
    """
    private = getattr(cls, "__private_attributes__", None)
    if not isinstance(getattr(cls, "__pydantic_fields__", None), dict) or not isinstance(private, dict):
        return False
    return not any(name in private or any(name in vars(k) for k in cls.__mro__) for name in names)


def slot_reader(classes: tuple[type, ...], name: str) -> Any:
    """The ``__get__`` of the data descriptor ``name`` resolves to on every class of ``classes`` (None: no one such).

    ``obj.__dict__`` and ``obj.__pydantic_extra__`` of a pydantic model are such descriptors (a data descriptor on
    the type is read before the instance and before ``__getattr__``), so ``reader(obj)`` is the very object
    ``obj.<name>`` is. A batch fold reads them so because pydantic's ``__getattr__`` hook makes each attribute read
    three type-cache lookups, and those thrash (an MRO walk each) under some memory layouts.
    """
    found = {next((vars(k)[name] for k in cls.__mro__ if name in vars(k)), None) for cls in classes}
    descriptor = found.pop() if len(found) == 1 else None
    if descriptor is None or not hasattr(type(descriptor), "__set__"):  # not a data descriptor: the instance wins
        return None
    return descriptor.__get__


class Codec:
    """A provider's translation layer; subclass it and override what the provider needs.

    Hooks marked *optional* are looked up once when a wrapper is made: a codec that does not override them costs
    nothing per call. Every hook runs inside the engine's error boundary; a hook that raises leaves the user's
    call and result untouched (the span is ended with what was recorded).
    """

    provider: ClassVar[str] = ""
    """``gen_ai.provider.name`` (conventions.md): "openai", "anthropic", "aws.bedrock", "gcp.gemini"..."""

    label: ClassVar[str] = ""
    """The provider as named in internal-error log lines ("recording Mistral span attributes")."""

    cache_plain_types: ClassVar[bool] = False
    """True when a result type seen once as a plain (non-stream) response is always one (per codec).

    Lets ``finish`` skip ``finish_special`` for the common result types. Leave False when the same type can be
    either (a Bedrock ``dict`` holds a stream or not).
    """

    # --- the span's shape, computed once per (kind, request model, host, port) ---

    def operation(self, kind: Hashable) -> str:
        """``gen_ai.operation.name`` of ``kind`` (chat, embeddings, generate_content...); default: ``str(kind)``."""
        return str(kind)

    def span_kind(self, kind: Hashable) -> str:
        """``evaltrace.span.kind``: ``embedding`` for the embeddings operation, else ``llm``."""
        return sc.KIND_EMBEDDING if self.operation(kind) == sc.OP_EMBEDDINGS else sc.KIND_LLM

    def provider_for(self, host: str | None) -> str:
        """``gen_ai.provider.name`` for a client talking to ``host`` (default: ``provider``)."""
        return self.provider

    def provider_of(self, kind: Hashable, model: str | None, host: str | None) -> str:
        """``gen_ai.provider.name`` of a call (default: ``provider_for(host)``); LiteLLM names it from the model."""
        return self.provider_for(host)

    def start_attributes(self, kind: Hashable) -> Attributes:
        """Extra attributes fixed per ``kind``, set at span creation with the GenAI ones (default: none)."""
        return {}

    # --- per call ---

    def server_of(self, instance: Any) -> Server:
        """(``server.address``, ``server.port``) of the client ``instance`` is bound to; (None, None) if unknown."""
        return None, None

    def route(self, endpoint: Endpoint, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """*Optional.* ``(kind, params)`` or ``(kind, params, (host, port))`` for this call; None: untraced.

        Override when the operation depends on the arguments (botocore's ``_make_api_call(operation_name,
        api_params)``), when positional arguments must be named (``ollama.chat("llama3", messages)``), or when
        some calls are not LLM calls at all. Without it, ``kind`` is ``endpoint.kind`` and ``params`` is the
        call's kwargs (read, never written). ``params["model"]`` (a str) is the request model. The server, when
        given, replaces ``server_of(instance)`` (a module function's ``api_base`` argument).
        """
        return endpoint.kind, kwargs

    def prepare(self, instance: Any) -> None:
        """*Optional.* Run before each traced call (anthropic: silence the SDK's own span on this client)."""

    def request_attributes(self, kind: Hashable, params: dict[str, Any], capture: bool, max_len: int) -> Attributes:
        """The request's attributes: ``gen_ai.request.*``, and with ``capture`` input messages, instructions, tools.

        Use ``jsonutil.capped_json(value, max_len)`` for JSON values and ``list_values.input_attributes`` for
        ``input.value``. The dict returned is the engine's to extend.
        """
        return {}

    def outcome(self, kind: Hashable, result: Any, capture: bool) -> Outcome:
        """A plain (non-stream) response -> ``Outcome``; output messages only with ``capture``."""
        return Outcome()

    def summary(self, kind: Hashable, result: Any) -> Summary:
        """Response model and token counts of ``result``, for metrics (default: from ``outcome``)."""
        return Summary.of(self.outcome(kind, result, False))

    def failure(self, kind: Hashable, result: Any) -> tuple[str, str] | None:
        """(``error.type``, message) when a response that raised nothing reports a failure; else None."""
        return None

    def is_stream(self, kind: Hashable, result: Any) -> bool:
        """True when ``result`` is a stream to proxy (iterator, async iterator, generator, stream object)."""
        return False

    def accumulator(self, kind: Hashable) -> Accumulator:
        """A fresh accumulator for one stream of ``kind``."""
        raise NotImplementedError(f"{type(self).__name__} streams but has no accumulator")

    def finish_special(self, call: Call, kind: Hashable, result: Any) -> Any:
        """Handle results that are not a plain response; return ``PLAIN`` for a plain one.

        The default proxies a stream (``is_stream``). Override for raw-response wrappers, or for a stream held in
        a container (Bedrock's ``{"stream": EventStream}``: ``result["stream"] = call.stream(result["stream"],
        acc)``; return ``result``).
        """
        if self.is_stream(kind, result):
            return call.stream(result, self.accumulator(kind))
        return PLAIN

    def finish(self, call: Call, kind: Hashable, result: Any) -> Any:
        """End ``call`` with ``result``; return what the user gets (``result``, or a stream proxy in its place)."""
        if type(result) not in self._plain_types:
            special = self.special(call, kind, result)
            if special is not PLAIN:
                return special
        failure = self.failure(kind, result)
        if failure is None:
            call.finish_response(result)
        else:
            call.finish_failed(call.outcome_of(result), call.summary_of(result), None, failure)
        return result

    def special(self, call: Call, kind: Hashable, result: Any) -> Any:
        """``finish_special``, remembering a plain result's type when ``cache_plain_types`` (``finish`` calls it)."""
        special = self.finish_special(call, kind, result)
        cached = self._plain_types
        if special is PLAIN and self.cache_plain_types and len(cached) < 64:  # bounded: a handful in practice
            cached.add(type(result))
        return special

    def deferred_request(self, manager: Any) -> tuple[str, Any] | None:
        """For ``deferred`` endpoints: (attribute name, request) the manager sends on enter, or None.

        The request is a zero-argument callable (sync) or an awaitable (async); the engine replaces the attribute
        with a traced twin, so the span covers the request and the stream, from enter.
        """
        return None

    def error_type(self, error: BaseException) -> str:
        """``error.type`` of a raised exception (default: ``engine.call.error_type_of``)."""
        return error_type_of(error)

    def status_code(self, error: BaseException) -> int | None:
        """``http.response.status_code`` of a raised exception (default: its ``status_code``, if an int)."""
        status = getattr(error, "status_code", None)
        return status if isinstance(status, int) else None

    def uninstrumented(self) -> None:
        """Undo per-client changes ``prepare`` made (called by ``uninstrument()``)."""

    def __init__(self) -> None:
        """Per-codec caches (a codec is a singleton per provider)."""
        self._plain_types: set[type[Any]] = set()


PLAIN: Any = object()
"""``finish_special``'s answer for a plain response body."""

NO_SUMMARY = EMPTY_SUMMARY
"""The summary of a call whose body the user reads (metrics record its duration only)."""
