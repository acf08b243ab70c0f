"""The LangChain codec on the message and result shapes other chat model integrations produce.

No recording exists here for ChatGoogleGenerativeAI, ChatBedrockConverse or ChatOllama under LangChain (their
packages are not installed either; ChatAnthropic is replayed for real in ``test_langchain_anthropic.py``), so these
tests build the real ``langchain_core`` objects
those integrations return, with the fields their sources fill: Anthropic's content blocks (``thinking``,
``tool_use``) and ``stop_reason``, Gemini's ``finish_reason`` ``STOP``, Bedrock's ``stopReason``, Ollama's
``done_reason``, and ``usage_metadata`` with cache and reasoning details.
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.messages import AIMessage, ChatMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, Generation

from evaltrace.instrumentation.langchain import _codec


def _ai(**kwargs: Any) -> ChatGeneration:
    return ChatGeneration(message=AIMessage(**kwargs))


def test_anthropic_thinking_tool_use_stop_reason_and_cache_usage() -> None:
    generation = _ai(
        content=[
            {"type": "thinking", "thinking": "The user wants the weather.", "signature": "sig"},
            {"type": "text", "text": "Let me check."},
            {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}},
        ],
        tool_calls=[{"name": "get_weather", "args": {"city": "Paris"}, "id": "toolu_1"}],
        response_metadata={"id": "msg_01", "model": "claude-sonnet-4-5", "stop_reason": "tool_use"},
        usage_metadata={
            "input_tokens": 120,
            "output_tokens": 40,
            "total_tokens": 160,
            "input_token_details": {"cache_read": 100, "cache_creation": 10},
        },
    )
    outputs, reasons = _codec.output_messages([generation])
    assert reasons == ["tool_use"]  # verbatim on the span
    assert outputs == [
        {
            "role": "assistant",
            "parts": [
                {"type": "reasoning", "content": "The user wants the weather."},
                {"type": "text", "content": "Let me check."},
                {"type": "tool_call", "id": "toolu_1", "name": "get_weather", "arguments": {"city": "Paris"}},
            ],
            "finish_reason": "tool_call",
        }
    ]
    assert _codec.usage_attributes([generation], None) == {
        "gen_ai.usage.input_tokens": 120,
        "gen_ai.usage.output_tokens": 40,
        "gen_ai.usage.cache_read.input_tokens": 100,
        "gen_ai.usage.cache_creation.input_tokens": 10,
    }
    assert _codec.response_attributes([generation], None) == {
        "gen_ai.response.model": "claude-sonnet-4-5",
        "gen_ai.response.id": "msg_01",
    }


def test_gemini_bedrock_and_ollama_finish_reasons_are_kept_verbatim_and_mapped() -> None:
    gemini = ChatGeneration(
        message=AIMessage(
            content="Paris.",
            usage_metadata={
                "input_tokens": 5,
                "output_tokens": 30,
                "total_tokens": 35,
                "output_token_details": {"reasoning": 28},
            },
        ),
        generation_info={"finish_reason": "STOP", "model_name": "gemini-2.5-flash"},
    )
    bedrock = _ai(content="Paris.", response_metadata={"stopReason": "max_tokens"})
    ollama = _ai(content="Paris.", response_metadata={"done_reason": "stop", "model": "llama3.2"})
    for generation, reason, mapped in ((gemini, "STOP", "stop"), (bedrock, "max_tokens", "length"),
                                       (ollama, "stop", "stop")):  # fmt: skip
        outputs, reasons = _codec.output_messages([generation])
        assert reasons == [reason] and outputs[0]["finish_reason"] == mapped
    assert _codec.usage_attributes([gemini], None)["gen_ai.usage.reasoning.output_tokens"] == 28


def test_text_completion_generations_and_llm_output_usage() -> None:
    generation = Generation(text="<think>short</think>Done.", generation_info={"finish_reason": "length"})
    outputs, reasons = _codec.output_messages([generation])
    assert reasons == ["length"]
    assert outputs[0]["parts"] == [{"type": "reasoning", "content": "short"}, {"type": "text", "content": "Done."}]
    llm_output = {"token_usage": {"prompt_tokens": 7, "completion_tokens": 3}, "model_name": "gpt-3.5-turbo-instruct"}
    assert _codec.usage_attributes([generation], llm_output) == {
        "gen_ai.usage.input_tokens": 7,
        "gen_ai.usage.output_tokens": 3,
    }
    assert _codec.response_attributes([generation], llm_output) == {"gen_ai.response.model": "gpt-3.5-turbo-instruct"}


def test_input_messages_every_role_and_block() -> None:
    image = "data:image/png;base64," + "A" * 4000
    messages = _codec.messages(
        [
            SystemMessage("Be brief."),
            ChatMessage(role="developer", content="Answer in French."),
            HumanMessage(
                content=[{"type": "text", "text": "What is this?"}, {"type": "image_url", "image_url": {"url": image}}]
            ),
            AIMessage(
                content="",
                additional_kwargs={"reasoning_content": "DeepSeek-style reasoning"},
                invalid_tool_calls=[{"name": "lookup", "args": "{not json", "id": "c9", "error": "bad"}],
            ),
            ToolMessage(content=[{"type": "text", "text": "a cat"}], tool_call_id="c9"),
        ]
    )
    assert [m["role"] for m in messages] == ["system", "developer", "user", "assistant", "tool"]
    picture = messages[2]["parts"][1]
    assert picture["type"] == "uri" and picture["modality"] == "image" and "AAAA" not in str(picture)
    assert messages[3]["parts"] == [
        {"type": "reasoning", "content": "DeepSeek-style reasoning"},
        {"type": "tool_call", "id": "c9", "name": "lookup", "arguments": "{not json"},
    ]
    assert messages[4]["parts"] == [{"type": "tool_call_response", "id": "c9", "response": "a cat"}]


def test_request_attributes_from_ls_metadata_and_invocation_params() -> None:
    metadata = {"ls_provider": "google_genai", "ls_model_name": "gemini-2.5-flash", "ls_temperature": 0.2,
                "ls_max_tokens": 256, "ls_stop": "END"}  # fmt: skip
    params = {"top_p": 0.9, "top_k": 40, "n": 2, "reasoning_effort": "low", "stream": True}
    assert _codec.request_attributes(metadata, params) == {
        "gen_ai.request.model": "gemini-2.5-flash",
        "gen_ai.provider.name": "gcp.gen_ai",
        "gen_ai.request.temperature": 0.2,
        "gen_ai.request.max_tokens": 256,
        "gen_ai.request.top_p": 0.9,
        "gen_ai.request.top_k": 40,  # whole: an int, as the SDK instrumentations record it
        "gen_ai.request.stop_sequences": ["END"],
        "gen_ai.request.choice.count": 2,
        "gen_ai.request.stream": True,
        "gen_ai.request.reasoning.level": "low",
    }


@pytest.mark.filterwarnings("ignore:A non-leading `SystemMessage` was moved")
def test_anthropic_keeps_a_later_system_message_in_place_for_a_model_whose_profile_allows_it() -> None:
    """A model whose langchain-anthropic profile allows system messages mid-conversation (claude-opus-4-8) gets
    one after a user turn in place, as a message; after an assistant turn it is still moved into ``system``."""
    from langchain_anthropic import ChatAnthropic
    from langchain_anthropic.chat_models import _format_messages

    model = "claude-opus-4-8"
    assert (ChatAnthropic(model=model, api_key="x").profile or {}).get("mid_conversation_system_messages")
    in_place = [HumanMessage("Hi"), SystemMessage("Be terse."), AIMessage("Salut")]
    hoisted = [HumanMessage("Hi"), AIMessage("Salut"), SystemMessage("Be terse.")]
    for batch in (in_place, hoisted):
        sent_system, sent = _format_messages(batch, model=model, mid_conversation_system_messages=True)
        system, rest = _codec.split_system(batch, "anthropic", model)
        assert [part["content"] for part in system] == ([sent_system] if sent_system else [])
        assert [m["role"] for m in _codec.messages(rest)] == [m["role"] for m in sent]
    assert [m["role"] for m in _codec.messages(_codec.split_system(in_place, "anthropic", model)[1])] == [
        "user",
        "system",
        "assistant",
    ]


def test_anthropic_structured_output_asked_by_the_legacy_output_format_is_json() -> None:
    """Before ``output_config.format``, Anthropic's structured outputs beta took ``output_format`` (langchain-anthropic
    releases of that time send it): the same json output type, as ``instrument_anthropic()`` reads either."""
    metadata = {"ls_provider": "anthropic", "ls_model_name": "claude-sonnet-4-5"}
    schema = {"type": "object", "properties": {"answer": {"type": "string"}}}
    legacy = _codec.request_attributes(metadata, {"output_format": {"type": "json_schema", "schema": schema}})
    assert legacy["gen_ai.output.type"] == "json"
    current = {"output_config": {"format": {"type": "json_schema", "schema": schema}}}
    assert _codec.request_attributes(metadata, current)["gen_ai.output.type"] == "json"
    assert "gen_ai.output.type" not in _codec.request_attributes(metadata, {"output_config": {"effort": "low"}})


def test_documents_keep_id_score_content_and_metadata() -> None:
    docs = [
        Document(page_content="Paris is the capital of France.", id="d1", metadata={"source": "wiki", "score": 0.91}),
        Document(page_content="No id here."),
    ]
    assert _codec.documents(docs) == [
        {
            "id": "d1",
            "score": 0.91,
            "content": "Paris is the capital of France.",
            "metadata": {"source": "wiki", "score": 0.91},
        },
        {"content": "No id here."},
    ]


SYSTEM_FIRST = [SystemMessage("Be terse."), SystemMessage("Answer in French."), HumanMessage("Hi"), AIMessage("Salut")]


def test_a_provider_that_takes_the_system_prompt_apart_has_its_leading_system_messages_as_instructions() -> None:
    """Anthropic's ``system``, Gemini's ``system_instruction``, Bedrock's ``system``: where the integrations put the
    leading system messages, which are then no input message (as the SDK instrumentations record the same call)."""
    for ls_provider in ("anthropic", "google_genai", "google_vertexai", "amazon_bedrock", "bedrock_converse"):
        system, rest = _codec.split_system(SYSTEM_FIRST, ls_provider)
        assert system == [{"type": "text", "content": "Be terse."}, {"type": "text", "content": "Answer in French."}]
        assert [m["role"] for m in _codec.messages(rest)] == ["user", "assistant"]


def test_elsewhere_a_system_message_stays_an_input_message() -> None:
    """OpenAI, Mistral, Ollama...: the system message is one of the messages sent; one after the first user message
    is kept where it is in any case."""
    assert _codec.split_system(SYSTEM_FIRST, "openai") == ([], SYSTEM_FIRST)
    assert _codec.split_system(SYSTEM_FIRST, None) == ([], SYSTEM_FIRST)
    late = [HumanMessage("Hi"), SystemMessage("Be terse.")]
    assert _codec.split_system(late, "google_genai") == ([], late)


@pytest.mark.filterwarnings("ignore:A non-leading `SystemMessage` was moved")
def test_anthropic_gets_a_single_later_system_message_as_its_system_prompt() -> None:
    """langchain-anthropic moves the one non-leading system message (or run of them) into ``system`` (warning
    that it now applies to the whole conversation): the instructions are what the API was sent, as
    ``instrument_anthropic()`` records the same request; the other messages keep their order. (This test asserted
    the message stayed in place before langchain-anthropic hoisted it: the record then differed from the request.)
    """
    from langchain_anthropic.chat_models import _format_messages

    for batch in (
        [HumanMessage("Hi"), SystemMessage("Be terse.")],
        [HumanMessage("Hi"), SystemMessage("Be terse."), SystemMessage("Answer in French."), AIMessage("Salut")],
        SYSTEM_FIRST,
    ):
        sent_system, sent = _format_messages(batch, model="claude-sonnet-4-5")
        system, rest = _codec.split_system(batch, "anthropic")
        sent_parts = [sent_system] if isinstance(sent_system, str) else [b["text"] for b in sent_system or []]
        assert [part["content"] for part in system] == sent_parts
        assert [m["role"] for m in _codec.messages(rest)] == [m["role"] for m in sent]
    # A leading system message and a later one: LangChain sends nothing (it raises); the leading one is the prompt.
    both = [SystemMessage("Be terse."), HumanMessage("Hi"), SystemMessage("Answer in French.")]
    system, rest = _codec.split_system(both, "anthropic")
    assert system == [{"type": "text", "content": "Be terse."}]
    assert [m.type for m in rest] == ["human", "system"]


def test_cache_writes_split_by_lifetime_are_counted_and_a_zero_input_count_is_left_out() -> None:
    """langchain-anthropic puts cache writes in ``ephemeral_5m_input_tokens`` / ``ephemeral_1h_input_tokens`` and
    zeroes ``cache_creation``; an input count of 0 (a stream that did not report it) is no count at all."""
    split = _ai(
        content="ok",
        usage_metadata={
            "input_tokens": 1300,
            "output_tokens": 5,
            "total_tokens": 1305,
            "input_token_details": {
                "cache_read": 200,
                "cache_creation": 0,
                "ephemeral_5m_input_tokens": 1000,
                "ephemeral_1h_input_tokens": 64,
            },
        },
    )
    assert _codec.usage_attributes([split], None) == {
        "gen_ai.usage.input_tokens": 1300,
        "gen_ai.usage.output_tokens": 5,
        "gen_ai.usage.cache_read.input_tokens": 200,
        "gen_ai.usage.cache_creation.input_tokens": 1064,
    }
    unreported = _ai(content="ok", usage_metadata={"input_tokens": 0, "output_tokens": 15, "total_tokens": 15})
    assert _codec.usage_attributes([unreported], None) == {"gen_ai.usage.output_tokens": 15}


# --- the server and the constructor's stop sequences, from the serialized model --------------------------------


def _serialized(**kwargs: Any) -> dict[str, Any]:
    """A model as LangChain serializes it for the callbacks (``dumpd(model)``): ``kwargs`` are its arguments."""
    return {"lc": 1, "type": "constructor", "id": ["langchain", "chat_models", "Chat"], "kwargs": kwargs}


@pytest.mark.parametrize(
    ("kwargs", "provider", "server"),
    [
        ({"azure_endpoint": "https://my.openai.azure.com"}, "azure", ("my.openai.azure.com", 443)),
        ({"groq_api_base": "https://api.groq.com"}, "groq", ("api.groq.com", 443)),  # ChatGroq's own name
        ({"base_url": "http://localhost:11434"}, "ollama", ("localhost", 11434)),  # ChatOllama
        ({"endpoint": "https://api.mistral.ai/v1"}, "mistralai", ("api.mistral.ai", 443)),  # ChatMistralAI
        ({"base_url": "localhost:11434"}, "ollama", None),  # no scheme: no host to read, nothing guessed
        # A port that is no number: the scheme's, as the SDK instrumentations read such a URL.
        ({"base_url": "http://host:notaport"}, "ollama", ("host", 80)),
        ({"base_url": 42}, "ollama", None),
        ({}, "bedrock", None),  # the SDK picks its endpoint: not known here
    ],
)
def test_the_server_is_read_from_any_integrations_url_argument_and_never_raises(
    kwargs: dict[str, Any], provider: str, server: tuple[str, int | None] | None
) -> None:
    from evaltrace.instrumentation.langchain._serialized import server_attributes

    attrs = server_attributes(_serialized(**kwargs), provider)
    expected = {} if server is None else {"server.address": server[0]}
    if server is not None and server[1] is not None:
        expected["server.port"] = server[1]
    assert attrs == expected


@pytest.mark.parametrize("serialized", [None, "ChatX", {"kwargs": None}, {"kwargs": ["x"]}])
def test_a_model_serialized_in_another_shape_gives_nothing(serialized: Any) -> None:
    from evaltrace.instrumentation.langchain._serialized import constructor_stop, server_attributes

    assert server_attributes(serialized, "anthropic") == {}
    assert constructor_stop(serialized) is None


def test_the_constructors_stop_sequences_are_read_under_either_name() -> None:
    from evaltrace.instrumentation.langchain._serialized import constructor_stop

    assert constructor_stop(_serialized(stop_sequences=["END"])) == ["END"]
    assert constructor_stop(_serialized(stop="END")) == ["END"]
    assert constructor_stop(_serialized(stop=["a", 1])) is None  # not a list of strings: nothing recorded
