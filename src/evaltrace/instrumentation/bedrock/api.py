"""Pure: one ``bedrock-runtime`` call (operation name, API params, boto3's result dict) -> span attributes.

boto3 calls every operation through ``BaseClient._make_api_call(operation_name, api_params)``; the four traced
ones are below. Everything here reads plain dicts (boto3's params and parsed responses) and bytes.

The response id is the AWS request id (``ResponseMetadata.RequestId``, the ``x-amzn-requestid`` header), for all
four operations: it is the one id every Bedrock response has, whatever the model, streamed or not, and the key
of Bedrock's model invocation logs and of AWS support. A model's own message id (Anthropic's ``msg_bdrk_...``
in an ``invoke_model`` body) is not used, as Converse responses have none. The response model is the one a
native body names (Anthropic's ``model``), or the model a prompt router chose (Converse's
``trace.promptRouter.invokedModelId``); without one, cost is priced on the request's model id (genai-prices knows
Bedrock ids, ``us.`` / ``eu.`` / ``global.`` inference profiles included).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from evaltrace._internal import list_values
from evaltrace._internal import semconv as sc
from evaltrace._internal.engine.outcome import Outcome, Usage
from evaltrace._internal.engine.values import host_port
from evaltrace._internal.jsonutil import capped_json
from evaltrace._internal.openai.parts import Message, Part
from evaltrace.instrumentation.bedrock import bodies, converse

Attributes = dict[str, Any]

PROVIDER = "aws.bedrock"
SERVICE = "bedrock-runtime"
CONVERSE = "Converse"
CONVERSE_STREAM = "ConverseStream"
INVOKE = "InvokeModel"
INVOKE_STREAM = "InvokeModelWithResponseStream"
OPERATIONS = frozenset({CONVERSE, CONVERSE_STREAM, INVOKE, INVOKE_STREAM})
STREAMING = frozenset({CONVERSE_STREAM, INVOKE_STREAM})
# Where each streaming operation's result dict holds its ``EventStream``.
STREAM_KEYS = {CONVERSE_STREAM: "stream", INVOKE_STREAM: "body"}


def model_of(params: Any) -> str | None:
    """The ``modelId`` of a call (a model id, an inference profile id, or an ARN)."""
    model = params.get("modelId") if isinstance(params, Mapping) else None
    return model if isinstance(model, str) and model else None


def operation_of(operation: str, model: str | None) -> str:
    """``gen_ai.operation.name``: ``embeddings`` for an embedding model's ``invoke_model``, else ``chat``."""
    if operation == INVOKE and model is not None and "embed" in model:
        return sc.OP_EMBEDDINGS
    return sc.OP_CHAT


def server_of(client: Any) -> tuple[str | None, int | None]:
    """(host, port) of the client's endpoint (``client.meta.endpoint_url``); the port defaults by scheme."""
    url = getattr(getattr(client, "meta", None), "endpoint_url", None)
    if not isinstance(url, str):
        return None, None
    return host_port(url)


# --- request ---------------------------------------------------------------------------------------------

_PARAMETER_NAMES = (
    (sc.GEN_AI_REQUEST_MAX_TOKENS, "max_tokens"),
    (sc.GEN_AI_REQUEST_TEMPERATURE, "temperature"),
    (sc.GEN_AI_REQUEST_TOP_P, "top_p"),
    (sc.GEN_AI_REQUEST_TOP_K, "top_k"),
    (sc.GEN_AI_REQUEST_STOP_SEQUENCES, "stop_sequences"),
)


def request_attributes(operation: str, params: Mapping[str, Any], capture: bool, max_len: int) -> Attributes:
    """Request parameters, and the request content when ``capture``, of one call."""
    messages: list[Message] = []
    system: list[Part] | None = None
    tools: list[dict[str, Any]] | None = None
    body: dict[str, Any] | None = None
    if operation in (CONVERSE, CONVERSE_STREAM):
        extra = params.get("additionalModelRequestFields")
        attrs = converse.inference_attributes(params.get("inferenceConfig"), extra)
        attrs.update(converse.output_attributes(params.get("outputConfig"), extra))
        if capture:
            messages = converse.input_messages(params.get("messages"))
            system = converse.system_instructions(params.get("system"))
            tools = converse.tool_definitions(params.get("toolConfig"))
    else:
        body = bodies.load(params.get("body"))
        family = bodies.request_family(body, model_of(params)) if body is not None else None
        attrs = bodies.request_parameters(family, body) if body is not None else {}
        if capture and body is not None:
            messages, system, tools = bodies.request_content(family, body)
    attrs.pop(sc.GEN_AI_REQUEST_STREAM, None)  # a native body's own flag: the operation says whether it streams
    if operation in STREAMING:
        attrs[sc.GEN_AI_REQUEST_STREAM] = True
    embeddings = operation_of(operation, model_of(params)) == sc.OP_EMBEDDINGS
    attrs[sc.LANGFUSE_OBSERVATION_TYPE] = sc.LANGFUSE_TYPE_EMBEDDING if embeddings else sc.LANGFUSE_TYPE_GENERATION
    if embeddings and body is not None:
        attrs.update(bodies.embedding_attributes(body))
    parameters = {key: attrs[name] for name, key in _PARAMETER_NAMES if name in attrs}
    if parameters:
        attrs[sc.LANGFUSE_OBSERVATION_MODEL_PARAMETERS] = capped_json(parameters, max_len)
    if capture and (messages or system):
        text = attrs[sc.GEN_AI_INPUT_MESSAGES] = capped_json(messages, max_len)
        system_json = capped_json(system, max_len) if system else None
        if system_json is not None:
            attrs[sc.GEN_AI_SYSTEM_INSTRUCTIONS] = system_json
        attrs.update(list_values.input_attributes(messages, text, system, system_json, max_len))
    if capture and tools:
        attrs[sc.GEN_AI_TOOL_DEFINITIONS] = capped_json(tools, max_len)
    return attrs


# --- response --------------------------------------------------------------------------------------------


def response_id(result: Any) -> str | None:
    """The AWS request id of a result dict (``ResponseMetadata.RequestId``, else the ``x-amzn-requestid`` header)."""
    metadata = result.get("ResponseMetadata") if isinstance(result, Mapping) else None
    if not isinstance(metadata, Mapping):
        return None
    rid = metadata.get("RequestId")
    if isinstance(rid, str) and rid:
        return rid
    headers = metadata.get("HTTPHeaders")
    rid = headers.get("x-amzn-requestid") if isinstance(headers, Mapping) else None
    return rid if isinstance(rid, str) and rid else None


def headers_of(result: Mapping[str, Any]) -> Mapping[str, Any]:
    """The response's HTTP headers (``ResponseMetadata.HTTPHeaders``, lower-case names), or an empty mapping."""
    metadata = result.get("ResponseMetadata")
    headers = metadata.get("HTTPHeaders") if isinstance(metadata, Mapping) else None
    return headers if isinstance(headers, Mapping) else {}


def converse_outcome(result: Mapping[str, Any], capture: bool) -> Outcome:
    """The Outcome of a ``converse`` result."""
    return converse.converse_outcome(result, response_id(result), capture)


def invoke_outcome(
    rid: str | None, headers: Mapping[str, Any], data: bytes, operation_name: str, request: Any, capture: bool
) -> Outcome:
    """The Outcome of an ``invoke_model`` call whose body read ``data``; the headers fill in missing counts.

    ``request`` is the call's raw request body (read only to tell whether its prompt opened a ``<think>`` block).
    """
    body = bodies.load(data)
    if operation_name == sc.OP_EMBEDDINGS or body is None:
        usage = bodies.header_usage(headers)
        if usage is None and body is not None and isinstance(body.get("inputTextTokenCount"), int):
            usage = Usage(body["inputTextTokenCount"], None)
        return Outcome(response_id=rid, usage=usage)
    outcome = bodies.body_outcome(body, rid, capture, request)
    if outcome.usage is None or outcome.usage.input_tokens is None:
        outcome.usage = bodies.header_usage(headers) or outcome.usage
    return outcome
