"""``benchmarks/bench_providers.py``: the recorded streams its fold rows replay, and a provider whose SDK is absent.

The callgrind runs are the benchmark's own; here what decides what they measure: the events each stream is built
from, and that a provider whose SDK is not installed is skipped with its name (CI's oldest-versions environment
has none of the optional SDKs) rather than failing the run.
"""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))
import bench_providers  # noqa: E402


def _model_events(events: list[bytes]) -> list[dict[str, object]]:
    return [json.loads(base64.b64decode(json.loads(e[e.index(b'{"bytes"') : -4])["bytes"])) for e in events]


def test_the_bedrock_invoke_stream_opens_its_block_once_and_repeats_its_deltas() -> None:
    provider = bench_providers.PROVIDERS["bedrock_invoke"]
    item = bench_providers.recorded(provider, "fold110")
    events = _model_events(bench_providers.stream_events(item, 110))
    kinds = [e["type"] for e in events]
    assert kinds[:2] == ["message_start", "content_block_start"]
    assert kinds[2:112] == ["content_block_delta"] * 110
    assert all(e["index"] == 0 for e in events[2:112])
    assert kinds[112] == "content_block_stop"
    assert kinds[-2:] == ["message_delta", "message_stop"]  # the recorded close, tool blocks and usage included


@pytest.mark.parametrize("name", [n for n in bench_providers.PROVIDERS if n != "bedrock_invoke"])
def test_every_other_stream_keeps_its_first_event_then_its_content(name: str) -> None:
    if bench_providers.sdk_missing(name):  # Cohere's stream is built by cohere_replay, which imports cohere
        pytest.skip(f"{bench_providers.PROVIDERS[name].sdk} is not installed")
    provider = bench_providers.PROVIDERS[name]
    item = bench_providers.recorded(provider, "fold110")
    events = bench_providers.stream_events(item, 10)
    assert not bench_providers._is_closing(events[1])
    assert sum(bench_providers._is_closing(e) for e in events[1:11]) == 0
    assert bench_providers._is_closing(events[11])


def test_a_provider_whose_sdk_is_absent_is_skipped_by_name(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "groq", None)  # what import and find_spec see of a package not installed
    monkeypatch.delitem(sys.modules, "google.genai", raising=False)  # imported by an earlier test, maybe
    monkeypatch.setitem(sys.modules, "google", None)  # the parent of google.genai missing
    assert bench_providers.sdk_missing("groq") == "groq"
    assert bench_providers.sdk_missing("google_genai") == "google.genai"
    assert bench_providers.sdk_missing("openai") is None
    bench_providers.run_fold(["groq", "google_genai"], 1, 110)  # nothing left to run: no callgrind child
    bench_providers.run(["groq"], 1, 1, 5, 45, {"call", "chunk"})
    out = capsys.readouterr().out
    assert "groq          fold      (skipped: groq is not installed)" in out
    assert "google_genai  fold      (skipped: google.genai is not installed)" in out
    assert "groq          (skipped: groq is not installed)" in out
