"""Variant adapters: how one case input reaches the system under test (a Python function, an HTTP endpoint).

An adapter returns the system's output, or raises :class:`AdapterFailure` with the TraceError type that
describes what went wrong (``timeout``, ``http_5xx``, ``adapter_error``); any other exception is the system's
own and becomes an ``exception`` error. Configuration problems are found when the adapter is built and raised
as :class:`~evaltrace.runner.errors.RunConfigError`, before any case runs.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

import httpx

from evaltrace._internal.daemon_pool import DaemonExecutor, UserAbort
from evaltrace.runner.config import expand_env, mask_secrets
from evaltrace.runner.errors import RunConfigError
from evaltrace.runner.import_paths import import_dirs, import_object
from evaltrace.runner.response_mapping import MappingFailure, ResponseMapping, ResponseMappingError
from evaltrace.schema import RunVariant, TraceErrorType

__all__ = [
    "ADAPTERS",
    "VARIANT_METADATA_PARAMETER",
    "WORKSPACE_PARAMETER",
    "Adapter",
    "AdapterFailure",
    "FunctionAdapter",
    "HttpAdapter",
    "build_adapter",
    "import_object",
]

_HTTP_METHODS = frozenset({"GET", "POST", "PUT", "PATCH"})
DEFAULT_HTTP_TIMEOUT_S = 30.0
_FUNCTION_WORKERS = 32
VARIANT_METADATA_PARAMETER = "variant_metadata"
"""A target declaring a parameter of this name receives the variant's ``metadata``."""
WORKSPACE_PARAMETER = "workspace"
"""A target declaring a parameter of this name receives its cell's workspace copy (filesystem evals)."""


class AdapterFailure(Exception):
    """The call to the system failed in a way the adapter classifies (timeout, HTTP 5xx, adapter error)."""

    def __init__(self, error_type: TraceErrorType, message: str) -> None:
        super().__init__(message)
        self.error_type: TraceErrorType = error_type
        self.message = message


class Adapter(Protocol):
    """Calls the system under test with one case input."""

    async def call(self, case_input: dict[str, Any]) -> Any:
        """Return the system's output for ``case_input``."""
        ...

    async def aclose(self) -> None:
        """Release connections."""
        ...


class FunctionAdapter:
    """Calls a Python function (sync or async) with the case input as keyword arguments.

    ``kwargs`` (the variant's ``config.kwargs``) are passed with the case input, so one function serves several
    variants (model names, prompt versions); a key in both is an ``adapter_error`` of that case, never a silent
    override. The variant's ``metadata`` is passed as ``variant_metadata=`` when the function declares that
    parameter.

    Sync functions run on a worker thread (the OTel context follows them, so their spans join the case);
    ``timeout_s`` abandons a call that runs too long: Python cannot stop the thread, but it is a daemon that is
    replaced in the pool and never joined, so a hung system costs a thread, not the run or the process's exit.
    ``SystemExit``/``KeyboardInterrupt`` raised by the function are the system's failure (an ``exception`` error
    of the case), not the run's end.
    """

    def __init__(
        self,
        func: Callable[..., Any],
        timeout_s: float | None = None,
        *,
        kwargs: dict[str, Any] | None = None,
        variant_metadata: dict[str, Any] | None = None,
        trace_extra: dict[str, Any] | None = None,
    ) -> None:
        self.func = func
        self.timeout_s = timeout_s
        self.trace_extra = dict(trace_extra or {})
        self._signature = _signature(func)
        self.kwargs = dict(kwargs or {})
        if self._signature is not None and VARIANT_METADATA_PARAMETER in self._signature.parameters:
            self.kwargs[VARIANT_METADATA_PARAMETER] = dict(variant_metadata or {})
        # Not the loop's default pool (asyncio.run() joins it) nor a ThreadPoolExecutor (joined at interpreter
        # exit): either would keep a run whose system hung past timeout_s from ever finishing.
        self._pool = DaemonExecutor(_FUNCTION_WORKERS, thread_name_prefix="evaltrace-sut")

    def takes_workspace(self) -> bool:
        """Whether the function declares a ``workspace`` parameter (where a filesystem eval's copy is passed)."""
        return self._signature is not None and WORKSPACE_PARAMETER in self._signature.parameters

    def takes(self, name: str) -> bool:
        """Whether the function accepts a keyword argument ``name`` (declared, or through ``**kwargs``)."""
        if self._signature is None:
            return True
        parameters = self._signature.parameters.values()
        return name in self._signature.parameters or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters)

    async def call(self, case_input: dict[str, Any], *, workspace: Path | None = None) -> Any:
        """Call the function; a mismatch between the input keys and its parameters is an adapter error.

        ``workspace`` (a filesystem eval's copy) is passed as ``workspace=`` when the function declares it.
        """
        given = self.kwargs
        if workspace is not None and self.takes_workspace():
            given = {**self.kwargs, WORKSPACE_PARAMETER: workspace}
        clash = sorted(set(case_input) & set(given))
        if clash:
            source = _SOURCES.get(clash[0], "config.kwargs")
            message = f"case input key {clash[0]!r} is also set by the variant's {source}; rename one"
            raise AdapterFailure("adapter_error", message)
        arguments = {**case_input, **given}
        if self._signature is not None:
            try:
                self._signature.bind(**arguments)
            except TypeError as exc:
                raise AdapterFailure("adapter_error", f"case input does not fit the function: {exc}") from None
        try:
            async with asyncio.timeout(self.timeout_s):
                if inspect.iscoroutinefunction(self.func):
                    return await self.func(**arguments)
                # The copied context carries the case's root span and ids into the worker thread.
                call = functools.partial(contextvars.copy_context().run, self.func, **arguments)
                produced = await self._in_thread(call)
                return await produced if inspect.isawaitable(produced) else produced
        except TimeoutError:
            raise AdapterFailure("timeout", f"no answer within {self.timeout_s} s") from None
        except (SystemExit, KeyboardInterrupt) as exc:  # raised by an async function, on the run's loop
            raise UserAbort(exc) from exc

    async def _in_thread(self, call: Callable[[], Any]) -> Any:
        future = self._pool.submit(call)
        try:
            return await asyncio.wrap_future(future)
        except BaseException:
            if not future.done():
                self._pool.abandon(future)  # timed out: let the thread go, a new one takes its place
            raise

    async def aclose(self) -> None:
        """Release the worker threads without waiting for calls abandoned after a timeout."""
        self._pool.shutdown(wait=False, cancel_futures=True)


_SOURCES = {VARIANT_METADATA_PARAMETER: "metadata", WORKSPACE_PARAMETER: "workspace"}


def _signature(func: Callable[..., Any]) -> inspect.Signature | None:
    try:
        return inspect.signature(func)
    except (TypeError, ValueError):
        return None


def _render(template: Any, case_input: dict[str, Any], workspace: str | None = None) -> Any:
    """Fill ``{{input}}`` / ``{{input.key}}`` / ``{{workspace}}`` placeholders (a whole-string one keeps its type)."""
    if isinstance(template, dict):
        return {k: _render(v, case_input, workspace) for k, v in template.items()}
    if isinstance(template, list):
        return [_render(v, case_input, workspace) for v in template]
    if not isinstance(template, str) or "{{" not in template:
        return template
    stripped = template.strip()
    if stripped.startswith("{{") and stripped.endswith("}}") and stripped.count("{{") == 1:
        return _lookup(stripped[2:-2].strip(), case_input, workspace)
    text = template if workspace is None else template.replace("{{workspace}}", workspace)
    for key in list(case_input):
        value = case_input[key]
        text = text.replace("{{input." + key + "}}", value if isinstance(value, str) else json.dumps(value))
    return text.replace("{{input}}", json.dumps(case_input))


def _lookup(expression: str, case_input: dict[str, Any], workspace: str | None = None) -> Any:
    if expression == "input":
        return case_input
    if expression == "workspace" and workspace is not None:
        return workspace
    if expression.startswith("input."):
        return case_input.get(expression[len("input.") :])
    raise AdapterFailure("adapter_error", f"unknown placeholder {{{{{expression}}}}} in body_template")


class HttpAdapter:
    """Sends the case input as JSON to an HTTP endpoint and returns the JSON (or text) response.

    Status 5xx is ``http_5xx``, a timeout ``timeout``, any other non-2xx status or transport error
    ``adapter_error``. ``GET`` sends the input as query parameters. With a ``response_mapping``, a JSON object or
    array body comes back as a :class:`~evaltrace.runner.response_mapping.MappedOutput`; a body the mapping
    cannot read (a selector matching a value of the wrong type) is an ``adapter_error`` naming the selector.
    """

    def __init__(
        self,
        url: str,
        *,
        method: str = "POST",
        headers: dict[str, str] | None = None,
        timeout_s: float = DEFAULT_HTTP_TIMEOUT_S,
        body_template: Any = None,
        response_mapping: ResponseMapping | None = None,
        trace_extra: dict[str, Any] | None = None,
    ) -> None:
        self.url = url
        self.trace_extra = dict(trace_extra or {})
        self.method = method
        self.body_template = body_template
        self.response_mapping = response_mapping
        self._client = httpx.AsyncClient(headers=headers or {}, timeout=timeout_s)

    async def call(self, case_input: dict[str, Any], *, workspace: Path | None = None) -> Any:
        """POST (or the configured method) the input; classify failures; decode the body.

        ``workspace`` (a filesystem eval's copy) fills ``{{workspace}}`` in the body template as an absolute path.
        """
        where = None if workspace is None else str(workspace)
        body = _render(self.body_template, case_input, where) if self.body_template is not None else case_input
        try:
            if self.method == "GET":
                response = await self._client.get(self.url, params=body if isinstance(body, dict) else None)
            else:
                response = await self._client.request(self.method, self.url, json=body)
        except httpx.TimeoutException as exc:
            raise AdapterFailure("timeout", f"{self.method} {self.url} timed out: {type(exc).__name__}") from None
        except (httpx.HTTPError, TypeError, ValueError) as exc:
            # TypeError/ValueError: the input cannot be encoded (e.g. nested values as GET query parameters).
            raise AdapterFailure("adapter_error", f"{self.method} {self.url} failed: {exc!r}") from None
        if response.status_code >= 500:
            raise AdapterFailure("http_5xx", f"HTTP {response.status_code}: {response.text[:500]}")
        if response.status_code >= 300:
            raise AdapterFailure("adapter_error", f"HTTP {response.status_code}: {response.text[:500]}")
        try:
            decoded = response.json()
        except ValueError:
            return response.text
        if self.response_mapping is None or not isinstance(decoded, dict | list):
            return decoded
        try:
            return self.response_mapping.apply(decoded)
        except MappingFailure as exc:
            raise AdapterFailure("adapter_error", str(exc)) from None

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self._client.aclose()


def _function_adapter(variant: RunVariant, path: Path, entry: str, dirs: Sequence[Path]) -> Adapter:
    target = variant.config.get("target")
    if not isinstance(target, str):
        raise RunConfigError(path, f"{entry}.config.target", "expected 'module:function'")
    try:
        func = import_object(target, dirs)
    except ValueError as exc:
        raise RunConfigError(path, f"{entry}.config.target", str(exc)) from None
    if not callable(func):
        raise RunConfigError(path, f"{entry}.config.target", f"{target!r} is not callable")
    kwargs = _function_kwargs(func, variant, path, entry)
    return FunctionAdapter(
        func,
        timeout_s=_timeout(variant.config, path, entry, None),
        kwargs=kwargs,
        variant_metadata=variant.metadata,
        trace_extra=variant_extra(variant),
    )


def variant_extra(variant: RunVariant) -> dict[str, Any]:
    """Return what each trace of ``variant`` records about it in ``Trace.extra``, so reports can show it.

    ``variant_kwargs``: ``config.kwargs`` as written (``${VAR}`` unexpanded, literal secrets masked);
    ``variant_metadata``: the variant's ``metadata``. Empty ones are left out.
    """
    extra: dict[str, Any] = {}
    kwargs = variant.config.get("kwargs")
    if isinstance(kwargs, dict) and kwargs:
        extra["variant_kwargs"] = mask_secrets(kwargs)
    if variant.metadata:
        extra["variant_metadata"] = dict(variant.metadata)
    return extra


def _function_kwargs(func: Callable[..., Any], variant: RunVariant, path: Path, entry: str) -> dict[str, Any]:
    """Return ``config.kwargs`` with ``${VAR}`` expanded, checked against the function's parameters."""
    raw = variant.config.get("kwargs")
    if raw is None:
        return {}
    if not isinstance(raw, dict) or not all(isinstance(k, str) for k in raw):
        raise RunConfigError(path, f"{entry}.config.kwargs", f"expected a mapping of argument names, got {raw!r}")
    if VARIANT_METADATA_PARAMETER in raw:
        problem = f"{VARIANT_METADATA_PARAMETER!r} is reserved: the variant's metadata is passed under it"
        raise RunConfigError(path, f"{entry}.config.kwargs.{VARIANT_METADATA_PARAMETER}", problem)
    kwargs: dict[str, Any] = expand_env(raw, path, f"{entry}.config.kwargs")
    signature = _signature(func)
    if signature is not None:
        accepts_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in signature.parameters.values())
        for key in kwargs:
            parameter = signature.parameters.get(key)
            usable = parameter is not None and parameter.kind in (
                inspect.Parameter.POSITIONAL_OR_KEYWORD,
                inspect.Parameter.KEYWORD_ONLY,
            )
            if not usable and not accepts_any:
                problem = f"{getattr(func, '__qualname__', func)!r} has no keyword parameter {key!r}"
                raise RunConfigError(path, f"{entry}.config.kwargs.{key}", problem)
    return kwargs


def _timeout(config: dict[str, Any], path: Path, entry: str, default: float | None) -> float | None:
    value = config.get("timeout_s", default)
    if value is not None and (isinstance(value, bool) or not isinstance(value, int | float) or value <= 0):
        raise RunConfigError(path, f"{entry}.config.timeout_s", f"expected a positive number, got {value!r}")
    return None if value is None else float(value)


def _http_adapter(variant: RunVariant, path: Path, entry: str, dirs: Sequence[Path]) -> Adapter:
    config = expand_env(variant.config, path, f"{entry}.config")
    url = config.get("url")
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise RunConfigError(path, f"{entry}.config.url", f"expected an http(s) URL, got {url!r}")
    method = str(config.get("method", "POST")).upper()
    if method not in _HTTP_METHODS:
        raise RunConfigError(path, f"{entry}.config.method", f"expected one of {sorted(_HTTP_METHODS)}")
    headers = config.get("headers") or {}
    if not isinstance(headers, dict) or not all(isinstance(v, str) for v in headers.values()):
        raise RunConfigError(path, f"{entry}.config.headers", "expected a mapping of header names to strings")
    timeout_s = _timeout(config, path, entry, DEFAULT_HTTP_TIMEOUT_S)
    assert timeout_s is not None  # a default is given
    mapping: ResponseMapping | None = None
    if config.get("response_mapping") is not None:
        try:
            mapping = ResponseMapping.from_config(config["response_mapping"])
        except ResponseMappingError as exc:
            key = f"{entry}.config.response_mapping" + (f".{exc.key}" if exc.key else "")
            raise RunConfigError(path, key, exc.problem) from None
    return HttpAdapter(
        url,
        method=method,
        headers=headers,
        timeout_s=timeout_s,
        body_template=config.get("body_template"),
        response_mapping=mapping,
        trace_extra=variant_extra(variant),
    )


ADAPTERS: dict[str, Callable[[RunVariant, Path, str, Sequence[Path]], Adapter]] = {
    "http": _http_adapter,
    "python_function": _function_adapter,
}
"""Adapter name -> builder ``(variant, eval.yaml path, entry, import directories) -> Adapter``."""


def build_adapter(
    variant: RunVariant,
    config_path: Path,
    index: int,
    *,
    key: str = "variants",
    pythonpath: Sequence[str] = (),
) -> Adapter:
    """Build the adapter of ``variant`` (the ``index``-th in ``config_path``, under ``key``: systems or variants).

    ``module:function`` targets import from the directories of :func:`~evaltrace.runner.import_paths.import_dirs`
    (``pythonpath``, the eval.yaml's directory, the project root).

    Raises:
        RunConfigError: Unknown adapter, invalid adapter config, or a ``pythonpath`` entry that does not exist.
    """
    entry = f"{key}[{index}]"
    builder = ADAPTERS.get(variant.adapter)
    if builder is None:
        raise RunConfigError(path=config_path, entry=f"{entry}.adapter", problem=_unknown_adapter(variant.adapter))
    return builder(variant, config_path, entry, import_dirs(config_path, config_path.parent, pythonpath))


def _unknown_adapter(name: str) -> str:
    return f"unknown adapter {name!r}; known: {', '.join(sorted(ADAPTERS))}"
