"""``Codec.provider_of``: the provider named by the routed kind (span, metrics and pricing), else by the host."""

from __future__ import annotations

from collections.abc import Hashable

from evaltrace._internal.engine.call import Call
from evaltrace._internal.engine.codec import Codec


class _ByHost(Codec):
    provider = "by-host"

    def provider_for(self, host: str | None) -> str:
        return f"host:{host}"


class _ByKind(_ByHost):
    def provider_of(self, kind: Hashable, host: str | None) -> str:
        return "kind:vertex" if kind == "vertex" else self.provider_for(host)


def test_default_provider_comes_from_the_host() -> None:
    shape = Call.for_codec(_ByHost())._shape_of("chat", "m", ("example.com", 443))
    assert shape.provider == "host:example.com"
    assert shape.metric_attrs.base["gen_ai.provider.name"] == "host:example.com"


def test_a_codec_may_name_the_provider_from_the_routed_kind() -> None:
    call = Call.for_codec(_ByKind())
    vertex = call._shape_of("vertex", "m", ("127.0.0.1", 8080))
    plain = call._shape_of("chat", "m", ("127.0.0.1", 8080))
    assert (vertex.provider, plain.provider) == ("kind:vertex", "host:127.0.0.1")
    assert vertex.metric_attrs.base["gen_ai.provider.name"] == "kind:vertex"  # metrics and pricing agree
    assert vertex.start_attrs.values["gen_ai.provider.name"] == "kind:vertex"  # the span, at creation
