"""The engine's stream proxies, where the OpenAI instrumentation's callers have always imported them."""

from evaltrace._internal.engine.stream import AsyncStreamProxy as AsyncStreamProxy
from evaltrace._internal.engine.stream import StreamProxyBase as StreamProxyBase
from evaltrace._internal.engine.stream import StreamState as StreamState
from evaltrace._internal.engine.stream import SyncStreamProxy as SyncStreamProxy
