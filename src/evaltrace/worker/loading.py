"""Resolve the worker's command-line settings: evaluators from an import path, sinks and exporters from specs."""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace.export import SpanExporter

from evaltrace._internal import backends
from evaltrace._internal.otlp_settings import resolve_otlp
from evaltrace.exceptions import ConfigError
from evaltrace.exporters.local_store import LocalStoreExporter

__all__ = ["build_exporters", "build_sinks", "load_evaluators"]

SINK_SPECS = "jsonl:PATH, langfuse, phoenix or phoenix:URL"


def _import(path: str) -> Any:
    module_name, sep, attribute = path.partition(":")
    if not sep or not module_name or not attribute:
        raise ConfigError("evaluators", f"expected 'package.module:NAME', got {path!r}")
    try:
        target: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError("evaluators", f"cannot import {module_name!r}: {exc}") from exc
    for part in attribute.split("."):
        try:
            target = getattr(target, part)
        except AttributeError as exc:
            raise ConfigError("evaluators", f"{module_name!r} has no attribute {attribute!r}") from exc
    return target


def _is_evaluator(value: Any) -> bool:
    return hasattr(value, "evaluate") or hasattr(value, "evaluator")  # an Evaluator or an EvaluatorSpec


def load_evaluators(paths: Sequence[str]) -> list[Any]:
    """Load evaluators named ``package.module:NAME`` (a list of them, one, or a zero-argument factory).

    Raises:
        ConfigError: The path does not import, or does not name evaluators.
    """
    loaded: list[Any] = []
    for path in paths:
        value = _import(path)
        if not _is_evaluator(value) and callable(value):
            value = value()
        items = [value] if _is_evaluator(value) else list(value) if isinstance(value, list | tuple) else None
        if items is None or not all(_is_evaluator(item) for item in items):
            raise ConfigError("evaluators", f"{path!r} is not an evaluator, a list of them, or a factory of them")
        loaded.extend(items)
    return loaded


def build_sinks(specs: Sequence[str]) -> list[Any]:
    """Score sinks from ``jsonl:PATH``, ``langfuse`` (LANGFUSE_* env), ``phoenix`` or ``phoenix:URL``."""
    from evaltrace.evaluation import JsonlScoreSink, LangfuseScoreSink, PhoenixScoreSink

    sinks: list[Any] = []
    for spec in specs:
        kind, _, arg = spec.partition(":")
        if kind == "jsonl" and arg:
            sinks.append(JsonlScoreSink(Path(arg)))
        elif kind == "langfuse" and not arg:
            sinks.append(LangfuseScoreSink())
        elif kind == "phoenix":
            sinks.append(PhoenixScoreSink(arg or None))
        else:
            raise ConfigError("sink", f"unknown sink {spec!r}; use {SINK_SPECS}")
    return sinks


def build_exporters(
    otlp_endpoint: str | None,
    protocol: str | None,
    headers: str | None,
    local_store: str | None,
) -> list[SpanExporter]:
    """Exporters for the enriched spans: OTLP (Jaeger, a collector) and/or the local store."""
    exporters: list[SpanExporter] = []
    if otlp_endpoint is not None:
        settings = resolve_otlp(otlp_endpoint, protocol, headers or {})
        assert settings is not None  # an explicit endpoint always resolves
        exporters.append(backends.otlp_target(settings).build())
    if local_store is not None:
        exporters.append(LocalStoreExporter(local_store))
    return exporters
