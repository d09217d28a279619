"""One way to build the official ``openai`` client for any OpenAI-compatible endpoint."""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import urlsplit

from membot.errors import ConfigError

OPENAI_KEY_ENV = "OPENAI_API_KEY"


def key_env_for(base_url: str | None, api_key_env: str | None) -> str | None:
    """Which variable holds the key: the one named, else OPENAI_API_KEY for OpenAI itself.
    Another server never gets the OpenAI key unless the user names that variable."""
    return api_key_env or (OPENAI_KEY_ENV if base_url is None else None)


def public_url(base_url: str | None) -> str:
    """The endpoint as it may appear in names, traces and errors: no credentials, no query."""
    if base_url is None:
        return "api.openai.com"
    parts = urlsplit(base_url)
    host = parts.hostname or ""
    host = f"[{host}]" if ":" in host else host  # an IPv6 address keeps its brackets
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{host}{port}{parts.path}"


def openai_client(
    base_url: str | None,
    api_key_env: str | None,
    timeout: float,
    max_retries: int,
    missing_key: str,
) -> Any:
    """A client for ``base_url`` (OpenAI itself when None) with the key read from
    ``api_key_env`` (see :func:`key_env_for`). OpenAI needs the key (``missing_key`` says what
    to do); local servers (Ollama, vLLM, TEI, llama.cpp) accept any, but the client wants one."""
    from openai import OpenAI

    key = os.environ.get(api_key_env) if api_key_env else None
    if not key and base_url is None:
        raise ConfigError(missing_key)
    return OpenAI(
        api_key=key or "unused", base_url=base_url, timeout=timeout, max_retries=max_retries
    )
