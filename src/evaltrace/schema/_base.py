"""Shared building blocks of the schema: the versioned base model and UTC datetimes.

Forward compatibility (data-model.md, "within 1.x changes are additive only"): every model ignores fields it
does not know (``extra="ignore"``), so a file written by a newer 1.x release loads here and the unknown fields
are dropped. A persisted model's ``schema_version`` must have major version 1; a 2.x file is rejected with a
message that names the version, because its fields may mean something else. A loaded 1.x model is normalised to
``SCHEMA_VERSION``: after dropping the unknown fields it *is* a model of this version.
"""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, field_validator

from evaltrace.exceptions import SchemaError

SCHEMA_VERSION = "1.0"
"""The schema version this release writes."""

_SUPPORTED_MAJOR = "1"


def utcnow() -> dt.datetime:
    """Return the current time as an aware UTC datetime."""
    return dt.datetime.now(dt.UTC)


def _to_utc(value: dt.datetime) -> dt.datetime:
    # Naive datetimes are taken to be UTC (what OTel and our own stores write); aware ones are converted.
    if value.tzinfo is None or value.utcoffset() is None:
        return value.replace(tzinfo=dt.UTC)
    return value.astimezone(dt.UTC)


UtcDatetime = Annotated[dt.datetime, AfterValidator(_to_utc)]
"""A datetime that is always timezone-aware UTC after validation (naive input is taken as UTC)."""


def whole_ms(start: dt.datetime, end: dt.datetime) -> int:
    """Return ``end - start`` in whole milliseconds (rounded down)."""
    delta = end - start
    return (delta.days * 86_400_000_000 + delta.seconds * 1_000_000 + delta.microseconds) // 1000


class SchemaModel(BaseModel):
    """Base of every schema model: unknown fields are ignored so newer 1.x files load.

    NaN and infinite floats are rejected: JSON has no spelling for them, so they would not survive a round trip.
    """

    model_config = ConfigDict(extra="ignore", allow_inf_nan=False)


class VersionedModel(SchemaModel):
    """Base of persisted models: carries ``schema_version`` and rejects other major versions."""

    schema_version: str = SCHEMA_VERSION

    @field_validator("schema_version", mode="before")
    @classmethod
    def _check_schema_version(cls, value: Any) -> str:
        text = str(value)
        major = text.split(".", 1)[0]
        if major != _SUPPORTED_MAJOR:
            raise SchemaError(
                f"unsupported schema_version {text!r} for {cls.__name__}: this evaltrace reads 1.x files "
                f"(writes {SCHEMA_VERSION}); upgrade evaltrace to read this file"
            )
        return SCHEMA_VERSION
