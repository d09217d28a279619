"""ScriptedLLM, the one fake: queued replies, recorded calls, a file shared across processes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from membot import LLM, ConfigError, ProviderError, ScriptedLLM, resolve_llm
from membot.llm import BundledSmolLM2
from membot.llm.scripted import DEFAULT_REPLY

MESSAGES = [{"role": "user", "content": "hi"}]


def test_replies_come_in_order_then_the_default() -> None:
    llm = ScriptedLLM(["one"])
    llm.enqueue("two")
    assert isinstance(llm, LLM)
    assert [llm.complete(MESSAGES, 10) for _ in range(3)] == ["one", "two", DEFAULT_REPLY]
    assert llm.history == [MESSAGES] * 3


def test_an_error_reply_fails_the_call() -> None:
    llm = ScriptedLLM(["!error the model is down", "!error", "fine"])
    with pytest.raises(ProviderError, match=r"^the model is down$"):
        llm.complete(MESSAGES, 10)
    with pytest.raises(ProviderError, match="scripted failure"):
        llm.complete(MESSAGES, 10)
    assert llm.complete(MESSAGES, 10) == "fine"


def test_a_script_file_is_consumed_across_objects(tmp_path: Path) -> None:
    path = tmp_path / "script.json"
    path.write_text(json.dumps(["first", "second"]))
    assert resolve_llm(f"script:{path}").complete(MESSAGES, 10) == "first"
    assert resolve_llm(f"script:{path}").complete(MESSAGES, 10) == "second"
    assert json.loads(path.read_text()) == []
    assert resolve_llm(f"script:{path}").complete(MESSAGES, 10) == DEFAULT_REPLY


def test_the_script_spec_records_no_calls_so_a_long_running_server_keeps_no_prompts() -> None:
    served = resolve_llm("script:")
    assert isinstance(served, ScriptedLLM)
    for _ in range(3):
        assert served.complete(MESSAGES, 10) == DEFAULT_REPLY
        assert "".join(served.stream(MESSAGES, 10)) == DEFAULT_REPLY
    assert served.history == [] and served.schemas == [] and served.streamed == []


def test_a_stream_gives_the_reply_in_pieces_and_records_the_schema() -> None:
    llm = ScriptedLLM(["Hello there, Alice."], piece_size=5)
    schema = {"type": "object"}
    assert list(llm.stream(MESSAGES, 10, schema=schema)) == ["Hello", " ther", "e, Al", "ice."]
    assert llm.complete(MESSAGES, 10) == DEFAULT_REPLY
    assert llm.schemas == [schema, None] and llm.json_modes == [True, False]
    assert llm.streamed == [True, False]


def test_a_streamed_error_fails_after_the_text_before_it() -> None:
    llm = ScriptedLLM(["Hello!error connection lost", "!error down"], piece_size=2)
    received = []
    with pytest.raises(ProviderError, match=r"^connection lost$"):
        for piece in llm.stream(MESSAGES, 10):
            received.append(piece)
    assert received == ["He", "ll", "o"]
    with pytest.raises(ProviderError, match=r"^down$"):
        next(llm.stream(MESSAGES, 10))


@pytest.mark.parametrize("spec", ["gpt-4o", "openai:", "openai:@http://localhost/v1", ""])
def test_unknown_llm_specs_are_config_errors(spec: str) -> None:
    with pytest.raises(ConfigError):
        resolve_llm(spec)


def test_the_default_llm_is_the_bundled_model() -> None:
    assert isinstance(resolve_llm("smollm2"), BundledSmolLM2)


@pytest.mark.slow
def test_the_bundled_model_answers_offline() -> None:
    reply = BundledSmolLM2().complete([{"role": "user", "content": "Say hello."}], 8)
    assert isinstance(reply, str) and reply.strip()


@pytest.mark.slow
def test_the_bundled_model_loads_without_llama_cpps_extra_buffers() -> None:
    """On an AMX CPU, llama.cpp's AMX buffer crashed the first reply with a segfault (this
    suite died in the test above on an Intel Xeon with AMX); the load turns those buffers
    off, and puts llama-cpp-python's defaults back afterwards."""
    import llama_cpp.llama_cpp as native

    model = BundledSmolLM2()._load()
    assert model.model_params.use_extra_bufts is False
    assert native.llama_model_default_params().use_extra_bufts is True


@pytest.mark.slow
def test_the_bundled_model_streams_json_held_to_the_schema() -> None:
    """llama-cpp-python's grammar: the 135M model can only write the shape asked for."""
    from membot.turn.relevance import VERDICT_SCHEMA

    question = [{"role": "user", "content": "Is the sky blue? Answer yes or no."}]
    pieces = list(BundledSmolLM2().stream(question, 16, schema=VERDICT_SCHEMA))
    assert len(pieces) > 1
    assert json.loads("".join(pieces))["answer"] in {"yes", "no"}
