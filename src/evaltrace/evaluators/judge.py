"""The LLM judge: one OpenAI-compatible chat client shared by the judge-based evaluators.

Calls run inside :func:`evaltrace._internal.tracing.suppress_instrumentation`, so no instrumentation traces them
into the application's trace and nothing evaluates them; instead each judgement that calls the model is traced as
a trace of its own (see ``_judge_trace``; off with ``configure(trace_judges=False)``), whose id the call record
keeps. At most ``max_concurrency`` calls run at once per event loop. Replies are asked for as JSON (JSON mode),
parsed defensively (code fences and surrounding prose tolerated), and a reply that does not parse gets exactly one
retry that shows the model its reply and the error. Successful judgements are cached by (prompt hash, model), so a
repeated identical judgement costs nothing.
"""

from __future__ import annotations

import asyncio
import copy
import hashlib
import json
import os
import re
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Generic, TypeVar

from evaltrace import pricing
from evaltrace._internal.tracing import suppress_instrumentation
from evaltrace.evaluators._client import LoopClients
from evaltrace.evaluators._judge_trace import JudgeTrace
from evaltrace.evaluators._prompts import Prompt
from evaltrace.schema import TraceErrorType

T = TypeVar("T")

DEFAULT_MODEL = "gpt-4o-mini"
_FENCE = re.compile(r"```(?:json)?\s*(?P<body>.*?)```", re.DOTALL)
_RETRY_MESSAGE = (
    "Your reply could not be used: {error}. Reply again with only the JSON object in the requested shape, "
    "no other text."
)


def extract_json(text: str) -> Any:
    """Parse the JSON value in a model reply: the whole text, a fenced block, or the outermost ``{...}``.

    Raises:
        ValueError: No JSON value could be parsed.
    """
    stripped = text.strip()
    if not stripped:
        raise ValueError("empty reply")
    candidates = [stripped]
    candidates += [m.group("body").strip() for m in _FENCE.finditer(stripped)]
    start, end = stripped.find("{"), stripped.rfind("}")
    if 0 <= start < end:
        candidates.append(stripped[start : end + 1])
    for candidate in candidates:
        try:
            return json.loads(candidate)
        except (ValueError, RecursionError):  # a looping model can nest brackets deeper than json's recursion limit
            continue
    raise ValueError(f"reply is not JSON: {stripped[:80]!r}")


@dataclass(frozen=True)
class JudgeCall:
    """Bookkeeping of one judgement: model, prompt, tokens, cost and the raw replies."""

    model: str
    prompt: str
    prompt_hash: str
    raw: list[str] = field(default_factory=list)
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None
    attempts: int = 0
    cached: bool = False
    finish_reasons: list[str | None] = field(default_factory=list)
    duration_s: float = 0.0
    trace_id: str | None = None
    """The judge trace's id (32 hex): of this call, or, for a cached judgement, of the call that made it."""
    span_id: str | None = None
    """That trace's root span id (16 hex)."""

    def as_detail(self) -> dict[str, Any]:
        """Return the record stored under ``detail["judge"]``."""
        return {
            "model": self.model,
            "prompt": self.prompt,
            "prompt_hash": self.prompt_hash,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cost_usd": self.cost_usd,
            "attempts": self.attempts,
            "cached": self.cached,
            "finish_reasons": list(self.finish_reasons),
            "duration_s": self.duration_s,
            "trace_id": self.trace_id,
        }


@dataclass(frozen=True)
class JudgeReply(Generic[T]):
    """A parsed judgement."""

    value: T
    call: JudgeCall


class JudgeError(Exception):
    """A judgement could not be made: the endpoint failed or the reply stayed unparseable after one retry.

    Attributes:
        call: What the judgement cost before it failed.
        error_type: The error's kind on the result (``timeout``, ``http_5xx``, ``exception``).
        cause: Why the endpoint could not be used (down, refused the key, no key), for the user to act on; None
            when the endpoint answered and the reply was the problem.
    """

    def __init__(
        self, message: str, call: JudgeCall, error_type: TraceErrorType = "exception", cause: str | None = None
    ) -> None:
        super().__init__(message)
        self.call = call
        self.error_type: TraceErrorType = error_type
        self.cause = cause


NO_KEY = "no API key: OPENAI_API_KEY is not set and no api_key= was given to the Judge"


def _error_type(exc: Exception) -> TraceErrorType:
    import openai

    if isinstance(exc, openai.APITimeoutError):
        return "timeout"
    if isinstance(exc, openai.APIStatusError) and exc.status_code >= 500:
        return "http_5xx"
    return "exception"


def _cause(exc: Exception, timeout: float, key_missing: bool) -> str:
    """What went wrong with the endpoint, in words a user can act on (openai's own is a bare "Connection error.")."""
    import openai

    if isinstance(exc, openai.APITimeoutError):
        cause = f"no reply within {timeout:g} s"
    elif isinstance(exc, openai.APIConnectionError):
        inner = exc.__cause__
        cause = f"cannot connect ({type(inner).__name__}: {inner})" if inner is not None else "cannot connect"
    elif isinstance(exc, openai.APIStatusError):
        meaning = {401: " (the API key was refused)", 403: " (the API key is not allowed to use this model)"}
        cause = f"HTTP {exc.status_code}{meaning.get(exc.status_code, '')}: {str(exc.message)[:200]}"
    else:
        cause = f"{type(exc).__name__}: {exc}"
    return f"{NO_KEY}; the call failed with {cause}" if key_missing else cause


class _ReplyCache:
    """Parsed judgements by (prompt hash, model), LRU-bounded; plus the judgements in flight per event loop."""

    def __init__(self, size: int) -> None:
        self._entries: OrderedDict[tuple[str, str], tuple[Any, JudgeCall]] = OrderedDict()
        self._size = size
        self._lock = threading.Lock()  # several threads' event loops may share one judge
        self._pending: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, dict[tuple[str, str], asyncio.Future[None]]
        ] = weakref.WeakKeyDictionary()

    def get(self, key: tuple[str, str]) -> tuple[Any, JudgeCall] | None:
        # Copies, so that a caller mutating its result cannot change what later callers get.
        with self._lock:
            hit = self._entries.get(key)
            if hit is None:
                return None
            self._entries.move_to_end(key)
        return copy.deepcopy(hit[0]), hit[1]

    def put(self, key: tuple[str, str], value: Any, call: JudgeCall) -> None:
        with self._lock:
            self._entries[key] = (copy.deepcopy(value), call)
            while len(self._entries) > self._size:
                self._entries.popitem(last=False)

    def pending(self) -> dict[tuple[str, str], asyncio.Future[None]]:
        with self._lock:
            return self._pending.setdefault(asyncio.get_running_loop(), {})


class Judge:
    """An OpenAI-compatible chat model used as a judge (any ``base_url`` and model: OpenAI, vLLM, llama.cpp...).

    Example:
        ``Judge("gpt-4o-mini")`` or ``Judge("smollm2", base_url="http://127.0.0.1:8001/v1", api_key="none")``.
    """

    def __init__(
        self,
        model: str | None = None,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        client: Any = None,
        http_client: Any = None,
        max_concurrency: int = 4,
        temperature: float = 0.0,
        max_tokens: int | None = 1024,
        timeout: float = 60.0,
        max_retries: int = 2,
        json_mode: bool = True,
        price_per_million_tokens: tuple[float, float] | None = None,
        cache_size: int = 4096,
    ) -> None:
        """Create the judge; the only place that reads ``OPENAI_*`` variables (never inside an evaluation).

        Args:
            model: Chat model name; default ``EVALTRACE_JUDGE_MODEL`` or ``gpt-4o-mini``.
            base_url: OpenAI-compatible endpoint; default ``OPENAI_BASE_URL`` or OpenAI.
            api_key: Key; default ``OPENAI_API_KEY``. Without one, evaluations fail as results naming the
                missing key (calls to OpenAI's endpoint are then not made), never here.
            client: A ready ``openai.AsyncOpenAI`` to use instead of building one.
            http_client: ``httpx.AsyncClient`` passed to the built client (tests, proxies).
            max_concurrency: Most judge calls in flight at once per event loop.
            temperature: Sampling temperature (0 for repeatable judgements).
            max_tokens: Reply token limit.
            timeout: Per-request timeout in seconds.
            max_retries: The openai client's retries on 429/5xx/connection errors.
            json_mode: Send ``response_format={"type": "json_object"}`` for JSON prompts.
            price_per_million_tokens: (input, output) USD per million tokens; default ``evaltrace.pricing``.
            cache_size: Judgements kept in the (prompt hash, model) cache.
        """
        self._clients = LoopClients(
            client=client,
            base_url=base_url,
            api_key=api_key,
            http_client=http_client,
            timeout=timeout,
            max_retries=max_retries,
            max_concurrency=max_concurrency,
        )
        self.timeout = timeout
        self.model = model or os.environ.get("EVALTRACE_JUDGE_MODEL") or DEFAULT_MODEL
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.json_mode = json_mode
        self.prices = price_per_million_tokens
        self._cache = _ReplyCache(cache_size)

    def __repr__(self) -> str:
        return f"Judge(model={self.model!r})"

    @property
    def client(self) -> Any:
        """The ``openai.AsyncOpenAI`` of the first event loop to call (a fresh one once :meth:`aclose` closed it)."""
        return self._clients.primary

    @property
    def url(self) -> str:
        """The endpoint judgements are asked of (named when it fails)."""
        return self._clients.url

    async def aclose(self) -> None:
        """Close the HTTP client used on the running event loop (call it before the loop ends)."""
        await self._clients.aclose()

    def _cost(self, input_tokens: int, output_tokens: int) -> float | None:
        if self.prices is None:
            # evaltrace's price table (overrides, genai-prices, fallback); None for an unknown model.
            cost = pricing.cost_of(self.model, input_tokens=input_tokens, output_tokens=output_tokens)
            return None if cost is None else cost.total_usd
        return (input_tokens * self.prices[0] + output_tokens * self.prices[1]) / 1_000_000

    def prompt_hash(self, messages: list[dict[str, str]], json_mode: bool) -> str:
        """Return the sha256 of everything that determines a reply (messages and sampling settings)."""
        payload = {
            "messages": messages,
            "temperature": self.temperature,
            "json": json_mode,
            "max_tokens": self.max_tokens,
        }
        return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()

    async def _complete(
        self, messages: list[dict[str, str]], json_mode: bool, traced: JudgeTrace
    ) -> tuple[str, int, int, str | None]:
        kwargs: dict[str, Any] = {"model": self.model, "messages": messages, "temperature": self.temperature}
        if self.max_tokens is not None:
            kwargs["max_tokens"] = self.max_tokens
        if json_mode:
            kwargs["response_format"] = {"type": "json_object"}
        params = {
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "output_type": "json" if json_mode else None,
        }
        async with self._clients.semaphore():
            with traced.chat(self.model, messages, params, self.url) as span:
                with suppress_instrumentation():
                    response = await self._clients.client().chat.completions.create(**kwargs)
                usage = response.usage
                tokens_in = int(usage.prompt_tokens) if usage is not None else 0
                tokens_out = int(usage.completion_tokens) if usage is not None else 0
                if not response.choices:
                    span.record(response, "", None, self._cost(tokens_in, tokens_out))
                    return "", tokens_in, tokens_out, None
                choice = response.choices[0]
                message = choice.message
                # A refusal (OpenAI's `refusal` field, or no content) is kept as the raw text; it will not parse.
                text = message.content if message.content is not None else (getattr(message, "refusal", None) or "")
                finish_reason = getattr(choice, "finish_reason", None)
                span.record(response, str(text), finish_reason, self._cost(tokens_in, tokens_out))
        return str(text), tokens_in, tokens_out, finish_reason

    async def _call(
        self, call: JudgeCall, messages: list[dict[str, str]], json_mode: bool, traced: JudgeTrace
    ) -> JudgeCall:
        if self._clients.key_required:  # OpenAI refuses a call without a key: say so instead of making it
            raise JudgeError(f"judge call not made: {NO_KEY}", call, cause=NO_KEY)
        started = time.perf_counter()
        try:
            text, tokens_in, tokens_out, finish_reason = await self._complete(messages, json_mode, traced)
        except Exception as exc:
            import openai

            if not isinstance(exc, openai.OpenAIError):
                raise
            spent = call.duration_s + time.perf_counter() - started
            failed = replace(call, attempts=call.attempts + 1, duration_s=spent)
            cause = _cause(exc, self.timeout, self._clients.key_missing)
            raise JudgeError(f"judge call failed: {cause}", failed, _error_type(exc), cause) from exc
        input_tokens, output_tokens = call.input_tokens + tokens_in, call.output_tokens + tokens_out
        return replace(
            call,
            raw=[*call.raw, text],
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            cost_usd=self._cost(input_tokens, output_tokens),
            attempts=call.attempts + 1,
            finish_reasons=[*call.finish_reasons, finish_reason],
            duration_s=call.duration_s + time.perf_counter() - started,
        )

    async def prompt_logprobs(self, prompt: str) -> tuple[Any, JudgeCall]:
        """Ask the completions endpoint to score ``prompt`` itself (``echo`` with ``logprobs``), no sampling.

        Args:
            prompt: The text whose token log-likelihoods are wanted.

        Returns:
            The first choice's ``logprobs`` object (``tokens``, ``token_logprobs``, maybe ``text_offset``) and
            the call's record (tokens and cost).

        Raises:
            JudgeError: The endpoint failed or refused (no key, down, HTTP error); never a score.
        """
        call = JudgeCall(model=self.model, prompt="logprobs", prompt_hash=hashlib.sha256(prompt.encode()).hexdigest())
        if self._clients.key_required:
            raise JudgeError(f"logprobs call not made: {NO_KEY}", call, cause=NO_KEY)
        started = time.perf_counter()
        try:
            async with self._clients.semaphore():
                with suppress_instrumentation():
                    # One generated token at most: some servers reject max_tokens=0 even with echo.
                    response = await self._clients.client().completions.create(
                        model=self.model, prompt=prompt, echo=True, logprobs=1, max_tokens=1, temperature=0.0
                    )
        except Exception as exc:
            import openai

            if not isinstance(exc, openai.OpenAIError):
                raise
            cause = _cause(exc, self.timeout, self._clients.key_missing)
            failed = replace(call, attempts=1, duration_s=time.perf_counter() - started)
            raise JudgeError(f"logprobs call failed: {cause}", failed, _error_type(exc), cause) from exc
        usage = response.usage
        tokens_in = int(usage.prompt_tokens) if usage is not None else 0
        tokens_out = int(usage.completion_tokens) if usage is not None else 0
        done = replace(
            call,
            input_tokens=tokens_in,
            output_tokens=tokens_out,
            cost_usd=self._cost(tokens_in, tokens_out),
            attempts=1,
            duration_s=time.perf_counter() - started,
        )
        logprobs = response.choices[0].logprobs if response.choices else None
        return logprobs, done

    async def ask(
        self,
        prompt: Prompt,
        variables: Mapping[str, str],
        parse: Callable[[str], T],
        *,
        evaluator: str | None = None,
        subject: Mapping[str, Any] | None = None,
    ) -> JudgeReply[T]:
        """Render ``prompt``, ask the model, and parse the reply with ``parse`` (retrying once if it raises).

        A judgement that calls the model is traced as a trace of its own (root ``judge {evaluator}``, one
        ``chat {model}`` span per attempt); its ids are on the returned call record. A cached judgement makes
        no call and no trace: its record names the trace of the call that made it.

        Args:
            prompt: The template.
            variables: Values for its placeholders.
            parse: Turns the reply text into a value; raises ValueError/KeyError/TypeError when it cannot.
            evaluator: The evaluator asking, named by the judge trace's root span.
            subject: The evaluated Trace's ``extra`` (``trace_id``, ``span_id``): the judge trace links to it.

        Returns:
            The parsed value and the call record (``cached`` True when served from the cache).

        Raises:
            JudgeError: The endpoint failed, or the reply did not parse twice (raw replies in ``call.raw``).
        """
        json_mode = prompt.json_mode and self.json_mode
        messages = prompt.render(variables)
        key = (self.prompt_hash(messages, json_mode), self.model)
        while True:
            hit = self._cached(key)
            if hit is not None:
                return hit
            pending = self._cache.pending()
            waiting = pending.get(key)
            if waiting is None:
                break
            # An identical judgement is in flight on this loop: wait for it, then read the cache (if it failed,
            # the loop comes back here and this caller makes its own attempt).
            await asyncio.shield(waiting)
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        pending[key] = done
        try:
            traced = JudgeTrace.start(evaluator, prompt.ref, subject)
            try:
                reply = await self._ask_uncached(prompt, messages, json_mode, key, parse, traced)
            except BaseException as exc:
                traced.end(exc)
                raise
            traced.end()
            return reply
        finally:
            del pending[key]
            done.set_result(None)

    def _cached(self, key: tuple[str, str]) -> JudgeReply[Any] | None:
        hit = self._cache.get(key)
        if hit is None:
            return None
        value, call = hit
        return JudgeReply(value, replace(call, cached=True, cost_usd=0.0 if call.cost_usd is not None else None))

    async def _ask_uncached(
        self,
        prompt: Prompt,
        messages: list[dict[str, str]],
        json_mode: bool,
        key: tuple[str, str],
        parse: Callable[[str], T],
        traced: JudgeTrace,
    ) -> JudgeReply[T]:
        call = JudgeCall(
            model=self.model, prompt=prompt.ref, prompt_hash=key[0], trace_id=traced.trace_id, span_id=traced.span_id
        )
        error = ""
        for attempt in range(2):
            if attempt:
                retry = _RETRY_MESSAGE.format(error=error)
                messages = [
                    *messages,
                    {"role": "assistant", "content": call.raw[-1]},
                    {"role": "user", "content": retry},
                ]
            call = await self._call(call, messages, json_mode, traced)
            try:
                value = parse(call.raw[-1])
            except (ValueError, KeyError, TypeError) as exc:
                error = str(exc) or type(exc).__name__
                continue
            self._cache.put(key, value, call)
            return JudgeReply(value, call)
        if call.finish_reasons and call.finish_reasons[-1] == "length":
            # Weak or verbose models run out of tokens mid-JSON; say so, the fix is a larger max_tokens.
            error += f" (the reply was cut at max_tokens={self.max_tokens})"
        raise JudgeError(f"unparseable judge reply after retry: {error}", call)


_default_judge: Judge | None = None


def default_judge() -> Judge:
    """Return the shared judge built from the environment on first use (evaluators created without a judge)."""
    global _default_judge
    if _default_judge is None:
        _default_judge = Judge()
    return _default_judge
