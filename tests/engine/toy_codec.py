"""The codec and instrumentor of ``toy_sdk``: what a provider writes on top of the engine, and no more."""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from evaltrace._internal import list_values
from evaltrace._internal import semconv as sc
from evaltrace._internal.engine.call import Call
from evaltrace._internal.engine.codec import Codec, Endpoint
from evaltrace._internal.engine.instrumentor import EngineInstrumentor
from evaltrace._internal.engine.outcome import Outcome, Summary, Usage
from evaltrace._internal.engine.stainless import host_port
from evaltrace._internal.jsonutil import capped_json
from evaltrace._internal.openai.parts import output_message, text_part

ENDPOINTS = (
    Endpoint("toy_sdk", None, "complete", "complete", False),
    Endpoint("toy_sdk", "Client", "chat", "chat", False),
    Endpoint("toy_sdk", "Client", "achat", "chat", True),
    Endpoint("toy_sdk", "Client", "api_call", "api", False),
    Endpoint("toy_sdk", "Client", "dual", "dual", False),
)


def _usage(usage: dict[str, int] | None) -> Usage | None:
    return Usage(usage["in"], usage["out"]) if usage else None


class ToyAccumulator:
    """Chunks -> Outcome: O(1) per chunk (appends), joined at the end."""

    def __init__(self) -> None:
        self.response_id: str | None = None
        self.model: str | None = None
        self.text: list[str] = []
        self.stop: str | None = None
        self.usage: dict[str, int] | None = None

    def add(self, chunk: dict[str, Any]) -> bool:
        self.response_id = chunk.get("id", self.response_id)
        self.model = chunk.get("model", self.model)
        self.stop = chunk.get("stop", self.stop)
        self.usage = chunk.get("usage", self.usage)
        delta = chunk.get("delta")
        if delta:
            self.text.append(delta)
        return bool(delta)

    def end_reason(self) -> str:
        return sc.STREAM_END_EXHAUSTED if self.stop else sc.STREAM_END_TRUNCATED

    def outcome(self) -> Outcome:
        message = output_message([text_part("".join(self.text))], self.stop)
        reasons = [self.stop] if self.stop else []
        return Outcome(self.response_id, self.model, reasons, [message], _usage(self.usage))

    def summary(self) -> Summary:
        return Summary.of(self.outcome())

    def failure(self) -> tuple[str, str] | None:
        return None


class ToyCodec(Codec):
    provider = "toy"
    label = "Toy"

    def server_of(self, instance: Any) -> tuple[str | None, int | None]:
        return (instance.host, instance.port) if instance is not None else (None, None)

    def route(self, endpoint: Endpoint, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if endpoint.kind == "api":  # botocore-like: the operation is an argument; other operations untraced
            operation, params = args
            if operation not in ("Converse", "ConverseStream"):
                return None
            return ("stream" if operation == "ConverseStream" else "chat"), {"model": params["modelId"], **params}
        if endpoint.kind == "complete":  # positional arguments named; the server from the call's own argument
            params = {**dict(zip(("model", "prompt", "stream", "finish"), args, strict=False)), **kwargs}
            if params.get("api_base"):
                return "chat", params, host_port(params["api_base"])
            return "chat", params
        return endpoint.kind, kwargs

    def operation(self, kind: Hashable) -> str:
        return sc.OP_CHAT

    def provider_of(self, kind: Hashable, model: str | None, host: str | None) -> str:
        # LiteLLM's way: "groq/llama-3" is a call to groq.
        return model.split("/", 1)[0] if model and "/" in model else self.provider

    def request_attributes(self, kind: Hashable, params: dict[str, Any], capture: bool, max_len: int) -> dict[str, Any]:
        attrs: dict[str, Any] = {}
        if "temperature" in params:
            attrs[sc.GEN_AI_REQUEST_TEMPERATURE] = params["temperature"]
        if capture:
            messages = [{"role": "user", "parts": [text_part(params["prompt"])]}]
            text = attrs[sc.GEN_AI_INPUT_MESSAGES] = capped_json(messages, max_len)
            attrs.update(list_values.input_attributes(messages, text, None, None, max_len))
        return attrs

    def outcome(self, kind: Hashable, result: Any, capture: bool) -> Outcome:
        messages = [output_message([text_part(result["text"])], result["stop"])] if capture else None
        return Outcome(result["id"], result["model"], [result["stop"]], messages, _usage(result["usage"]))

    def is_stream(self, kind: Hashable, result: Any) -> bool:
        return not isinstance(result, dict)

    def accumulator(self, kind: Hashable) -> ToyAccumulator:
        return ToyAccumulator()

    def status_code(self, error: BaseException) -> int | None:
        return getattr(error, "response", {}).get("ResponseMetadata", {}).get("HTTPStatusCode")

    def finish_special(self, call: Call, kind: Hashable, result: Any) -> Any:
        if kind == "dual":  # both sync and async: the endpoint says which
            return call.stream(result, ToyAccumulator(), is_async=False)
        if kind == "stream":  # the stream is inside the response dict (Bedrock's converse_stream)
            result["stream"] = call.stream(result["stream"], ToyAccumulator())
            return result
        return super().finish_special(call, kind, result)


CODEC = ToyCodec()


class ToyInstrumentor(EngineInstrumentor):
    instruments = ()
    endpoints = ENDPOINTS
    codec = "toy_codec:CODEC"
