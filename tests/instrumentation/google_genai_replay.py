"""Replay the Google Gen AI recordings (tests/fixtures/google-genai-cassettes) to the real google-genai client.

The client talks HTTP to ``cassettes.ReplayServer`` on 127.0.0.1 through its own ``base_url`` option; nothing in
the SDK is patched. Vertex AI recordings are replayed by a Vertex client (``vertexai=True``) given a static OAuth
token (``google.oauth2.credentials.Credentials``: the SDK sends it as a bearer header and never refreshes it).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from google import genai
from google.genai import types
from google.oauth2.credentials import Credentials

from cassettes import FIXTURES, ReplayServer, load_cassette

GENAI = FIXTURES / "google-genai-cassettes"
OI = GENAI / "openinference" / "test_instrumentation"
OTEL = GENAI / "otel-contrib"
LOGFIRE = GENAI / "logfire"

# The SDK's async client subclasses aiohttp's ClientSession (when aiohttp is installed, as here), which aiohttp
# warns about; the warning is the SDK's, not ours, and the suite turns warnings into errors.
AIOHTTP_WARNING = pytest.mark.filterwarnings("ignore:Inheritance class AiohttpClientSession:DeprecationWarning")


def client_for(server: ReplayServer, vertex: bool = False) -> genai.Client:
    """A real client of the Developer API (or of Vertex AI) whose every request goes to ``server``."""
    options = types.HttpOptions(base_url=server.url)
    if vertex:
        return genai.Client(
            vertexai=True,
            project="test-project",
            location="test-location",
            credentials=Credentials(token="test-token"),  # type: ignore[no-untyped-call]
            http_options=options,
        )
    return genai.Client(api_key="test-key", http_options=options)


@contextmanager
def replay(path: Path, vertex: bool = False) -> Iterator[tuple[genai.Client, ReplayServer]]:
    """A client and the server answering it with the recordings of ``path``, in order."""
    with ReplayServer(load_cassette(path)) as server:
        yield client_for(server, vertex), server


def otel_file(kind: str, content: str, mode: str) -> Path:
    """An otel-contrib Vertex recording: ``kind`` non_streaming / streaming, ``content`` logcontent / excludecontent."""
    return OTEL / f"test_{kind}[{content}-gemini-2.5-flash-vertexaiapi-{mode}-default].yaml"
