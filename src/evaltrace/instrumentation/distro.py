"""evaltrace's OpenTelemetry distro: ``opentelemetry-instrument python app.py`` with evaltrace alone exports spans.

``opentelemetry-instrument`` loads one distro (``opentelemetry_distro`` entry point, or the one
``OTEL_PYTHON_DISTRO`` names), calls its ``configure()``, then runs every ``opentelemetry_configurator``, then the
instrumentors. Without any distro or configurator installed nothing sets the SDK up, and every span is dropped
silently. This distro fills that gap and nothing more:

- another distro installed beside it (opentelemetry-distro, a vendor's) and not overridden by
  ``OTEL_PYTHON_DISTRO=evaltrace``: it hands everything over to that one, so an app that worked before still
  works the same whichever distro ``opentelemetry-instrument`` happens to find first;
- a configurator installed (it sets the SDK up from ``OTEL_TRACES_EXPORTER`` and friends): it leaves the set-up
  to it, as two set-ups would fight over the global TracerProvider;
- neither: it calls :func:`evaltrace.configure` from the environment (``OTEL_SERVICE_NAME``,
  ``OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT/PROTOCOL/HEADERS``, ``LANGFUSE_*``, ``PHOENIX_*``, ``EVALTRACE_*``), with
  ``OTEL_TRACES_EXPORTER`` (``otlp``, ``console``, ``none``) and ``OTEL_SDK_DISABLED`` honoured. With nothing set,
  spans go to the local store (``.evaltrace/`` in the working directory), readable with ``evaltrace traces list``.

A setting evaltrace rejects is logged as one error line naming it; the app runs on, untraced.
"""

from __future__ import annotations

import logging
import os
from importlib.metadata import EntryPoint, entry_points
from typing import Any

from opentelemetry.instrumentation.distro import BaseDistro  # type: ignore[attr-defined]  # file-wide ignore there

__all__ = ["EvaltraceDistro"]

_logger = logging.getLogger(__name__)

NAME = "evaltrace"
"""This distro's entry point name (``OTEL_PYTHON_DISTRO=evaltrace`` selects it)."""
_DISTRO_GROUP = "opentelemetry_distro"
_CONFIGURATOR_GROUP = "opentelemetry_configurator"


class EvaltraceDistro(BaseDistro):  # type: ignore[misc]  # opentelemetry-instrumentation ships no type hints
    """The ``opentelemetry_distro`` entry point ``evaltrace``: configure evaltrace unless another set-up is there."""

    _delegate: Any = None

    def _configure(self, **kwargs: Any) -> None:
        """Hand over to another installed distro, or leave the SDK to a configurator, or call ``configure()``."""
        self._delegate = None if os.environ.get("OTEL_PYTHON_DISTRO") == NAME else _other_distro()
        if self._delegate is not None:
            self._delegate.configure(**kwargs)
            return
        if _installed(_CONFIGURATOR_GROUP):
            _logger.debug("evaltrace distro: a configurator is installed; it sets the OpenTelemetry SDK up")
            return
        autoconfigure()

    def load_instrumentor(self, entry_point: EntryPoint, **kwargs: Any) -> None:
        """Load instrumentors as the distro handed over to would (its own rules), else as every distro does."""
        if self._delegate is not None:
            self._delegate.load_instrumentor(entry_point, **kwargs)
        else:
            super().load_instrumentor(entry_point, **kwargs)


def autoconfigure() -> None:
    """Call :func:`evaltrace.configure` from the environment; log (never raise) a setting it rejects."""
    if os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return
    try:
        kwargs = _exporter_kwargs(os.environ.get("OTEL_TRACES_EXPORTER", ""))
        if kwargs is None:
            return
        from evaltrace.config import configure

        configure(**kwargs)
    except Exception as exc:  # the app must start whatever its environment says; the reason is logged
        _logger.error("evaltrace: tracing is off for this run: %s", exc)


def _exporter_kwargs(value: str) -> dict[str, Any] | None:
    """``configure()`` keyword arguments for ``OTEL_TRACES_EXPORTER``; None for ``none`` (no tracing set up)."""
    names = [name.strip().lower() for name in value.split(",") if name.strip()]
    if not names:
        return {}  # configure()'s own defaults: OTLP if an endpoint is set, else the local store
    if names == ["none"]:
        return None
    unknown = sorted(set(names) - {"otlp", "console"})
    if unknown:
        raise ValueError(f"OTEL_TRACES_EXPORTER: unsupported exporter {', '.join(unknown)} (use otlp, console or none)")
    # Only what was named: no local store beside an explicit exporter, as the OTel SDK would do.
    kwargs: dict[str, Any] = {"console": "console" in names, "local_store": False}
    endpoint_set = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    if "otlp" in names and not endpoint_set:
        protocol = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL")
        # The OTel SDK's default endpoints (configure() validates the protocol itself).
        kwargs["otlp_endpoint"] = (
            "http://localhost:4317" if (protocol or "").strip() == "grpc" else "http://localhost:4318"
        )
    return kwargs


def _other_distro() -> Any:
    """An instance of the first other installed distro, or None."""
    for entry_point in entry_points(group=_DISTRO_GROUP):
        if entry_point.name != NAME:
            distro = entry_point.load()()
            if isinstance(distro, BaseDistro):
                return distro
    return None


def _installed(group: str) -> bool:
    """Whether any entry point but ours is installed in ``group``."""
    return any(entry_point.name != NAME for entry_point in entry_points(group=group))
