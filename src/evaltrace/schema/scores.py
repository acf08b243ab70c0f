"""Scores as backends store them, and the configs that constrain them (data-model.md part C)."""

from __future__ import annotations

import math
import uuid
from typing import Any, Literal

from pydantic import ConfigDict, Field, ValidationError, model_validator

from evaltrace.exceptions import ScoreValidationError
from evaltrace.schema._base import SchemaModel, UtcDatetime, utcnow

ScoreDataType = Literal["NUMERIC", "CATEGORICAL", "BOOLEAN"]
ScoreSource = Literal["API", "EVAL", "ANNOTATION"]

_SCORE_ID_NAMESPACE = uuid.UUID("6f1c2f4e-0b7a-5d3e-9a51-3c0e2b7d4e10")

RANGE_TOLERANCE = 1e-9
"""How far outside a config's range a NUMERIC value may be and still count as on its bound (then clamped).

Relative to the bound's magnitude, and absolute below 1: ``1e-9 * max(1, |bound|)``. Float rounding puts a value
a few ulps past its bound (sacrebleu's BLEU of identical texts is ``1.0000000000000004``, two ulps and
4.4e-16 past: far inside this tolerance); a value further out is taken as a real violation and rejected.
"""


def score_id(trace_id: str, span_id: str | None, evaluator_name: str, evaluator_version: str | None = None) -> str:
    """Return the deterministic score id of one evaluator's judgement of one span (or trace).

    The id is the idempotency key backends upsert on, so re-sending a score (a retry, a replay from the
    dead-letter file) updates it instead of duplicating it.

    Args:
        trace_id: 32-hex OTel trace id.
        span_id: 16-hex span id of the evaluated span, or None for a trace-level score.
        evaluator_name: Name of the evaluator.
        evaluator_version: Its version, if any.

    Returns:
        A UUID5 string.
    """
    key = "\x1f".join((trace_id, span_id or "", evaluator_name, evaluator_version or ""))
    return str(uuid.uuid5(_SCORE_ID_NAMESPACE, key))


def session_score_id(session_id: str, evaluator_name: str, evaluator_version: str | None = None) -> str:
    """Return the deterministic score id of one evaluator's judgement of one session.

    The same for every revision of the session's judgement, so a re-judgement upserts the earlier score.
    """
    key = "\x1f".join(("session", session_id, evaluator_name, evaluator_version or ""))
    return str(uuid.uuid5(_SCORE_ID_NAMESPACE, key))


def dataset_run_score_id(dataset_run_id: str, evaluator_name: str, evaluator_version: str | None = None) -> str:
    """Return the deterministic score id of one evaluator's figure for one dataset run (an offline run's variant).

    Summarising or pushing the run again upserts the same score instead of adding one.
    """
    key = "\x1f".join(("dataset_run", dataset_run_id, evaluator_name, evaluator_version or ""))
    return str(uuid.uuid5(_SCORE_ID_NAMESPACE, key))


class ScoreCategory(SchemaModel):
    """One allowed value of a categorical score config (immutable, as its config is)."""

    model_config = ConfigDict(frozen=True)

    label: str
    value: float


class Score(SchemaModel):
    """A score as score backends store it (Langfuse-compatible).

    Rules enforced on validation:

    * exactly one target: ``trace_id``, ``observation_id`` (with its ``trace_id``), ``session_id`` or
      ``dataset_run_id``;
    * NUMERIC has a ``value``; BOOLEAN has ``value`` 0 or 1 and ``string_value`` ``"True"``/``"False"``
      (either one is derived from the other); CATEGORICAL has a ``string_value`` or a ``value``.

    Use :meth:`ScoreConfig.validate_score` (or :meth:`Score.with_config`) to check a score against its config.
    """

    id: str = Field(default_factory=lambda: str(uuid.uuid4()))
    """Idempotency key: a score with the same id updates the stored one."""
    name: str
    value: float | None = None
    string_value: str | None = None
    data_type: ScoreDataType = "NUMERIC"
    trace_id: str | None = None
    observation_id: str | None = None
    session_id: str | None = None
    dataset_run_id: str | None = None
    comment: str | None = None
    source: ScoreSource = "API"
    config_id: str | None = None
    timestamp: UtcDatetime = Field(default_factory=utcnow)
    metadata: dict[str, Any] | None = None

    @property
    def target(self) -> Literal["trace", "observation", "session", "dataset_run"]:
        """Which kind of object the score is attached to."""
        if self.observation_id is not None:
            return "observation"
        if self.trace_id is not None:
            return "trace"
        return "session" if self.session_id is not None else "dataset_run"

    @model_validator(mode="after")
    def _check(self) -> Score:
        _check_target(self)
        _normalise_value(self)
        return self

    @classmethod
    def with_config(cls, config: ScoreConfig, **fields: Any) -> Score:
        """Build a score that must satisfy ``config``; its data type is taken from the config.

        Args:
            config: The score config.
            **fields: Score fields (``name`` defaults to the config's name).

        Returns:
            The validated score, with ``config_id`` and ``data_type`` from the config.

        Raises:
            ScoreValidationError: The fields do not make a valid score for this config.
        """
        fields.setdefault("name", config.name)
        fields["data_type"] = config.data_type
        fields["config_id"] = config.id
        try:
            score = cls(**fields)
        except ValidationError as exc:
            raise ScoreValidationError(f"invalid score {fields.get('name')!r}: {exc}") from exc
        return config.validate_score(score)


def _check_target(score: Score) -> None:
    if score.observation_id is not None and score.trace_id is None:
        raise ValueError("a score on an observation needs the observation's trace_id")
    targets = [
        name
        for name, set_ in (
            ("trace_id/observation_id", score.trace_id is not None),
            ("session_id", score.session_id is not None),
            ("dataset_run_id", score.dataset_run_id is not None),
        )
        if set_
    ]
    if len(targets) != 1:
        found = ", ".join(targets) or "none"
        raise ValueError(
            "a score needs exactly one target (trace_id, observation_id with trace_id, session_id or "
            f"dataset_run_id); got {found}"
        )


def _normalise_value(score: Score) -> None:
    if score.value is not None and not math.isfinite(score.value):
        raise ValueError(f"score value must be finite, got {score.value}")
    if score.data_type == "NUMERIC":
        if score.value is None:
            raise ValueError("a NUMERIC score needs a value")
    elif score.data_type == "BOOLEAN":
        if score.value is None and score.string_value in ("True", "False"):
            score.value = 1.0 if score.string_value == "True" else 0.0
        if score.value not in (0.0, 1.0):
            raise ValueError(f"a BOOLEAN score needs value 0 or 1, got {score.value}")
        score.string_value = "True" if score.value == 1.0 else "False"
    elif score.value is None and score.string_value is None:
        raise ValueError("a CATEGORICAL score needs a string_value or a value")


class ScoreConfig(SchemaModel):
    """Constraints for scores of one name: data type, numeric range or allowed categories.

    A config is immutable once created: assigning a field raises, and its categories are a tuple. Scores keep
    its ``id``, so changing a range or a category under them would silently re-type scores already stored; make
    a new config instead. The one change allowed is archiving: :meth:`archive` and :meth:`restore` return the
    same config (same id) archived or restored. An archived config refuses new scores.
    """

    model_config = ConfigDict(frozen=True)

    id: str = Field(default_factory=lambda: str(uuid.uuid4()))
    name: str
    data_type: ScoreDataType
    is_archived: bool = False
    min_value: float | None = None
    """Inclusive lower bound; None means -infinity."""
    max_value: float | None = None
    """Inclusive upper bound; None means +infinity."""
    categories: tuple[ScoreCategory, ...] | None = None
    description: str | None = None

    def archive(self) -> ScoreConfig:
        """Return this config archived (same id): it then refuses new scores; stored ones keep referring to it."""
        return self.model_copy(update={"is_archived": True})

    def restore(self) -> ScoreConfig:
        """Return this config restored from the archive (same id): it accepts scores again."""
        return self.model_copy(update={"is_archived": False})

    @model_validator(mode="after")
    def _check(self) -> ScoreConfig:
        if self.min_value is not None and self.max_value is not None and self.min_value > self.max_value:
            raise ValueError(f"min_value {self.min_value} is greater than max_value {self.max_value}")
        if self.data_type == "CATEGORICAL" and not self.categories:
            raise ValueError("a CATEGORICAL score config needs at least one category")
        return self

    def label_for(self, value: float | None) -> str | None:
        """Return the label of the category whose value is ``value`` (None if there is none)."""
        for category in self.categories or ():
            if value is not None and category.value == value:
                return category.label
        return None

    def validate_score(self, score: Score) -> Score:
        """Check ``score`` against this config and return it typed by the config.

        The returned copy has this config's ``data_type`` and ``id`` (as ``config_id``); a categorical
        score's ``string_value`` (or ``value``) is derived from the matching category; a NUMERIC value outside
        the range by float rounding only (within :data:`RANGE_TOLERANCE`) is clamped onto the bound.

        Args:
            score: The score to check.

        Returns:
            A validated copy of the score.

        Raises:
            ScoreValidationError: The config is archived, or the score violates its type, range or categories;
                the message names the score, the config and the problem.
        """
        where = f"score {score.name!r} (config {self.name!r}, id {self.id})"
        if self.is_archived:
            raise ScoreValidationError(f"{where}: the config is archived; restore it or use another config")
        data = score.model_dump()
        data.update(data_type=self.data_type, config_id=self.id)
        if self.data_type == "NUMERIC":
            data.update(string_value=None, value=self._in_range(where, score.value))
        elif self.data_type == "BOOLEAN":
            if score.value not in (0.0, 1.0) and score.string_value not in ("True", "False"):
                raise ScoreValidationError(f"{where}: a BOOLEAN score needs 0/1 or 'True'/'False', got {score.value}")
        else:
            data.update(self._category(where, score))
        try:
            return Score.model_validate(data)
        except ValidationError as exc:
            raise ScoreValidationError(f"{where}: {exc}") from exc

    def _in_range(self, where: str, value: float | None) -> float:
        """Return ``value``, clamped onto a bound it misses by float rounding only (:data:`RANGE_TOLERANCE`).

        Raises:
            ScoreValidationError: No value, or a value clearly outside ``[min_value, max_value]``.
        """
        if value is None:
            raise ScoreValidationError(f"{where}: a NUMERIC score needs a value")
        low = -math.inf if self.min_value is None else self.min_value
        high = math.inf if self.max_value is None else self.max_value
        if low <= value <= high:
            return value
        if value < low and low - value <= RANGE_TOLERANCE * max(1.0, abs(low)):
            return low
        if value > high and value - high <= RANGE_TOLERANCE * max(1.0, abs(high)):
            return high
        raise ScoreValidationError(f"{where}: value {value} is outside the allowed range [{low}, {high}]")

    def _category(self, where: str, score: Score) -> dict[str, Any]:
        for category in self.categories or ():
            if score.string_value == category.label or (score.string_value is None and score.value == category.value):
                return {"string_value": category.label, "value": category.value}
        allowed = ", ".join(f"{c.label}={c.value}" for c in self.categories or ())
        given = score.string_value if score.string_value is not None else score.value
        raise ScoreValidationError(f"{where}: {given!r} is not one of the categories ({allowed})")
