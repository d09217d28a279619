"""``membot migrate SRC DST``: copy a whole store to another, a thin adapter over
:func:`membot.migrate_store`."""

from __future__ import annotations

from typing import Annotated

import typer

from membot import migrate_store
from membot.cli.common import err, print_json


def migrate(
    source: Annotated[str, typer.Argument(help="The store to copy: a path or URL.")],
    destination: Annotated[
        str, typer.Argument(help="Where to copy it: a path or URL; made if new, must be empty.")
    ],
    replace: Annotated[
        bool,
        typer.Option("--replace", help="Remove what DESTINATION holds first (same transaction)."),
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the counts as JSON.")] = False,
) -> None:
    """Copy every line (with its seq, dates, source key and vector), bot, profile, summary,
    document and API key from SOURCE to DESTINATION — SQLite to PostgreSQL or back — and
    check that every table's count matches; a copy that fails leaves DESTINATION as it was."""
    report = migrate_store(source, destination, replace=replace)
    if as_json:
        print_json({"source": report.source, "copied": report.copied})
        return
    for table, count in report.source.items():
        err.print(f"{table:>15}: {count:>9} → {report.copied[table]:>9}", highlight=False)
    err.print("copied; every count matches", highlight=False)
