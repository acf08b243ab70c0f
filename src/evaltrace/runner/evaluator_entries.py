"""Evaluators of an eval.yaml built from their entries, options checked against each evaluator's constructor.

Forms of an entry (:class:`~evaltrace.runner.config_models.EvaluatorEntry`):

* ``{name: <result name>, type: <catalogue type>, **options}``: results are named ``name`` and carry
  ``evaluator_type = type``;
* ``{name: <catalogue type>, as?: <result name>, **options}`` (legacy): the name is the catalogue type;
* ``{import: "module:object", name?: <result name>, **options}``: an object that already has ``evaluate`` is used
  as is; a class is instantiated with the options; another callable is wrapped with ``@evaltrace.evaluator``.

Reserved keys: ``args`` (positional constructor arguments), ``timeout_s`` (per evaluation), ``field`` (passed to
evaluators whose constructor takes it), ``judge`` (keys overriding the run's ``judge:`` block) and ``scope``
(``trace`` or ``session``: a case's trace or its conversation; checked against the evaluator's ``subjects``). Every other key
is a constructor option; one the constructor does not take is an error naming the nearest parameter. Evaluators
whose constructor takes ``judge`` get the judge built from the run's ``judge:`` block, unless the entry has its own.
"""

from __future__ import annotations

import difflib
import inspect
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import ValidationError

from evaltrace._internal.value_types import coerce_text, describe_type, first_mismatch, format_path, parameter_hints
from evaltrace.evaluation import Evaluator, evaluator
from evaltrace.evaluators.catalogue import CATALOGUE
from evaltrace.evaluators.embeddings import embedder_from_config
from evaltrace.evaluators.judge import Judge
from evaltrace.runner._config_errors import first_problem, shown_value, unknown_key_problem
from evaltrace.runner.config import expand_env, load_evaluator_entries
from evaltrace.runner.config_models import RESERVED_EVALUATOR_KEYS, EvaluatorEntry, JudgeConfig
from evaltrace.runner.errors import RunConfigError
from evaltrace.runner.import_paths import import_dirs, import_object

__all__ = ["JUDGE_PARAMETER", "ConfiguredEvaluator", "Scope", "build_evaluators", "build_judge"]

Scope = Literal["trace", "session"]
"""What an evaluator of a run judges: each case's trace, or each case's conversation (a simulated-user case)."""
_EMBEDDER_PARAMETER = "embedder"
JUDGE_PARAMETER = "judge"
"""Constructor parameter through which an evaluator receives the run's judge."""
_FIELD_PARAMETER = "field"
_ENV_REFERENCE = re.compile(r"\$\{[A-Za-z_][A-Za-z0-9_]*\}")


@dataclass(frozen=True)
class ConfiguredEvaluator:
    """An evaluator and how it runs.

    Attributes:
        evaluator: The evaluator.
        timeout_s: Per-evaluation timeout (None: none).
        evaluator_type: The catalogue type its results carry as ``evaluator_type`` (None: the evaluator's own).
        scope: ``trace`` (judges each case's trace) or ``session`` (judges each case's conversation).
        max_dataset_rows: Judge at most the first N rows of the dataset per system (None: every row).
    """

    evaluator: Evaluator
    timeout_s: float | None = None
    evaluator_type: str | None = None
    scope: Scope = "trace"
    max_dataset_rows: int | None = None

    @property
    def name(self) -> str:
        """The name results carry (the entry's result name if given)."""
        return str(getattr(self.evaluator, "name", "") or type(self.evaluator).__name__)


def build_judge(config: JudgeConfig, path: Path, entry: str, *, cache_size: int | None = None) -> Judge:
    """Build the judge of a ``judge:`` block, expanding its ``${VAR}`` references now (never persisted).

    ``cache_size`` overrides the judge's reply cache (0: every call asks the model, as the simulated user must).

    Raises:
        RunConfigError: A referenced environment variable is not set, or the ``openai`` extra is missing.
    """
    settings = expand_env(config.model_dump(exclude_none=True), path, entry)
    options: dict[str, Any] = {k: settings[k] for k in ("base_url", "api_key", "temperature") if k in settings}
    if "timeout_s" in settings:
        options["timeout"] = float(settings["timeout_s"])
    if cache_size is not None:
        options["cache_size"] = cache_size
    try:
        return Judge(settings["model"], **options)
    except ImportError as exc:  # the judge's client needs the openai extra
        raise RunConfigError(path, entry, str(exc)) from None


class _Judges:
    """The run's judge, built on first use (a block no evaluator needs is never expanded), and entry overrides."""

    def __init__(self, config: JudgeConfig | None, path: Path) -> None:
        self.config = config
        self.path = path
        self._shared: Judge | None = None

    def shared(self) -> Judge | None:
        if self.config is None:
            return None
        if self._shared is None:
            self._shared = build_judge(self.config, self.path, "judge")
        return self._shared

    def overridden(self, override: dict[str, Any], where: str) -> Judge:
        base = self.config.model_dump(exclude_unset=True) if self.config is not None else {}
        try:
            merged = JudgeConfig.model_validate({**base, **override})
        except ValidationError as exc:
            entry, problem, _ = first_problem(exc, where)
            raise RunConfigError(self.path, entry, problem) from None
        return build_judge(merged, self.path, where)


def _parameters(factory: Callable[..., Any]) -> tuple[set[str], bool]:
    """Keyword parameters of ``factory``, and whether it takes any keyword (``**kwargs``, or no signature)."""
    try:
        signature = inspect.signature(factory)
    except (TypeError, ValueError):
        return set(), True
    names: set[str] = set()
    takes_any = False
    for parameter in signature.parameters.values():
        if parameter.kind is inspect.Parameter.VAR_KEYWORD:
            takes_any = True
        elif parameter.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY):
            names.add(parameter.name)
    return names, takes_any


@dataclass(frozen=True)
class _Plan:
    """What an entry builds and what to call it in messages.

    ``kind``: ``catalogue`` (``target`` is the class), ``class`` (an imported class), ``function`` (an imported
    function, wrapped with ``@evaluator``) or ``instance`` (an imported evaluator object, used as is).
    """

    kind: str
    target: Any
    label: str
    catalogue_type: str | None = None

    @property
    def factory(self) -> Callable[..., Any]:
        """What the options are passed to."""
        return evaluator if self.kind == "function" else self.target


def _plan(entry: EvaluatorEntry, path: Path, where: str, dirs: Sequence[Path]) -> _Plan:
    kind = entry.catalogue_type
    if kind is not None:
        cls = CATALOGUE.get(kind)
        if cls is None:
            key = "type" if entry.type is not None else "name"
            close = difflib.get_close_matches(kind, list(CATALOGUE), n=1)
            hint = f"did you mean {close[0]}?" if close else "see docs/evaluators.md for the catalogue"
            raise RunConfigError(path, f"{where}.{key}", f"unknown evaluator {kind!r}; {hint}")
        return _Plan("catalogue", cls, kind, catalogue_type=kind)
    reference = str(entry.import_)
    try:
        obj = import_object(reference, dirs)
    except ValueError as exc:
        raise RunConfigError(path, f"{where}.import", str(exc)) from None
    if hasattr(obj, "evaluate") and not inspect.isclass(obj):
        return _Plan("instance", obj, reference)
    if inspect.isclass(obj):
        return _Plan("class", obj, reference)
    if callable(obj):
        return _Plan("function", obj, reference)
    raise RunConfigError(path, f"{where}.import", f"{reference!r} is neither an evaluator, a class nor a function")


def _options(entry: EvaluatorEntry, plan: _Plan, judges: _Judges, path: Path, where: str) -> dict[str, Any]:
    """The constructor's keyword arguments: the entry's options (checked), its ``field`` and the judge."""
    options: dict[str, Any] = expand_env(entry.options, path, where)
    if plan.kind == "instance":
        given = sorted(options) + [k for k in (_FIELD_PARAMETER, JUDGE_PARAMETER) if getattr(entry, k) is not None]
        if given or entry.args:
            key = given[0] if given else "args"
            raise RunConfigError(path, f"{where}.{key}", "an imported evaluator instance takes no options")
        return {}
    names, takes_any = _parameters(plan.factory)
    for key in (_FIELD_PARAMETER, JUDGE_PARAMETER):
        if getattr(entry, key) is not None and key not in names:
            raise RunConfigError(path, f"{where}.{key}", f"evaluator {plan.label} does not take {key}")
    # Suggestions may be a parameter or an entry key (`timout_s` -> timeout_s); field/judge only where taken.
    known = names | (set(RESERVED_EVALUATOR_KEYS) - {_FIELD_PARAMETER, JUDGE_PARAMETER})
    for key in options:
        if not takes_any and key not in names:
            problem = unknown_key_problem(str(key), known, f"option of {plan.label}")
            raise RunConfigError(path, f"{where}.{key}", problem)
    if entry.field is not None:
        options[_FIELD_PARAMETER] = entry.field
    # `embedder: local` (or `openai`, or `{type: local, path: ...}`) names an embedder; built here like the judge.
    if _EMBEDDER_PARAMETER in options and isinstance(options[_EMBEDDER_PARAMETER], str | dict):
        try:
            options[_EMBEDDER_PARAMETER] = embedder_from_config(options[_EMBEDDER_PARAMETER])
        except ValueError as exc:
            raise RunConfigError(path, f"{where}.{_EMBEDDER_PARAMETER}", str(exc)) from None
    if entry.judge is not None:
        options[JUDGE_PARAMETER] = judges.overridden(entry.judge, f"{where}.judge")
    elif JUDGE_PARAMETER in names and judges.config is not None:
        options[JUDGE_PARAMETER] = judges.shared()
    return options


def _checked_arguments(
    plan: _Plan, entry: EvaluatorEntry, args: list[Any], options: dict[str, Any], where: str
) -> list[tuple[str, str, Any, Any, Any]]:
    """Each authored argument: (where in the file, parameter it goes to, container, key in it, value as written).

    The judge is left out: it is built here, not authored.
    """
    try:
        parameters = list(inspect.signature(plan.factory).parameters.values())
    except (TypeError, ValueError):
        return []
    kinds = inspect.Parameter
    positional = [p for p in parameters if p.kind in (kinds.POSITIONAL_ONLY, kinds.POSITIONAL_OR_KEYWORD)]
    rest = next((p for p in parameters if p.kind is kinds.VAR_POSITIONAL), None)
    extra = next((p for p in parameters if p.kind is kinds.VAR_KEYWORD), None)
    named = {p.name: p for p in parameters if p.kind in (kinds.POSITIONAL_OR_KEYWORD, kinds.KEYWORD_ONLY)}
    checks: list[tuple[str, str, Any, Any, Any]] = []
    for index in range(len(args)):
        parameter = positional[index] if index < len(positional) else rest
        if parameter is None:
            break  # too many: the constructor says so
        checks.append((f"{where}.args[{index}]", parameter.name, args, index, entry.args[index]))
    authored = {**entry.options, _FIELD_PARAMETER: entry.field}
    for key in options:
        parameter = named.get(key, extra)
        if key != JUDGE_PARAMETER and parameter is not None:
            checks.append((f"{where}.{key}", parameter.name, options, key, authored.get(key)))
    return checks


def _check_values(
    plan: _Plan, entry: EvaluatorEntry, args: list[Any], options: dict[str, Any], path: Path, where: str
) -> None:
    """Check each authored argument against the annotation of the parameter it goes to (nested items included).

    Parameters without a usable annotation are not checked. A whole ``${VAR}`` value is text once expanded: it is
    read as the annotated type (``"500"`` as a float) and replaced in ``args`` / ``options`` by what it reads as.

    Raises:
        RunConfigError: A value its parameter's annotation does not accept, named by its path in the file.
    """
    if plan.kind == "instance":
        return
    hints = parameter_hints(plan.factory)
    for location, name, container, key, written in _checked_arguments(plan, entry, args, options, where):
        if name not in hints:
            continue
        mismatch = first_mismatch(hints[name], container[key])
        if mismatch is None:
            continue
        if isinstance(written, str) and _ENV_REFERENCE.fullmatch(written.strip()):
            read, coerced = coerce_text(hints[name], container[key])
            if read:
                container[key] = coerced
                continue
        problem = f"expected {mismatch.expected}, got {shown_value(mismatch.value)}"
        if mismatch.path:
            problem += f" (in {name} of {plan.label}, which takes {describe_type(hints[name])})"
        else:
            problem += f" ({name} of {plan.label})"
        raise RunConfigError(path, format_path(location, mismatch.path), problem)


def _build_one(
    raw: dict[str, Any], path: Path, index: int, dirs: Sequence[Path], judges: _Judges
) -> ConfiguredEvaluator:
    where = f"evaluators[{index}]"
    entry = EvaluatorEntry.model_validate(raw)  # checked by load_evaluator_entries already
    plan = _plan(entry, path, where, dirs)
    options = _options(entry, plan, judges, path, where)
    args = expand_env(entry.args, path, f"{where}.args")
    _check_values(plan, entry, args, options, path, where)
    try:
        if plan.kind == "instance":
            built = plan.target
        elif plan.kind == "function":
            if args:
                raise ValueError("an evaluator function takes no args")
            built = evaluator(**options)(plan.target)
        else:
            built = plan.target(*args, **options)
    except (KeyError, TypeError, ValueError, ImportError) as exc:
        message = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)
        raise RunConfigError(path, where, f"cannot build the evaluator: {message}") from None
    if not callable(getattr(built, "evaluate", None)):
        raise RunConfigError(path, where, f"{type(built).__name__} has no evaluate(trace, case) method")
    if entry.result_name is not None:
        try:
            built.name = entry.result_name
        except AttributeError:
            key = "as" if entry.as_ is not None else "name"
            raise RunConfigError(path, f"{where}.{key}", f"{type(built).__name__} does not allow renaming") from None
    scope = _scope(built, entry.scope, path, where)
    return ConfiguredEvaluator(built, entry.timeout_s, plan.catalogue_type, scope, entry.max_dataset_rows)


def _scope(built: Any, written: Scope | None, path: Path, where: str) -> Scope:
    """The entry's ``scope``, checked against what the evaluator judges (its ``subjects``); default from them."""
    subjects = frozenset(getattr(built, "subjects", ("trace",)))
    if written is None:
        return "session" if subjects == {"conversation"} else "trace"
    needed = "conversation" if written == "session" else "trace"
    if needed not in subjects:
        name = getattr(built, "name", type(built).__name__)
        takes = "a conversation only" if "conversation" in subjects else "one trace only"
        raise RunConfigError(
            path, f"{where}.scope", f"evaluator {name!r} judges {takes}; it cannot take scope {written}"
        )
    return written


def build_evaluators(
    entries: Sequence[dict[str, Any]],
    path: Path,
    *,
    base_dir: Path | None = None,
    judge: JudgeConfig | None = None,
    pythonpath: Sequence[str] = (),
) -> list[ConfiguredEvaluator]:
    """Build every evaluator of a config.

    Args:
        entries: The ``evaluators`` entries, as written.
        path: The config file (named in error messages).
        base_dir: The eval.yaml's directory (default: the config file's): ``import:`` modules are found there, in
            its project root and in ``pythonpath`` (see :func:`~evaltrace.runner.import_paths.import_dirs`).
        judge: The config's ``judge:`` block: evaluators whose constructor takes ``judge`` get it.
        pythonpath: The config's ``pythonpath:`` entries, relative to ``base_dir``.

    Returns:
        The evaluators, in entry order.

    Raises:
        RunConfigError: An entry cannot be built, takes an unknown option, or two evaluators share a name; a
            ``pythonpath`` entry does not exist.
    """
    load_evaluator_entries(path, list(entries))
    dirs = import_dirs(path, base_dir if base_dir is not None else path.parent, pythonpath)
    judges = _Judges(judge, path)
    built: list[ConfiguredEvaluator] = []
    for index, entry in enumerate(entries):
        item = _build_one(entry, path, index, dirs, judges)
        if any(b.name == item.name for b in built):
            problem = f"duplicate evaluator name {item.name!r}; give each a distinct 'name' (with 'type')"
            raise RunConfigError(path, f"evaluators[{index}]", problem)
        built.append(item)
    return built
