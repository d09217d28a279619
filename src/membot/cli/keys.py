"""``membot keys …``: make, list and revoke the API keys of ``membot serve``."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from membot import iso, utc_now
from membot.cli.common import err, options_of, out, print_json
from membot.service import ApiKey, create_key, list_keys, revoke_key

keys_app = typer.Typer(
    rich_markup_mode=None,
    help="API keys for `membot serve`: create, list and revoke them.",
    no_args_is_help=True,
)


def describe(key: ApiKey) -> str:
    """Whom a key acts for, in words."""
    if key.scope == "admin":
        return "admin (everything)"
    if key.scope == "bot":
        return f"bot {key.bot} (any person)"
    return f"person {key.user} of {key.bot}"


@keys_app.command("create")
def keys_create(
    context: typer.Context,
    admin: Annotated[bool, typer.Option("--admin", help="A key that does everything.")] = False,
    bot: Annotated[
        str | None, typer.Option("--bot", "-b", help="Act for every person of this bot.")
    ] = None,
    user: Annotated[
        str | None, typer.Option("--user", "-u", help="Act only as this person of --bot.")
    ] = None,
    name: Annotated[str | None, typer.Option("--name", help="A label to know it by.")] = None,
    expires_days: Annotated[
        int | None, typer.Option(help="Stop working after this many days.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Make a key and print it, once: only its hash is stored."""
    new = create_key(
        options_of(context).memory(),
        admin=admin,
        bot=bot,
        user=user,
        label=name,
        expires_days=expires_days,
    )
    if as_json:
        print_json(new.to_json())
        return
    sys.stdout.write(new.secret + "\n")  # plain, so scripts can read it: no colour, no wrapping
    expiry = f", expires {iso(new.key.expires_at)}" if new.key.expires_at else ""
    err.print(
        f"created key {new.key.id}: {describe(new.key)}{expiry}. "
        "This is the only time it is shown: keep it now.",
        highlight=False,
        markup=False,
    )


@keys_app.command("list")
def keys_list(
    context: typer.Context, as_json: Annotated[bool, typer.Option("--json")] = False
) -> None:
    """Every key, revoked and expired ones too (never the key itself)."""
    keys = list_keys(options_of(context).memory())
    if as_json:
        print_json([key.to_json() for key in keys])
        return
    now = utc_now()
    for key in keys:
        label = f"  {key.label!r}" if key.label else ""
        expiry = f"  expires {iso(key.expires_at)}" if key.expires_at else ""
        out.print(
            f"{key.id}  {key.state(now):7}  {describe(key)}{label}  "
            f"created {iso(key.created_at)}{expiry}",
            highlight=False,
            markup=False,
            soft_wrap=True,  # one key a line, whatever the terminal's width, for grep and cut
        )


@keys_app.command("revoke")
def keys_revoke(
    context: typer.Context, key_id: Annotated[str, typer.Argument(metavar="ID")]
) -> None:
    """Revoke a key by its id: requests with it are refused from now on."""
    key = revoke_key(options_of(context).memory(), key_id)
    revoked_at = iso(key.revoked_at) if key.revoked_at else "now"
    err.print(
        f"revoked key {key.id} ({describe(key)}) at {revoked_at}", highlight=False, markup=False
    )
