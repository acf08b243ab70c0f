"""The ``OTEL_INSTRUMENTATION_GENAI_EVALS_*`` environment surface of live evaluation, read and validated.

Names follow the OpenTelemetry GenAI evaluation utilities (``opentelemetry-util-genai-evals`` as shipped by
Splunk) where they already exist there: ``..._EVALS_EVALUATORS``, ``..._EVALUATION_SAMPLE_RATE``,
``..._EVALUATION_RATE_LIMIT_RPS`` / ``_BURST``, ``..._EVALS_QUEUE_SIZE``, ``..._EVALS_WORKERS``. The judge
and budget variables have no counterpart there and are evaltrace's own, under the same prefix. Two spellings the issue
used (``..._EVALS_SAMPLE_RATE``, ``..._EVALS_RATE_LIMIT``) are accepted as aliases.

Unlike the utilities (which run every installed evaluator when ``..._EVALS_EVALUATORS`` is unset), nothing is
evaluated until evaluators are named: evaluation costs money and latency, so it is off until asked for.

Every variable is validated when ``configure()`` runs, used or not: a bad value raises a
:class:`~evaltrace.exceptions.ConfigError` whose ``setting`` is the variable's name. An empty value counts as
unset (``VAR=`` is how many deployment templates leave a variable out).
"""

from __future__ import annotations

import difflib
import inspect
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from evaltrace.exceptions import ConfigError

__all__ = [
    "ENVIRONMENT_VARIABLES",
    "EvaluationEnvironment",
    "apply_to_options",
    "build_evaluators",
    "read_evaluation_environment",
]

EVALUATORS_ENV = "OTEL_INSTRUMENTATION_GENAI_EVALS_EVALUATORS"
SAMPLE_RATE_ENV = "OTEL_INSTRUMENTATION_GENAI_EVALUATION_SAMPLE_RATE"
DEFAULT_PRODUCTION_SAMPLE_RATE = 0.01
"""Share of traces the environment's (production) evaluators judge when no sample rate is set: 1%, the metrics
reference's production monitor. Judging every production trace would cost a judge call per trace."""
SAMPLE_RATE_ALIAS_ENV = "OTEL_INSTRUMENTATION_GENAI_EVALS_SAMPLE_RATE"
RATE_LIMIT_ENV = "OTEL_INSTRUMENTATION_GENAI_EVALUATION_RATE_LIMIT_RPS"
RATE_LIMIT_ALIAS_ENV = "OTEL_INSTRUMENTATION_GENAI_EVALS_RATE_LIMIT"
RATE_LIMIT_BURST_ENV = "OTEL_INSTRUMENTATION_GENAI_EVALUATION_RATE_LIMIT_BURST"
QUEUE_SIZE_ENV = "OTEL_INSTRUMENTATION_GENAI_EVALS_QUEUE_SIZE"
WORKERS_ENV = "OTEL_INSTRUMENTATION_GENAI_EVALS_WORKERS"
MAX_USD_PER_HOUR_ENV = "OTEL_INSTRUMENTATION_GENAI_EVALS_MAX_USD_PER_HOUR"
MAX_USD_PER_DAY_ENV = "OTEL_INSTRUMENTATION_GENAI_EVALS_MAX_USD_PER_DAY"
MAX_TOKENS_PER_HOUR_ENV = "OTEL_INSTRUMENTATION_GENAI_EVALS_MAX_TOKENS_PER_HOUR"
MAX_TOKENS_PER_DAY_ENV = "OTEL_INSTRUMENTATION_GENAI_EVALS_MAX_TOKENS_PER_DAY"
JUDGE_MODEL_ENV = "OTEL_INSTRUMENTATION_GENAI_EVALS_JUDGE_MODEL"
JUDGE_BASE_URL_ENV = "OTEL_INSTRUMENTATION_GENAI_EVALS_JUDGE_BASE_URL"
PROVENANCE_ENV = "EVALTRACE_EVALUATION_PROVENANCE"
TRACE_QUIET_PERIOD_ENV = "OTEL_INSTRUMENTATION_GENAI_EVALS_TRACE_QUIET_PERIOD"
SESSION_QUIET_PERIOD_ENV = "OTEL_INSTRUMENTATION_GENAI_EVALS_SESSION_QUIET_PERIOD"

ENVIRONMENT_VARIABLES = (
    EVALUATORS_ENV,
    SAMPLE_RATE_ENV,
    SAMPLE_RATE_ALIAS_ENV,
    RATE_LIMIT_ENV,
    RATE_LIMIT_ALIAS_ENV,
    RATE_LIMIT_BURST_ENV,
    MAX_USD_PER_HOUR_ENV,
    MAX_USD_PER_DAY_ENV,
    MAX_TOKENS_PER_HOUR_ENV,
    MAX_TOKENS_PER_DAY_ENV,
    QUEUE_SIZE_ENV,
    WORKERS_ENV,
    JUDGE_MODEL_ENV,
    JUDGE_BASE_URL_ENV,
    PROVENANCE_ENV,
    TRACE_QUIET_PERIOD_ENV,
    SESSION_QUIET_PERIOD_ENV,
)
"""Every variable this module reads (docs/evaluation.md "Environment" documents each)."""

_NONE = "none"  # the utilities' explicit "no evaluator"
_TRUE = frozenset({"true", "1", "yes", "on"})
_FALSE = frozenset({"false", "0", "no", "off"})


@dataclass(frozen=True)
class EvaluationEnvironment:
    """What the environment asks of live evaluation; None (or empty) where a variable is unset.

    Attributes:
        evaluators: Catalogue names to run on every span, in the order given.
        sample_rate: Fraction of traces the environment's evaluators evaluate, in [0, 1]; unset:
            :data:`DEFAULT_PRODUCTION_SAMPLE_RATE`.
        rate_limit_per_s: Evaluations admitted per second (> 0).
        rate_limit_burst: Burst size of that limit (>= 1).
        max_usd_per_hour: Judge spend budget per hour, USD (>= 0).
        max_usd_per_day: Judge spend budget per day, USD (>= 0).
        max_tokens_per_hour: Judge token budget per hour (>= 0).
        max_tokens_per_day: Judge token budget per day (>= 0).
        queue_size: Spans admitted for evaluation at once (``max_queue_size``, >= 1).
        workers: Threads running synchronous evaluators (``sync_workers``, >= 1).
        judge_model: Chat model of the LLM-judge evaluators built from the environment.
        judge_base_url: OpenAI-compatible endpoint of that judge (http or https URL).
        provenance: Add evaluator version and type to the evaluation events.
        trace_quiet_period_s: Seconds without a new span, after the root ended, before trace-level evaluation
            (``trace_quiet_period_s``, >= 0).
        session_quiet_period_s: Seconds without a new trace of a session before session-scope evaluation
            (``session_quiet_period_s``, >= 0).
    """

    evaluators: tuple[str, ...] = ()
    sample_rate: float | None = None
    rate_limit_per_s: float | None = None
    rate_limit_burst: int | None = None
    max_usd_per_hour: float | None = None
    max_usd_per_day: float | None = None
    max_tokens_per_hour: int | None = None
    max_tokens_per_day: int | None = None
    queue_size: int | None = None
    workers: int | None = None
    judge_model: str | None = None
    judge_base_url: str | None = None
    provenance: bool | None = None
    trace_quiet_period_s: float | None = None
    session_quiet_period_s: float | None = None


def _raw(environ: Mapping[str, str], name: str) -> str | None:
    value = environ.get(name)
    return value.strip() if value is not None and value.strip() else None


def _one_of(environ: Mapping[str, str], name: str, alias: str) -> tuple[str, str] | None:
    """The (variable, value) of ``name`` or its ``alias``; both set to different values is an error."""
    main, other = _raw(environ, name), _raw(environ, alias)
    if main is not None and other is not None and main != other:
        raise ConfigError(alias, f"conflicts with {name}={main!r}; set only one of them")
    if main is not None:
        return name, main
    return (alias, other) if other is not None else None


def _number(name: str, raw: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(name, f"expected a number, got {raw!r}") from None
    if not math.isfinite(value):
        raise ConfigError(name, f"expected a finite number, got {raw!r}")
    return value


def _rate(found: tuple[str, str] | None) -> float | None:
    if found is None:
        return None
    name, raw = found
    value = _number(name, raw)
    if not 0.0 <= value <= 1.0:
        raise ConfigError(name, f"expected a fraction between 0 and 1, got {raw!r}")
    return value


def _per_second(found: tuple[str, str] | None) -> float | None:
    if found is None:
        return None
    name, raw = found
    value = _number(name, raw)
    if value <= 0:
        raise ConfigError(name, f"expected evaluations per second > 0 (unset it for no limit), got {raw!r}")
    return value


def _budget(environ: Mapping[str, str], name: str) -> float | None:
    raw = _raw(environ, name)
    if raw is None:
        return None
    value = _number(name, raw)
    if value < 0:
        raise ConfigError(name, f"expected an amount in USD >= 0 (unset it for no budget), got {raw!r}")
    return value


def _count(environ: Mapping[str, str], name: str, what: str, minimum: int = 1) -> int | None:
    raw = _raw(environ, name)
    if raw is None:
        return None
    try:
        value = int(raw)
    except ValueError:
        raise ConfigError(name, f"expected a whole number of {what} >= {minimum}, got {raw!r}") from None
    if value < minimum:
        # The utilities read a queue size of 0 as "unbounded"; evaltrace's queue is always bounded.
        raise ConfigError(name, f"expected a whole number of {what} >= {minimum}, got {raw!r}")
    return value


def _seconds(environ: Mapping[str, str], name: str) -> float | None:
    raw = _raw(environ, name)
    if raw is None:
        return None
    value = _number(name, raw)
    if value < 0:
        raise ConfigError(name, f"expected seconds >= 0, got {raw!r}")
    return value


def _flag(environ: Mapping[str, str], name: str) -> bool | None:
    raw = _raw(environ, name)
    if raw is None:
        return None
    if raw.lower() in _TRUE:
        return True
    if raw.lower() in _FALSE:
        return False
    raise ConfigError(name, f"expected true or false, got {raw!r}")


def _url(environ: Mapping[str, str], name: str) -> str | None:
    raw = _raw(environ, name)
    if raw is None:
        return None
    scheme, _, rest = raw.partition("://")
    if scheme.lower() not in ("http", "https") or not rest.strip("/"):
        raise ConfigError(name, f"expected an http:// or https:// URL, got {raw!r}")
    return raw


def _evaluator_names(environ: Mapping[str, str]) -> tuple[str, ...]:
    raw = _raw(environ, EVALUATORS_ENV)
    if raw is None or raw.lower() == _NONE:
        return ()
    from evaltrace.evaluators.catalogue import CATALOGUE  # only when evaluators are asked for: a heavy import

    names: list[str] = []
    for item in raw.split(","):
        name = item.strip().lower()
        if not name:
            continue
        if "(" in name or "=" in name:
            raise ConfigError(
                EVALUATORS_ENV,
                f"{item.strip()!r}: options are not accepted here, only catalogue names; "
                "configure an evaluator with options in code or in eval.yaml",
            )
        if name not in CATALOGUE:
            close = difflib.get_close_matches(name, list(CATALOGUE), n=1)
            hint = f"did you mean {close[0]!r}?" if close else "see docs/evaluators.md for the catalogue"
            raise ConfigError(EVALUATORS_ENV, f"unknown evaluator {item.strip()!r}; {hint}")
        if name in names:
            raise ConfigError(EVALUATORS_ENV, f"{name!r} is listed twice (its scores would overwrite each other)")
        names.append(name)
    return tuple(names)


def read_evaluation_environment(environ: Mapping[str, str] | None = None) -> EvaluationEnvironment:
    """Read and validate every evaluation variable.

    Args:
        environ: The variables (default ``os.environ``).

    Returns:
        What the environment asks for; the default (nothing) when no variable is set.

    Raises:
        ConfigError: A variable has a bad value; ``setting`` is the variable's name.
    """
    env = os.environ if environ is None else environ
    return EvaluationEnvironment(
        evaluators=_evaluator_names(env),
        sample_rate=_rate(_one_of(env, SAMPLE_RATE_ENV, SAMPLE_RATE_ALIAS_ENV)),
        rate_limit_per_s=_per_second(_one_of(env, RATE_LIMIT_ENV, RATE_LIMIT_ALIAS_ENV)),
        rate_limit_burst=_count(env, RATE_LIMIT_BURST_ENV, "evaluations"),
        max_usd_per_hour=_budget(env, MAX_USD_PER_HOUR_ENV),
        max_usd_per_day=_budget(env, MAX_USD_PER_DAY_ENV),
        max_tokens_per_hour=_count(env, MAX_TOKENS_PER_HOUR_ENV, "tokens", minimum=0),
        max_tokens_per_day=_count(env, MAX_TOKENS_PER_DAY_ENV, "tokens", minimum=0),
        queue_size=_count(env, QUEUE_SIZE_ENV, "spans"),
        workers=_count(env, WORKERS_ENV, "threads"),
        judge_model=_raw(env, JUDGE_MODEL_ENV),
        judge_base_url=_url(env, JUDGE_BASE_URL_ENV),
        provenance=_flag(env, PROVENANCE_ENV),
        trace_quiet_period_s=_seconds(env, TRACE_QUIET_PERIOD_ENV),
        session_quiet_period_s=_seconds(env, SESSION_QUIET_PERIOD_ENV),
    )


def _accepts_judge(cls: type[Any]) -> bool:
    try:
        return "judge" in inspect.signature(cls.__init__).parameters
    except (TypeError, ValueError):
        return False


def build_evaluators(env: EvaluationEnvironment) -> list[Any]:
    """Build the environment's evaluators as ``EvaluatorSpec`` objects (an empty list when none are named).

    LLM-judge evaluators share one judge built from ``..._JUDGE_MODEL`` / ``..._JUDGE_BASE_URL`` when either is
    set (otherwise the default judge, from ``EVALTRACE_JUDGE_MODEL`` / ``OPENAI_BASE_URL``). The sample rate
    applies to these evaluators; evaluators passed in code carry their own.

    Raises:
        ConfigError: A named evaluator cannot be built without options (``setting`` is the evaluators variable).
    """
    if not env.evaluators:
        return []
    from evaltrace.evaluation.evaluator import EvaluatorSpec
    from evaltrace.evaluators.catalogue import CATALOGUE
    from evaltrace.evaluators.judge import Judge

    judge: Judge | None = None
    specs: list[Any] = []
    for name in env.evaluators:
        cls = CATALOGUE[name]
        options: dict[str, Any] = {}
        if (env.judge_model or env.judge_base_url) and _accepts_judge(cls):
            judge = judge or Judge(env.judge_model, base_url=env.judge_base_url)
            options["judge"] = judge
        try:
            built = cls(**options)
        except TypeError as exc:
            raise ConfigError(
                EVALUATORS_ENV, f"{name!r} needs options ({exc}); configure it in code or in eval.yaml instead"
            ) from None
        except Exception as exc:  # e.g. an optional dependency missing: named, not a deep traceback
            raise ConfigError(EVALUATORS_ENV, f"{name!r} cannot be built: {exc}") from None
        rate = DEFAULT_PRODUCTION_SAMPLE_RATE if env.sample_rate is None else env.sample_rate
        # A session evaluator (it judges a Conversation only) is attached at session scope; on spans it would
        # only error on every span.
        subjects = getattr(built, "subjects", frozenset({"trace"}))
        specs.append(EvaluatorSpec(built, sample_rate=rate, scope="span" if "trace" in subjects else "session"))
    return specs


def apply_to_options(
    env: EvaluationEnvironment, given: Mapping[str, Any] | None, provenance: bool | None = None
) -> dict[str, Any]:
    """Return the processor options: ``given`` (code wins), completed from the environment.

    The rate limit and budgets become the processor-wide ``limits`` (all evaluators together), unless ``given``
    has ``limits`` of its own: then those are used as they are, the environment's left out.

    Args:
        env: The environment read by :func:`read_evaluation_environment`.
        given: ``configure(evaluation_options=...)``.
        provenance: ``configure(evaluation_provenance=...)``; None defers to the environment.
    """
    options = dict(given or {})
    if env.queue_size is not None:
        options.setdefault("max_queue_size", env.queue_size)
    if env.workers is not None:
        options.setdefault("sync_workers", env.workers)
    if env.trace_quiet_period_s is not None:
        options.setdefault("trace_quiet_period_s", env.trace_quiet_period_s)
    if env.session_quiet_period_s is not None:
        options.setdefault("session_quiet_period_s", env.session_quiet_period_s)
    chosen = provenance if provenance is not None else env.provenance
    if chosen is not None:
        options.setdefault("evaluation_provenance", chosen)
    limits = {
        key: value
        for key, value in (
            ("evaluations_per_second", env.rate_limit_per_s),
            ("burst", env.rate_limit_burst),
            ("max_usd_per_hour", env.max_usd_per_hour),
            ("max_usd_per_day", env.max_usd_per_day),
            ("max_tokens_per_hour", env.max_tokens_per_hour),
            ("max_tokens_per_day", env.max_tokens_per_day),
        )
        if value is not None
    }
    if limits:
        options.setdefault("limits", limits)  # a mapping: ProcessorOptions coerces it to Limits
    return options
