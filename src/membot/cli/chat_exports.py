"""``membot import`` of a ChatGPT or Claude export: the file read as a stream, a bar of the
bytes read, and at the end what was stored, skipped and malformed. ``membot.cli`` calls
:func:`import_export` when the file is an export (``--format chatgpt|claude``, or told
from its shape)."""

from __future__ import annotations

import time
from pathlib import Path

from rich.markup import escape
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from membot import ChatExport, Memory
from membot.cli.common import err


def import_export(
    memory: Memory, file: Path, fmt: str | None, *, bot: str, user: str | None
) -> None:
    """Import the export ``file`` into ``memory`` with a bar, then say what happened."""
    started = time.perf_counter()
    with ChatExport(file, fmt, bot=bot, user=user) as export:
        how = "told from its shape" if export.detected else "as --format says"
        err.print(f"reading {escape(file.name)} as {export.format_name} ({how})")
        with _bytes_progress() as progress:
            task = progress.add_task("importing", total=export.total_bytes)
            added = memory.add_many(
                export.lines(),
                progress=lambda _: progress.update(task, completed=export.bytes_read),
            )
            progress.update(task, completed=export.total_bytes)
        tally = export.tally
    seconds = time.perf_counter() - started
    skipped = tally.lines - added
    already = f" ({skipped} were stored already)" if skipped else ""
    err.print(
        f"imported {added} lines of {tally.conversations} conversations{already}: "
        f"{tally.lines / max(seconds, 1e-9):.0f} lines/s, {seconds:.1f} s",
        highlight=False,
    )
    if tally.skipped:
        kinds = ", ".join(f"{count} {kind}" for kind, count in sorted(tally.skipped.items()))
        err.print(f"not stored, as membot keeps no such lines: {kinds}", highlight=False)
    if tally.problem_count:
        err.print(f"skipped {tally.problem_count} malformed parts:", highlight=False)
        for problem in tally.problems:
            err.print(f"  {problem}", markup=False, highlight=False)
        if tally.problem_count > len(tally.problems):
            err.print(f"  … and {tally.problem_count - len(tally.problems)} more", highlight=False)


def _bytes_progress() -> Progress:
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        DownloadColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=err,
    )
