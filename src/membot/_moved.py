"""Where the names and modules of membot 0.1 went in 0.2's packages, so that code written
against them keeps working, with a DeprecationWarning that names the new place.

A moved module (``membot.bot``) is the new one (``membot.turn.bot``) under its old name: one
module object, so patching either name patches both. A server-only name that left the
library's API (``membot.create_key``) is read from :mod:`membot.service`.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings
from types import ModuleType

MOVED_MODULES = {
    "membot.bot": "membot.turn.bot",
    "membot.context": "membot.turn.context",
    "membot.replies": "membot.turn.replies",
    "membot.relevance": "membot.turn.relevance",
    "membot.running_summary": "membot.turn.running_summary",
    "membot.templates": "membot.turn.templates",
    "membot.tokens": "membot.turn.tokens",
    "membot.quoting": "membot.turn.quoting",
    "membot.own_words": "membot.turn.own_words",
    "membot.conversations": "membot.turn.ending",
    "membot.memory_profiles": "membot.memory.bots",
    "membot.memory_knowledge": "membot.memory.knowledge",
    "membot.forgetting": "membot.memory.forgetting",
    "membot.documents": "membot.memory.documents",
    "membot.importers": "membot.memory.importers",
    "membot.grounding": "membot.memory.grounding",
    "membot.named_dates": "membot.memory.named_dates",
    "membot.profiles": "membot.memory.profile_files",
    "membot.search": "membot.index.vectors",
    "membot.ann": "membot.index.approximate",
    "membot.ann_build": "membot.store.approximate_build",
    "membot.keys": "membot.service.keys",
    "membot.sms": "membot.service.text_messages",
    "membot.server.sms": "membot.server.sms_route",
}


class _MovedModuleFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds a moved module's old name and hands back the module at its new place."""

    def find_spec(
        self, fullname: str, path: object = None, target: object = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in MOVED_MODULES:
            return None
        return importlib.machinery.ModuleSpec(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return None  # a placeholder; exec_module puts the real module in its place

    def exec_module(self, module: ModuleType) -> None:
        new = MOVED_MODULES[module.__name__]
        warnings.warn(
            f"{module.__name__} moved to {new}: import it from there",
            DeprecationWarning,
            stacklevel=3,
        )
        # The import system returns what sys.modules holds under the old name once this
        # returns, so the caller gets the real module, its own __spec__ untouched.
        sys.modules[module.__name__] = importlib.import_module(new)


def install_moved_module_finder() -> None:
    if not any(isinstance(finder, _MovedModuleFinder) for finder in sys.meta_path):
        sys.meta_path.append(_MovedModuleFinder())


def moved_name(name: str) -> object:
    """``membot.<name>`` for a name that left the library's API for :mod:`membot.service`,
    with a warning; else the usual AttributeError."""
    if not name.startswith("__"):  # dunders are asked for by tools, never moved
        service = importlib.import_module("membot.service")
        if name in service.__all__:
            warnings.warn(
                f"membot.{name} moved to membot.service: from membot.service import {name}",
                DeprecationWarning,
                stacklevel=3,
            )
            return getattr(service, name)
    raise AttributeError(f"module 'membot' has no attribute {name!r}")
