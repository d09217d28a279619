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
