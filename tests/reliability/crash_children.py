"""Processes the crash tests kill: ``membot`` commands and ``membot serve``, each a real
process of its own, forked from a server that imported membot once.

Importing membot, FastAPI and uvicorn takes about 2 s here; a hundred kills each paying it
would take minutes. ``multiprocessing``'s forkserver imports this module once and forks every
child from it, so a child starts in milliseconds and is still a separate process with its own
SQLite connections, killed with SIGKILL like any other. What a child runs is ``membot``'s own
``main()`` with the arguments a person would type; only the embedder (the tests' hashing
embedder, by name ``hash-bow`` or ``hash-bow-128``) and the model (``--llm echo``, a
ScriptedLLM that keeps what the person said) are the tests' fakes.
"""

from __future__ import annotations

import importlib.util
import json
import multiprocessing
import multiprocessing.forkserver
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path

import typer.main
import uvicorn  # noqa: F401 - imported once here, so `membot serve` children start at once

import membot
import membot.cli
import membot.cli.common
import membot.llm
import membot.memory.facade
import membot.server.app
from membot.embed import CachedEmbedder
from membot.llm.scripted import DEFAULT_REPLY, ScriptedLLM
from membot.turn.tokens import default_token_counter

_CONFTEST = Path(__file__).parents[1] / "conftest.py"
_spec = importlib.util.spec_from_file_location("membot_tests_conftest", _CONFTEST)
assert _spec is not None and _spec.loader is not None
_conftest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_conftest)
HashingEmbedder = _conftest.HashingEmbedder

# "I like the colour <word>": the sentence every test line carries, and the key point the
# echo model keeps of it (the person's own words, so grounding keeps it).
LIKED = re.compile(r"I like the colour \w+")
EMBEDDERS = {"hash-bow": 256, "hash-bow-128": 128}


class EchoLLM(ScriptedLLM):
    """Answers a turn with the scripted reply, and the key points of an ending with what the
    person said they like, found in the prompt."""

    def complete(self, messages, max_tokens, *, schema=None) -> str:
        self._record(messages, schema, stream=False)
        if schema is not None and "points" in str(schema):
            said = sorted({m for message in messages for m in LIKED.findall(message["content"])})
            return json.dumps({"points": said, "categories": ["preferences"]})
        return DEFAULT_REPLY


def _resolve_embedder(original):
    def resolve(spec: str, cache_path=None, key_env=None):
        if spec in EMBEDDERS:
            inner = HashingEmbedder(spec, EMBEDDERS[spec])
            return CachedEmbedder(inner, cache_path) if cache_path else inner
        return original(spec, cache_path=cache_path, key_env=key_env)

    return resolve


def _resolve_llm(original):
    def resolve(spec: str, key_env=None, timeout: float = 60.0):
        return EchoLLM() if spec == "echo" else original(spec, key_env=key_env, timeout=timeout)

    return resolve


def use_test_fakes() -> None:
    """Make ``hash-bow`` embedders and the ``echo`` model known to this process's membot."""
    membot.memory.facade.resolve_embedder = _resolve_embedder(membot.memory.facade.resolve_embedder)
    resolve = _resolve_llm(membot.llm.resolve_llm)
    for module in (membot, membot.llm, membot.server.app, membot.cli.common):
        module.resolve_llm = resolve


def run_membot(argv: Sequence[str], env: dict[str, str], log: str) -> None:
    """A child's body: ``membot ARGV`` with ``env``, its output in ``log``."""
    os.environ.clear()
    os.environ.update(env)
    sink = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(sink, 1)
    os.dup2(sink, 2)
    use_test_fakes()
    typer.main.get_command = _prebuilt_command
    sys.argv = ["membot", *argv]
    membot.cli.main()


# The token counter (0.5 s to load) and typer's command tree (0.3 s to build from the
# signatures) are made once here and shared by every child, as the imports are.
default_token_counter().count("warm up")
_COMMAND = typer.main.get_command(membot.cli.app)
_get_command = typer.main.get_command


def _prebuilt_command(app):
    return _COMMAND if app is membot.cli.app else _get_command(app)


_context = multiprocessing.get_context("forkserver")
_context.set_forkserver_preload([__name__])


def _start_fork_server() -> None:
    """Start the fork server able to import this module: Python 3.11's does not take the
    parent's ``sys.path`` (pytest puts this folder there), only the environment's."""
    here = str(Path(__file__).parent)
    paths = [here, *sys.path]
    before = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(path for path in paths if path)
    try:
        multiprocessing.forkserver.ensure_running()
    finally:
        if before is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = before


def start(argv: Sequence[str], env: dict[str, str], log: Path) -> multiprocessing.Process:
    """Start ``membot ARGV`` as a child process (forked from the preloaded server)."""
    _start_fork_server()
    process = _context.Process(target=run_membot, args=(list(argv), env, str(log)), daemon=True)
    process.start()
    return process
