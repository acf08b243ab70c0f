"""Outcomes of the real judgements, printed at the end of the run (conftest's terminal summary)."""

from __future__ import annotations

OUTCOMES: list[str] = []
