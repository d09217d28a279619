"""The state of imports running in the background (``server/imports.py``): one small JSON
file per job in a folder every worker of ``membot serve --workers N`` shares, so any worker
answers about any job, with the uploads beside them."""

from __future__ import annotations

import json
import os
import re
import secrets
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from membot import iso
from membot import utc_now as now

DEFAULT_MAX_IMPORT_MB = 1024  # ChatGPT exports of years of use run to hundreds of MB
KEEP_SECONDS = 7 * 86_400  # a finished job's state is kept a week, then pruned
JOB_ID = re.compile(r"^[0-9a-f]{24}$")


@dataclass
class ImportJob:
    id: str
    bot: str
    user: str
    file: str
    format: str
    status: str = "queued"  # queued, running, done, failed, interrupted
    total_bytes: int = 0
    bytes_read: int = 0
    lines_read: int = 0
    added: int = 0
    tally: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    started_at: str = field(default_factory=lambda: iso(now()))
    finished_at: str | None = None
    pid: int = field(default_factory=os.getpid)

    def to_json(self) -> dict[str, Any]:
        hidden = ("pid", "tally")
        shown = {name: value for name, value in asdict(self).items() if name not in hidden}
        tally = self.tally or {}
        already = max(self.lines_read - self.added, 0) if self.status == "done" else None
        return {**shown, "already_stored": already, "conversations": tally.get("conversations", 0),
                "skipped": tally.get("skipped", {}), "malformed": tally.get("malformed", 0),
                "problems": tally.get("problems", [])}  # fmt: skip


class ImportJobs:
    """The jobs of every worker, one JSON file each in ``folder``, with their uploads."""

    def __init__(self, folder: Path | None = None) -> None:
        self.folder = folder or Path(tempfile.gettempdir()) / f"membot-imports-{os.getuid()}"
        self.one_at_a_time = threading.Semaphore(1)

    def new_id(self) -> str:
        return secrets.token_hex(12)

    def upload_folder(self, job_id: str) -> Path:
        path = self.folder / "uploads" / job_id
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
        return path

    def save(self, job: ImportJob) -> None:
        self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        path = self.folder / f"{job.id}.json"
        partial = path.with_suffix(".partial")
        partial.write_text(json.dumps(asdict(job)), encoding="utf-8")
        os.replace(partial, path)  # a reader never sees half a file

    def load(self, job_id: str) -> ImportJob | None:
        if not JOB_ID.match(job_id):
            return None
        try:
            job = ImportJob(**json.loads((self.folder / f"{job_id}.json").read_text("utf-8")))
        except (OSError, ValueError, TypeError):
            return None
        if job.status in ("queued", "running") and not _alive(job.pid):
            job.status = "interrupted"
            job.error = "the server stopped during the import: send the file again to go on"
        return job

    def prune(self) -> None:
        """Forget the state of jobs finished more than ``KEEP_SECONDS`` ago."""
        cutoff = time.time() - KEEP_SECONDS
        for path in self.folder.glob("*.json"):
            try:
                if path.stat().st_mtime < cutoff:
                    path.unlink()
            except OSError:
                continue


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive
        return True
    return True
