"""One way to build the official ``openai`` client for any OpenAI-compatible endpoint."""

from __future__ import annotations

import os
from typing import Any

from membot.errors import ConfigError


def openai_client(
    base_url: str | None, api_key_env: str, timeout: float, max_retries: int, missing_key: str
) -> Any:
    """A client for ``base_url`` (OpenAI itself when None) with the key read from
    ``api_key_env``. OpenAI needs the key (``missing_key`` says what to do); local servers
    (Ollama, vLLM, TEI, llama.cpp) accept any, but the client insists on one."""
    from openai import OpenAI

    key = os.environ.get(api_key_env)
    if not key and base_url is None:
        raise ConfigError(missing_key)
    return OpenAI(
        api_key=key or "unused", base_url=base_url, timeout=timeout, max_retries=max_retries
    )
