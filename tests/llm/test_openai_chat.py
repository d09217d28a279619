"""OpenAICompatibleLLM against a real local HTTP server, a closed port and a refused key."""

from __future__ import annotations

import re

import pytest

from membot import ConfigError, OpenAICompatibleLLM, ProviderError, resolve_llm

CLOSED_URL = "http://127.0.0.1:9/v1"  # nothing listens on the discard port
MESSAGES = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]


def test_a_chat_completion_is_asked_for_and_its_text_returned(openai_server) -> None:
    openai_server.reply = "Hi Alice"
    llm = resolve_llm(f"openai:llama3.2@{openai_server.base_url}")
    assert isinstance(llm, OpenAICompatibleLLM)

    assert llm.complete(MESSAGES, max_tokens=50) == "Hi Alice"

    ((path, body, _),) = openai_server.requests
    assert path == "/v1/chat/completions"
    assert body["model"] == "llama3.2"
    assert body["messages"] == MESSAGES
    assert body["max_tokens"] == 50


def test_the_key_comes_from_the_named_variable(openai_server, monkeypatch) -> None:
    monkeypatch.setenv("MY_LLM_KEY", "sk-llm-456")
    resolve_llm(f"openai:m@{openai_server.base_url}", key_env="MY_LLM_KEY").complete(MESSAGES, 5)
    assert openai_server.requests[0][2] == "Bearer sk-llm-456"


def test_an_unreachable_server_is_a_provider_error_saying_so() -> None:
    llm = OpenAICompatibleLLM("x", CLOSED_URL)
    with pytest.raises(ProviderError, match=re.escape(f"cannot reach openai:x@{CLOSED_URL}")):
        llm.complete(MESSAGES, 10)


def test_a_refused_key_is_a_provider_error_naming_the_variable(openai_server) -> None:
    openai_server.status = 401
    llm = OpenAICompatibleLLM("x", openai_server.base_url, api_key_env="MY_LLM_KEY")
    with pytest.raises(ProviderError, match="refused the key in MY_LLM_KEY"):
        llm.complete(MESSAGES, 10)


def test_other_server_errors_are_provider_errors(openai_server) -> None:
    openai_server.status = 400
    with pytest.raises(ProviderError, match="failed"):
        OpenAICompatibleLLM("x", openai_server.base_url, max_retries=0).complete(MESSAGES, 10)


def test_the_public_endpoint_without_a_key_says_what_to_set() -> None:
    with pytest.raises(ConfigError, match="set OPENAI_API_KEY"):
        OpenAICompatibleLLM("gpt-4o-mini").complete(MESSAGES, 10)


def test_another_server_never_gets_the_openai_key_unasked(openai_server, monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-secret")
    resolve_llm(f"openai:m@{openai_server.base_url}").complete(MESSAGES, 5)
    assert openai_server.requests[0][2] == "Bearer unused"


def test_credentials_in_the_url_stay_out_of_names_and_errors() -> None:
    llm = OpenAICompatibleLLM("x", "http://user:pa55@127.0.0.1:9/v1")
    assert llm.name == "openai:x@http://127.0.0.1:9/v1"
    with pytest.raises(ProviderError) as raised:
        llm.complete(MESSAGES, 10)
    assert "pa55" not in str(raised.value)


def test_an_ipv6_endpoint_keeps_its_brackets_in_names() -> None:
    """Without them, "::1:8000" could not be told from a host and a port."""
    llm = OpenAICompatibleLLM("x", "http://user:pa55@[::1]:8000/v1?key=pa55")
    assert llm.name == "openai:x@http://[::1]:8000/v1"


SCHEMA = {
    "title": "reply",
    "type": "object",
    "properties": {"response": {"type": "string"}},
    "required": ["response"],
    "additionalProperties": False,
}


def test_a_schema_is_sent_as_a_strict_json_schema_response_format(openai_server) -> None:
    openai_server.reply = '{"response": "hi"}'
    llm = OpenAICompatibleLLM("m", openai_server.base_url)
    assert llm.complete(MESSAGES, 20, schema=SCHEMA) == '{"response": "hi"}'
    ((_, body, _),) = openai_server.requests
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "reply", "schema": SCHEMA, "strict": True},
    }


def test_without_a_schema_no_response_format_is_sent(openai_server) -> None:
    OpenAICompatibleLLM("m", openai_server.base_url).complete(MESSAGES, 20)
    assert "response_format" not in openai_server.requests[0][1]


def formats(server) -> list[str | None]:
    return [(body.get("response_format") or {}).get("type") for _, body, _ in server.requests]


def test_an_endpoint_refusing_the_schema_is_asked_for_a_json_object_from_then_on(
    openai_server,
) -> None:
    openai_server.refused_formats = {"json_schema"}
    llm = OpenAICompatibleLLM("m", openai_server.base_url, max_retries=0)
    llm.complete(MESSAGES, 20, schema=SCHEMA)
    llm.complete(MESSAGES, 20, schema=SCHEMA)
    assert formats(openai_server) == ["json_schema", "json_object", "json_object"]
    assert llm.json_request == "json_object"


def test_an_endpoint_refusing_every_json_format_is_asked_in_words(openai_server) -> None:
    openai_server.refused_formats = {"json_schema", "json_object"}
    llm = OpenAICompatibleLLM("m", openai_server.base_url, max_retries=0)
    assert llm.complete(MESSAGES, 20, schema=SCHEMA) == openai_server.reply
    llm.complete(MESSAGES, 20, schema=SCHEMA)
    assert formats(openai_server) == ["json_schema", "json_object", None, None]


def test_a_request_refused_in_every_way_fails_and_changes_nothing(openai_server) -> None:
    """A 400 for another reason (say, too long a prompt) is not taken for a refused format."""
    openai_server.status = 400
    llm = OpenAICompatibleLLM("m", openai_server.base_url, max_retries=0)
    with pytest.raises(ProviderError, match="failed"):
        llm.complete(MESSAGES, 20, schema=SCHEMA)
    assert formats(openai_server) == ["json_schema", "json_object", None]
    assert llm.json_request == "json_schema"


def test_a_stream_yields_the_reply_in_pieces(openai_server) -> None:
    openai_server.reply = "Hello there, Alice."
    llm = OpenAICompatibleLLM("m", openai_server.base_url)
    pieces = list(llm.stream(MESSAGES, 20, schema=SCHEMA))
    assert pieces == ["Hell", "o th", "ere,", " Ali", "ce."]
    ((_, body, _),) = openai_server.requests
    assert body["stream"] is True and body["response_format"]["type"] == "json_schema"


def test_a_stream_falls_back_like_a_completion(openai_server) -> None:
    openai_server.refused_formats = {"json_schema"}
    llm = OpenAICompatibleLLM("m", openai_server.base_url, max_retries=0)
    assert "".join(llm.stream(MESSAGES, 20, schema=SCHEMA)) == openai_server.reply
    assert formats(openai_server) == ["json_schema", "json_object"]


def test_a_stream_broken_off_mid_reply_is_a_provider_error(openai_server) -> None:
    openai_server.break_after = 2
    llm = OpenAICompatibleLLM("m", openai_server.base_url, max_retries=0)
    received = []
    with pytest.raises(ProviderError, match="broke off its reply"):
        for piece in llm.stream(MESSAGES, 20):
            received.append(piece)
    assert received == ["Hell", "o fr"]


def test_a_stream_to_an_unreachable_server_is_a_provider_error() -> None:
    with pytest.raises(ProviderError, match="cannot reach"):
        list(OpenAICompatibleLLM("x", CLOSED_URL, max_retries=0).stream(MESSAGES, 10))
