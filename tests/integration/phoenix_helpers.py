"""Helpers for the Phoenix integration tests: a thin REST client and bounded polling."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx

PHOENIX_URL = os.environ.get("EVALTRACE_PHOENIX_URL", "http://127.0.0.1:6006").rstrip("/")
PHOENIX_GRPC = os.environ.get("EVALTRACE_PHOENIX_GRPC", "http://127.0.0.1:4317")


@dataclass(frozen=True)
class Phoenix:
    url: str
    grpc: str

    def get(self, path: str, **params: Any) -> Any:
        response = httpx.get(self.url + path, params=params, timeout=10)
        response.raise_for_status()
        return response.json()

    def spans(self, project: str) -> list[dict[str, Any]]:
        response = httpx.get(f"{self.url}/v1/projects/{project}/spans", params={"limit": 100}, timeout=10)
        if response.status_code == 404:  # the project appears with its first ingested span
            return []
        response.raise_for_status()
        return list(response.json()["data"])

    def span_annotations(self, project: str, span_id: str) -> list[dict[str, Any]]:
        return list(self.get(f"/v1/projects/{project}/span_annotations", span_ids=span_id)["data"])


def poll(check: Callable[[], Any], timeout: float = 60.0, interval: float = 0.2) -> Any:
    """Call ``check`` until it returns something truthy (Phoenix ingests asynchronously); fail at ``timeout``."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"Phoenix did not show the expected data within {timeout}s (last: {last!r})")
