"""``membot backup PATH`` and ``membot restore PATH``: thin adapters over
:func:`membot.backup_store` and :func:`membot.restore_store`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from membot import BackupReport, backup_store, restore_store, restore_target
from membot.cli.common import err, options_of, print_json

JsonOption = Annotated[bool, typer.Option("--json", help="Print what was copied as JSON.")]


def _describe(report: BackupReport) -> str:
    megabytes = report.size_bytes / 1024 / 1024
    return f"{report.lines} lines, {report.summaries} summaries, {megabytes:.1f} MB"


def backup(
    context: typer.Context,
    path: Annotated[Path, typer.Argument(help="The backup file to write.")],
    replace: Annotated[
        bool, typer.Option("--replace", help="Overwrite PATH (once the new backup is whole).")
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Copy the store to one file, safely while servers write to it (SQLite's online
    backup). A PostgreSQL store is backed up with pg_dump instead."""
    report = backup_store(options_of(context).db, path, replace=replace)
    if as_json:
        print_json(report.__dict__)
        return
    err.print(f"backed up {_describe(report)} to {report.path}", highlight=False, markup=False)


def restore(
    context: typer.Context,
    path: Annotated[Path, typer.Argument(help="A file `membot backup` wrote.")],
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask.")] = False,
    as_json: JsonOption = False,
) -> None:
    """Replace everything the store holds with a backup, in one transaction."""
    store = options_of(context).db
    target = restore_target(store)  # PostgreSQL is refused before asking, and never shown
    question = f"Replace everything {target} holds with {path}? Lines said since are lost."
    if not yes and not typer.confirm(question, err=True):
        raise typer.Exit(1)
    report = restore_store(path, store)
    if as_json:
        print_json(report.__dict__)
        return
    err.print(f"restored {_describe(report)} into {report.path}", highlight=False, markup=False)
