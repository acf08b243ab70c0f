"""Authoring models of ``eval.yaml`` and ``cases.yaml``: the one source of truth for their keys.

Every key a user may write is a field of these models (each adapter's ``config``: :mod:`evaltrace.runner.adapter_configs`);
any other key is an error naming the nearest known one
(``systems[1].config.timout_s: unknown key; did you mean timeout_s?``). docs/offline.md's key tables are checked
against these models by a test, so the docs cannot drift from the code.

The persisted schema models (:mod:`evaltrace.schema`) ignore unknown fields for forward compatibility; the
authoring models of cases and systems derive from them and forbid extras instead, so both share one field list.
Values stay as authored (``${VAR}`` unexpanded): adapters, stores and judges expand them when they are built.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from typing import Any, Literal

from pydantic import ConfigDict, Field, ValidationError, field_validator, model_validator

from evaltrace.runner._authoring import AuthoringModel
from evaltrace.runner._config_errors import first_problem, key_error, unknown_key_problem
from evaltrace.runner.adapter_configs import (
    ADAPTER_CONFIGS,
    HTTP_METHODS,
    FunctionConfig,
    HttpConfig,
    ResponseMappingConfig,
)
from evaltrace.schema import EvalCase, ExpectedBehavior, RunVariant, SimulatedUser, StopWhen, WorkspaceSpec
from evaltrace.schema.trace import MAX_SIMULATED_TURNS

__all__ = [
    "ADAPTER_CONFIGS",
    "AUTHORING_MODELS",
    "HTTP_METHODS",
    "MAX_NAME_LENGTH",
    "NAME_PATTERN",
    "RESERVED_EVALUATOR_KEYS",
    "STORE_KEYS",
    "AuthoringModel",
    "CaseConfig",
    "EnricherEntry",
    "EvalFileConfig",
    "EvaluationBlock",
    "EvaluatorEntry",
    "ExpectedConfig",
    "FunctionConfig",
    "HttpConfig",
    "JudgeConfig",
    "OutputConfig",
    "ResponseMappingConfig",
    "RetryBlock",
    "SIMULATED_INPUT_KEYS",
    "SimulatedUserConfig",
    "StopWhenConfig",
    "SystemConfig",
    "WorkspaceConfig",
]

NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
"""Eval and system names: they become parts of run ids and paths."""
MAX_NAME_LENGTH = 128
"""Longest eval or system name: a run id (timestamp and eval name) and artifact paths must fit a file name."""


def _name_length_problem(value: Any) -> str | None:
    if isinstance(value, str) and len(value) > MAX_NAME_LENGTH:
        return (
            f"expected at most {MAX_NAME_LENGTH} characters (it becomes part of run ids and directory names),"
            f" got {len(value):,}: {value[:20]!r}..."
        )
    return None


StoreType = Literal["local_files", "sqlite", "postgres"]
STORE_KEYS: Mapping[str, tuple[str, ...]] = {
    "local_files": ("type", "path", "run_namespace"),
    "sqlite": ("type", "path", "run_namespace"),
    "postgres": ("type", "dsn", "run_namespace"),
}
"""The keys each store type takes (together, the fields of :class:`OutputConfig`)."""


def _nonempty_text(value: Any, problem: str) -> Any:
    if not isinstance(value, str) or not value.strip():
        raise key_error("", f"{problem}, got {value!r}")
    return value


class WorkspaceConfig(AuthoringModel, WorkspaceSpec):
    """``workspace`` of a system: where a filesystem eval's system works (fields of WorkspaceSpec)."""

    model_config = ConfigDict(extra="forbid", strict=False, allow_inf_nan=False)


class SystemConfig(AuthoringModel, RunVariant):
    """One entry of ``systems`` (alias ``variants``): the fields of RunVariant, ``config`` checked per adapter."""

    model_config = ConfigDict(extra="forbid", strict=False, allow_inf_nan=False)

    workspace: WorkspaceConfig | None = None

    @field_validator("name", mode="before")
    @classmethod
    def _valid_name(cls, value: Any) -> Any:
        too_long = _name_length_problem(value)
        if too_long is not None:
            raise key_error("", too_long)
        if isinstance(value, str) and not NAME_PATTERN.match(value):
            raise key_error("", f"{value!r} is not a valid system name (letters, digits, '_', '-', '.')")
        return value

    @model_validator(mode="after")
    def _adapter_config(self) -> SystemConfig:
        model = ADAPTER_CONFIGS.get(self.adapter)
        if model is not None:
            try:
                model.model_validate(self.config)
            except ValidationError as exc:
                where, problem, unknown = first_problem(exc)
                raise key_error(f"config.{where}" if where else "config", problem, unknown=unknown) from None
        return self


class OutputConfig(AuthoringModel):
    """One entry of ``output``: a store the finished run is saved to.

    Attributes:
        type: ``local_files``, ``sqlite`` or ``postgres``.
        path: Runs directory (local_files, optional) or database file (sqlite, required).
        dsn: Connection string (postgres, required; ``${VAR}`` kept unexpanded).
        run_namespace: ``{key: value}`` recorded with each run (ignored by local files).
    """

    type: StoreType
    path: str | None = None
    dsn: str | None = None
    run_namespace: dict[str, str] | None = None

    @classmethod
    def keys_for(cls, data: Mapping[str, Any]) -> Collection[str]:
        """The keys of the entry's store type."""
        kind = data.get("type")
        if kind is None:
            return cls.authored_keys()
        if kind not in STORE_KEYS:
            raise key_error("type", f"unknown store {kind!r}; known: {', '.join(STORE_KEYS)}")
        return STORE_KEYS[kind]

    @classmethod
    def key_kind(cls, data: Mapping[str, Any]) -> str:
        """Unknown keys are named with the store type, whose keys differ."""
        return f"key for a {data['type']} store" if data.get("type") in STORE_KEYS else "key"

    @field_validator("run_namespace", mode="before")
    @classmethod
    def _namespace_text(cls, value: Any) -> Any:
        # YAML reads `version: 2` as a number; a namespace value is a label, so scalars are kept as text.
        if isinstance(value, Mapping):
            return {k: str(v) if isinstance(v, int | float) else v for k, v in value.items()}
        return value

    @model_validator(mode="after")
    def _location(self) -> OutputConfig:
        if self.type == "sqlite" and not self.path:
            raise key_error("path", "a sqlite store needs the database file's path")
        if self.type == "postgres" and not self.dsn:
            raise key_error("dsn", "a postgres store needs a connection string")
        return self


class JudgeConfig(AuthoringModel):
    """The ``judge`` block: the OpenAI-compatible model every LLM-judge evaluator of the run uses."""

    model: str
    base_url: str | None = None
    api_key: str | None = None
    """Usually ``"${VAR}"``: expanded only when the judge is built, never written anywhere."""
    temperature: float | None = Field(default=None, ge=0)
    timeout_s: float | None = Field(default=None, gt=0)


RESERVED_EVALUATOR_KEYS = (
    "name",
    "type",
    "as",
    "import",
    "args",
    "timeout_s",
    "field",
    "judge",
    "scope",
    "max_dataset_rows",
)
"""Keys of an evaluator entry that are not constructor options."""


class EvaluatorEntry(AuthoringModel):
    """One entry of ``evaluators``; keys other than the reserved ones are constructor options.

    Forms: ``{name: <result name>, type: <catalogue type>}``, ``{import: "module:object", name?: <result name>}``,
    and the legacy ``{name: <catalogue type>, as?: <result name>}``. Options are checked against the evaluator's
    constructor when it is built (:mod:`evaltrace.runner.evaluate`).
    """

    model_config = ConfigDict(extra="allow", strict=True, allow_inf_nan=False)

    name: str | None = None
    type: str | None = None
    as_: str | None = Field(default=None, alias="as")
    import_: str | None = Field(default=None, alias="import")
    args: list[Any] = Field(default_factory=list)
    timeout_s: float | None = Field(default=None, gt=0)
    field: str | None = None
    """Dotted Trace path judged as the answer, for evaluators that take ``field``."""
    judge: dict[str, Any] | None = None
    """Keys of the ``judge`` block overriding the run's judge for this evaluator."""
    scope: Literal["trace", "session"] | None = None
    """``session``: judge a case's whole conversation; default: ``session`` for conversation-only evaluators."""
    max_dataset_rows: int | None = Field(default=None, gt=0)
    """Judge at most the first N rows (cases) of the dataset per system; the rest are not evaluated (cost guard)."""

    @classmethod
    def keys_for(cls, data: Mapping[str, Any]) -> Collection[str]:
        """Every key: the unknown ones are options, checked against the constructor."""
        return data.keys()

    @model_validator(mode="after")
    def _one_form(self) -> EvaluatorEntry:
        if self.type is not None and self.import_ is not None:
            raise key_error("type", "give either type (a catalogue evaluator) or import, not both")
        if self.type is None and self.import_ is None and self.name is None:
            raise key_error("", "expected 'type' (a catalogue name) or 'import' ('module:object')")
        if self.as_ is not None and self.name is not None and (self.type or self.import_):
            raise key_error("as", "'name' already names the result; drop 'as'")
        if self.judge is not None:
            unknown = sorted(set(self.judge) - set(JudgeConfig.authored_keys()))
            if unknown:
                problem = unknown_key_problem(unknown[0], JudgeConfig.authored_keys())
                raise key_error(f"judge.{unknown[0]}", problem, unknown=True)
        return self

    @property
    def catalogue_type(self) -> str | None:
        """The catalogue name (``type``, or the legacy ``name``); None for ``import``."""
        if self.import_ is not None:
            return None
        return self.type if self.type is not None else self.name

    @property
    def result_name(self) -> str | None:
        """The name results carry, when the entry sets one (else the evaluator's own name)."""
        if self.as_ is not None:
            return self.as_
        return self.name if (self.type is not None or self.import_ is not None) else None

    @property
    def options(self) -> dict[str, Any]:
        """Constructor options: the keys that are not reserved."""
        return dict(self.model_extra or {})


class RetryBlock(AuthoringModel):
    """``evaluation.retry_config``: failed evaluations are run again, waiting ``initial_delay_ms * mult ** n``."""

    max_retries: int = Field(default=3, ge=0)
    backoff_multiplier: float = Field(default=2.0, ge=1.0)
    initial_delay_ms: int = Field(default=1000, ge=0)


class EvaluationBlock(AuthoringModel):
    """The ``evaluation`` block: an EvaluationConfig, and how each case's evaluations are summarised.

    Which evaluators run, their options, parallelism, timeout and retries; ``summary_method`` and ``weights``
    make each case's MultiEvaluationResult summary score.
    """

    evaluators: list[str] | None = None
    """Result names of the evaluators to run (default: every entry of ``evaluators``)."""
    evaluator_configs: dict[str, dict[str, Any]] = Field(default_factory=dict)
    """Options per evaluator (by result name), over the entry's own."""
    parallel_execution: bool = True
    timeout_ms: int | None = Field(default=None, gt=0)
    """Timeout of an evaluation whose entry has no ``timeout_s``."""
    retry_config: RetryBlock | None = None
    summary_method: Literal["weighted_average", "simple_average", "minimum"] = "weighted_average"
    weights: dict[str, float] | None = None


class EnricherEntry(AuthoringModel):
    """One entry of ``enrichers``: a TraceEnricher to import; keys other than these are its class's options."""

    model_config = ConfigDict(extra="allow", strict=True, allow_inf_nan=False)

    import_: str = Field(alias="import")
    name: str | None = None
    timeout_s: float | None = Field(default=None, gt=0)

    @classmethod
    def keys_for(cls, data: Mapping[str, Any]) -> Collection[str]:
        """Every key: the unknown ones are the enricher's options, checked when it is built."""
        return data.keys()


class EvalFileConfig(AuthoringModel):
    """The top level of eval.yaml."""

    name: str
    cases: str
    systems: list[SystemConfig] | None = None
    variants: list[SystemConfig] | None = None
    """Alias of ``systems``."""
    evaluators: list[EvaluatorEntry] = Field(default_factory=list)
    concurrency: int = Field(default=4, gt=0)
    runs_dir: str = "runs"
    baseline: str | None = None
    output: list[OutputConfig] = Field(default_factory=list)
    judge: JudgeConfig | None = None
    pythonpath: list[str] = Field(default_factory=list)
    """Directories (relative to eval.yaml) that ``module:attr`` references import from; each must exist."""
    sinks: list[str] = Field(default_factory=list)
    """Score sinks the finished run's scores go to: ``jsonl:PATH``, ``langfuse``, ``phoenix[:URL]``."""
    enrichers: list[EnricherEntry] = Field(default_factory=list)
    """TraceEnrichers run over each case's trace before it is saved (:mod:`evaltrace.runner.enrichers`)."""
    evaluation: EvaluationBlock | None = None
    """The EvaluationConfig the run follows (:mod:`evaltrace.runner.evaluation_records`)."""

    @field_validator("evaluators", "output", "pythonpath", "sinks", "enrichers", mode="before")
    @classmethod
    def _empty_list(cls, value: Any) -> Any:
        return [] if value is None else value  # `evaluators:` with nothing under it

    @field_validator("sinks", mode="after")
    @classmethod
    def _sink_specs(cls, value: list[str]) -> list[str]:
        from evaltrace.runner.score_push import check_sink_spec

        for index, spec in enumerate(value):
            try:
                check_sink_spec(spec)
            except ValueError as exc:
                raise key_error(f"sinks[{index}]", str(exc)) from None
        return value

    @field_validator("name", mode="before")
    @classmethod
    def _valid_name(cls, value: Any) -> Any:
        too_long = _name_length_problem(value)
        if too_long is not None:
            raise key_error("", too_long)
        if not isinstance(value, str) or not NAME_PATTERN.match(value):
            raise key_error("", f"expected a name of letters, digits, '_', '-' or '.', got {value!r}")
        return value

    @field_validator("cases", mode="before")
    @classmethod
    def _cases_path(cls, value: Any) -> Any:
        return _nonempty_text(value, "expected the path of a cases.yaml file")

    @field_validator("runs_dir", mode="before")
    @classmethod
    def _runs_dir(cls, value: Any) -> Any:
        return _nonempty_text(value, "expected a directory path")

    @property
    def systems_key(self) -> str:
        """The key the systems were written under (``systems`` or its alias ``variants``)."""
        return "variants" if self.variants is not None else "systems"

    @model_validator(mode="after")
    def _systems(self) -> EvalFileConfig:
        if self.systems is not None and self.variants is not None:
            raise key_error("variants", "is an alias of systems; give one of them, not both")
        systems, key = self.systems or self.variants, self.systems_key
        if not systems:
            raise key_error(key, f"expected a non-empty list of {key}")
        names: set[str] = set()
        for index, system in enumerate(systems):
            if system.name in names:
                raise key_error(f"{key}[{index}].name", f"duplicate {key[:-1]} name {system.name!r}")
            names.add(system.name)
        if self.baseline is not None and self.baseline not in names:
            raise key_error("baseline", f"{self.baseline!r} is not one of the {key}")
        return self


class ExpectedConfig(AuthoringModel, ExpectedBehavior):
    """``expected`` of a case (fields of ExpectedBehavior)."""

    model_config = ConfigDict(extra="forbid", strict=False, allow_inf_nan=False)


class StopWhenConfig(AuthoringModel, StopWhen):
    """``simulated_user.stop_when``: ``{phrase: <text>}`` or ``{goal_met: true}``; a bare string is a phrase."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)

    @field_validator("phrase", mode="before")
    @classmethod
    def _phrase(cls, value: Any) -> Any:
        return value if value is None else _nonempty_text(value, "expected a non-empty phrase")

    @model_validator(mode="after")
    def _exactly_one(self) -> StopWhenConfig:
        if (self.phrase is None) == (not self.goal_met):
            raise key_error("", "expected exactly one of {phrase: <text>} or {goal_met: true}")
        return self


class SimulatedUserConfig(AuthoringModel, SimulatedUser):
    """``simulated_user`` of a case: the runner plays this user with the judge-block model."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)

    stop_when: StopWhenConfig | None = None

    @field_validator("persona", "goal", mode="before")
    @classmethod
    def _text(cls, value: Any) -> Any:
        return _nonempty_text(value, "expected a non-empty text")

    @field_validator("first_message", mode="before")
    @classmethod
    def _first(cls, value: Any) -> Any:
        return value if value is None else _nonempty_text(value, "expected a non-empty message")

    @field_validator("stop_when", mode="before")
    @classmethod
    def _not_a_verdict_name(cls, value: Any) -> Any:
        # A bare string is a phrase; this one is far likelier meant as the judge's verdict than as text to find.
        if isinstance(value, str) and value.strip().lower() in {"goal_met", "goal met", "judge"}:
            raise key_error(
                "", f"{value!r} would be a phrase to find; for the judge's verdict write {{goal_met: true}}"
            )
        return value

    @field_validator("max_turns", mode="before")
    @classmethod
    def _turns(cls, value: Any) -> Any:
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_SIMULATED_TURNS:
            raise key_error("", f"expected a whole number from 1 to {MAX_SIMULATED_TURNS}, got {value!r}")
        return value


SIMULATED_INPUT_KEYS = ("message", "history", "question", "query", "input")
"""Case input keys a simulated-user case may not hold: the runner sets ``message``/``history`` each turn, and the
others would be read as the turn's user message instead of ``message`` (:func:`evaltrace.schema.turn_user_input`)."""


class CaseConfig(AuthoringModel, EvalCase):
    """One case of cases.yaml (fields of EvalCase)."""

    model_config = ConfigDict(extra="forbid", strict=False, allow_inf_nan=False)

    expected: ExpectedConfig = Field(default_factory=ExpectedConfig)
    simulated_user: SimulatedUserConfig | None = None

    @model_validator(mode="after")
    def _simulated_input(self) -> CaseConfig:
        if self.simulated_user is not None:
            for key in SIMULATED_INPUT_KEYS:
                if key in self.input:
                    problem = (
                        f"a simulated_user case's input may not hold {key!r}: each turn passes the simulated "
                        "user's message as 'message' and the earlier turns as 'history'"
                    )
                    raise key_error(f"input.{key}", problem)
        return self


AUTHORING_MODELS: tuple[type[AuthoringModel], ...] = (
    EvalFileConfig,
    SystemConfig,
    FunctionConfig,
    HttpConfig,
    ResponseMappingConfig,
    WorkspaceConfig,
    EvaluatorEntry,
    EnricherEntry,
    EvaluationBlock,
    RetryBlock,
    OutputConfig,
    JudgeConfig,
    CaseConfig,
    ExpectedConfig,
    SimulatedUserConfig,
    StopWhenConfig,
)
"""Every authoring model; each has a key table in docs/offline.md (checked by a test)."""
