"""``membot serve``: the HTTP server (REST, OpenAI-compatible, MCP) on uvicorn."""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated

import typer

from membot import DEFAULT_BOT, Memory
from membot.cli.common import err, options_of
from membot.service import create_key, create_signin_key, list_keys

if TYPE_CHECKING:  # imported where it serves: `membot` starts without it
    import uvicorn

LOOPBACK = {"127.0.0.1", "localhost", "::1"}


def serve(
    context: typer.Context,
    host: Annotated[str, typer.Option(help="Address to bind (0.0.0.0: every interface).")] = (
        "127.0.0.1"
    ),
    port: Annotated[int, typer.Option(min=0, max=65535)] = 8080,
    workers: Annotated[int, typer.Option(min=1, help="Worker processes.")] = 1,
    rate_limit: Annotated[
        str, typer.Option(help="Requests a minute per key and worker, e.g. 120/minute (0: off).")
    ] = "0",
    public_url: Annotated[
        str | None, typer.Option(help="The URL the server is reached at from outside.")
    ] = None,
) -> None:
    """Serve REST, the OpenAI-compatible endpoint and MCP over one store."""
    import uvicorn

    from membot.server.allocator import tune_allocator
    from membot.server.ratelimit import parse_rate

    tune_allocator()  # before the workers start: they read it from the environment
    options = options_of(context)
    limit = parse_rate(rate_limit)
    # Every worker builds its app from the environment (uvicorn starts them as processes).
    os.environ.update({"MEMBOT_DB": str(options.db), "MEMBOT_RATE_LIMIT": str(limit)})
    if options.embedder:
        os.environ["MEMBOT_EMBEDDER"] = options.embedder
    if options.llm_given:
        os.environ["MEMBOT_LLM"] = options.llm
    if options.llm_key_env:
        os.environ["MEMBOT_LLM_KEY_ENV"] = options.llm_key_env
    if options.embedder_key_env:
        os.environ["MEMBOT_EMBEDDER_KEY_ENV"] = options.embedder_key_env
    if public_url:
        os.environ["MEMBOT_PUBLIC_URL"] = public_url
    memory = options.memory()
    _first_key(memory)
    _first_bot(memory)
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{shown}:{port}/"
    err.print(
        f"membot serving {memory.location} at {url} (the web app; API docs at /docs)",
        highlight=False,
        soft_wrap=True,  # a path or address cut in two cannot be copied
        markup=False,
    )
    if host in LOOPBACK:
        _signin_link(memory, url)
    else:
        err.print("[yellow]note:[/] listening beyond this machine; every request needs a key")
    sms_note(public_url, os.environ)
    app = "membot.server:app_from_environment"
    if workers == 1:
        uvicorn.run(app, factory=True, host=host, port=port, log_level="warning")
        return
    config = uvicorn.Config(
        app, factory=True, host=host, port=port, workers=workers, log_level="warning"
    )
    # Each worker ends with this process (membot.server.app.end_with_supervisor): killed
    # alone, it left its workers serving the port, and a new membot serve could not bind it.
    from membot.server.app import SUPERVISOR_VARIABLE  # the server only where it is served

    os.environ[SUPERVISOR_VARIABLE] = str(os.getpid())
    _run_workers(config)


def sms_note(public_url: str | None, env: Mapping[str, str]) -> None:
    """Where Twilio's messaging webhook goes, or what SMS lacks, once it is being set up."""
    if not env.get("TWILIO_AUTH_TOKEN"):
        return
    if public_url:
        url = public_url.rstrip("/") + "/sms/twilio"
        err.print(
            f"texts: Twilio's messaging webhook is {url} (HTTP POST)", soft_wrap=True, markup=False
        )
    else:
        err.print(
            "[yellow]note:[/] TWILIO_AUTH_TOKEN is set but --public-url is not: "
            "texts are refused until it is"
        )


def _run_workers(config: uvicorn.Config) -> None:
    """What ``uvicorn.run`` does for several workers, on :func:`listening_socket`."""
    from uvicorn.supervisors import Multiprocess

    Multiprocess(config, sockets=[listening_socket(config)]).run()


def listening_socket(config: uvicorn.Config) -> socket.socket:
    """The workers' shared socket, bound by uvicorn and named TCP.

    uvicorn binds it without saying which protocol (0; uvicorn issue #3149), so asyncio leaves
    Nagle's algorithm on every connection, and each request after the first on a kept-alive
    connection waited about 40 ms for the client's delayed ACK (measured: 44 ms against 1.2 ms
    a request for ``/healthz`` on one worker)."""
    bound = config.bind_socket()
    if bound.family not in (socket.AF_INET, socket.AF_INET6):
        return bound
    tcp = socket.socket(bound.family, socket.SOCK_STREAM, socket.IPPROTO_TCP, bound.detach())
    tcp.set_inheritable(True)
    return tcp


def _first_key(memory: Memory) -> None:
    """A store without a usable key gets one admin key, shown once here: whoever can start
    the server on this store owns it already, and a first request should not need a manual."""
    # A sign-in link's key is no API key: a store holding only one has no usable key.
    if any(key.state() == "active" and not key.signin_only for key in list_keys(memory)):
        return
    new = create_key(memory, admin=True, label="first admin key (membot serve)")
    err.print(
        f"no API keys yet: made an admin key, shown only this once:\n  {new.secret}\n"
        "keep it secret; `membot keys create` makes narrower ones (a bot's, a person's)",
        highlight=False,
        markup=False,
    )


def _first_bot(memory: Memory) -> None:
    """A store without bots gets the default one, which the command line talks with
    already: the web app then opens on a bot to talk with, not on an empty list."""
    if memory.bots():
        return
    memory.create_bot(DEFAULT_BOT)
    err.print(f"no bots yet: made {DEFAULT_BOT!r} with the default profile to talk with",
              highlight=False, soft_wrap=True, markup=False)  # fmt: skip


def _signin_link(memory: Memory, url: str) -> None:
    """Only on a loopback-only server: whoever reads this terminal is on this machine. The key
    rides in the fragment, which browsers never send to a server or put in a Referer."""
    link = create_signin_key(memory)
    err.print(
        f"sign in to the web app (this link works once, for a day):\n  {url}#signin={link.secret}",
        highlight=False,
        soft_wrap=True,
        markup=False,
    )
