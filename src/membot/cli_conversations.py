"""CLI commands for ending conversations and listing what is remembered (being written)."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add this module's commands to ``app``."""
