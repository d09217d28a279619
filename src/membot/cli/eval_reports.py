"""``membot eval --out``: the report file, checked before a run that can take an hour rather
than after it, then written, with what a failure to write it says."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from membot import ConfigError
from membot.cli.common import err
from membot.eval import write_report


def check_writable(path: Path) -> None:
    """``ConfigError`` unless a report can be written at ``path`` (its missing folders are
    made, as :func:`write_report` does)."""
    if path.is_dir():
        raise ConfigError(f"--out {path} is a folder: give the report file's name")
    nearest = next(folder for folder in path.absolute().parents if folder.exists())
    if path.exists():
        writable = os.access(path, os.W_OK)
    elif not nearest.is_dir():
        raise ConfigError(f"cannot write the report to {path}: {nearest} is not a folder")
    else:
        writable = os.access(nearest, os.W_OK | os.X_OK)
    if not writable:
        raise ConfigError(f"cannot write the report to {path}: permission denied")


def save_report(report: dict[str, Any], path: Path, also: str = "") -> None:
    """Write ``report`` to ``path`` and say so on stderr (``also``: what else was written
    where); ``ConfigError`` when it cannot be written."""
    try:
        write_report(report, path)
    except OSError as error:
        raise ConfigError(f"cannot write the report to {path}: {error}") from error
    err.print(f"report written to {path}{also}", markup=False)
