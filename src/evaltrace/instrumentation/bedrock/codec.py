"""``BedrockCodec``: the engine's view of ``bedrock-runtime`` (one wrapped method, four traced operations).

boto3 creates client classes at run time, but every one inherits ``botocore.client.BaseClient._make_api_call``,
which each API method calls as ``_make_api_call(operation_name, api_params)``. The engine wraps that one method
(so clients made before and after ``instrument()`` are traced, and ``uninstrument()`` restores it); ``route`` lets
through, untraced, every call that is not one of the four operations of a ``bedrock-runtime`` client (S3, STS,
``apply_guardrail``, ``count_tokens``...).

Results are boto3's dicts: a ``converse`` response is a plain response; the two streaming operations hold their
``EventStream`` under ``stream`` / ``body``, which is replaced by the engine's stream proxy (the dict is the
user's, the same object); ``invoke_model``'s ``StreamingBody`` is read and replaced by an unread copy
(``response_body.rebuffer``).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from functools import partial
from typing import TYPE_CHECKING, Any

from evaltrace._internal import semconv as sc
from evaltrace._internal.engine.codec import PLAIN, Codec, Endpoint
from evaltrace._internal.engine.outcome import Outcome, Summary
from evaltrace.instrumentation.bedrock import api
from evaltrace.instrumentation.bedrock.converse_stream import ConverseStreamAccumulator
from evaltrace.instrumentation.bedrock.invoke_stream import InvokeStreamAccumulator
from evaltrace.instrumentation.bedrock.response_body import rebuffer

if TYPE_CHECKING:
    from evaltrace._internal.engine.call import Call

# An embedding model's invoke_model: the same operation, an ``embeddings`` span.
INVOKE_EMBEDDINGS = "InvokeModel:embeddings"


class BedrockCodec(Codec):
    """``converse``, ``converse_stream``, ``invoke_model`` and ``invoke_model_with_response_stream``."""

    provider = api.PROVIDER
    label = "Bedrock"

    def operation(self, kind: Hashable) -> str:
        """``embeddings`` for an embedding model's ``invoke_model``, else ``chat``."""
        return sc.OP_EMBEDDINGS if kind == INVOKE_EMBEDDINGS else sc.OP_CHAT

    def server_of(self, instance: Any) -> tuple[str | None, int | None]:
        """The client's endpoint host and port."""
        return api.server_of(instance)

    def route(self, endpoint: Endpoint, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """(operation, params) of a traced ``bedrock-runtime`` call; None for every other botocore call."""
        operation = args[0] if args else kwargs.get("operation_name")
        if operation not in api.OPERATIONS:
            return None  # the cheap test first: this runs on every call of every AWS client
        service = getattr(getattr(instance, "_service_model", None), "service_name", None)
        if service != api.SERVICE:
            return None
        params = args[1] if len(args) > 1 else kwargs.get("api_params")
        if not isinstance(params, Mapping):
            return None
        model = api.model_of(params)
        kind = INVOKE_EMBEDDINGS if api.operation_of(operation, model) == sc.OP_EMBEDDINGS else operation
        return kind, {"model": model, "api_params": params}

    def request_attributes(self, kind: Hashable, params: dict[str, Any], capture: bool, max_len: int) -> Any:
        """The request's parameters and (with ``capture``) messages, system instructions and tools."""
        operation = api.INVOKE if kind == INVOKE_EMBEDDINGS else str(kind)
        return api.request_attributes(operation, params["api_params"], capture, max_len)

    def outcome(self, kind: Hashable, result: Any, capture: bool) -> Outcome:
        """A ``converse`` response (the one plain response: the others are handled in ``finish_special``)."""
        return api.converse_outcome(result, capture)

    def finish_special(self, call: Call, kind: Hashable, result: Any) -> Any:
        """Proxy a stream inside its result dict, or read and re-buffer ``invoke_model``'s body."""
        if not isinstance(result, dict):
            return PLAIN
        key = api.STREAM_KEYS.get(str(kind))
        if key is not None:
            stream = result.get(key)
            if stream is None:
                return PLAIN
            rid = api.response_id(result)
            if kind == api.CONVERSE_STREAM:
                acc: ConverseStreamAccumulator | InvokeStreamAccumulator = ConverseStreamAccumulator(rid)
            else:
                acc = InvokeStreamAccumulator(rid, _request_body(call))
            result[key] = call.stream(stream, acc)  # botocore's EventStream, read through iter()
            return result
        if kind == api.CONVERSE or "body" not in result:
            return PLAIN
        try:
            data = rebuffer(result)
        except Exception as error:  # the body's read failed: the user's read of the new body raises it again
            call.fail(error)
            return result
        rid, headers, operation = api.response_id(result), api.headers_of(result), self.operation(kind)
        outcome = partial(api.invoke_outcome, rid, headers, data, operation, _request_body(call))
        call.finish(partial(outcome, call.capture), partial(_summary, outcome))
        return result

    def error_type(self, error: BaseException) -> str:
        """Botocore's error code (``ClientError.response["Error"]["Code"]``), else the exception's class."""
        response = getattr(error, "response", None)
        details = response.get("Error") if isinstance(response, Mapping) else None
        code = details.get("Code") if isinstance(details, Mapping) else None
        if isinstance(code, str) and code:
            return code
        return super().error_type(error)

    def status_code(self, error: BaseException) -> int | None:
        """The HTTP status botocore keeps in ``ClientError.response["ResponseMetadata"]["HTTPStatusCode"]``."""
        response = getattr(error, "response", None)
        metadata = response.get("ResponseMetadata") if isinstance(response, Mapping) else None
        status = metadata.get("HTTPStatusCode") if isinstance(metadata, Mapping) else None
        return status if isinstance(status, int) and not isinstance(status, bool) else None


def _request_body(call: Call) -> Any:
    """The call's raw ``invoke_model`` request body; None once its params are read (or unread: a sampled-out span).

    Kept by reference, not parsed: the outcome parses it only for a text family's answer, when it mentions think.
    """
    params = call.params
    api_params = params.get("api_params") if params is not None else None
    return api_params.get("body") if isinstance(api_params, Mapping) else None


def _summary(outcome: Any) -> Summary:
    return Summary.of(outcome(False))


CODEC = BedrockCodec()
