"""``POST /v1/bots/{bot}/imports``: a ChatGPT or Claude export uploaded and imported in the
background; ``GET /v1/bots/{bot}/imports/{id}``: how far it has come, and what it skipped.

An export is hundreds of megabytes and takes minutes to embed, longer than a request may
wait: the upload is written to a file, the format told (a file that is no export is refused
at once, 400), and the answer is 202 with the job's id. The job's state is a small JSON file
in the imports folder, so that any worker of ``membot serve --workers N`` answers about any
job. One import runs at a time in a worker (embedding takes the cores turns need); the rest
wait, ``queued``. A server stopped mid-import leaves the job ``interrupted``: the same file
sent again stores only what is missing.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import threading
import time
from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, Depends, File, Form, Request, UploadFile
from fastapi.responses import JSONResponse

from membot import ChatExport, ConfigError, ImportFormatError, MembotError, NotFoundError, iso
from membot import utc_now as now
from membot.server.auth import caller, need_bot, person_of, service_of
from membot.server.import_jobs import ImportJob
from membot.server.service import Service
from membot.service import ApiKey

log = logging.getLogger(__name__)
router = APIRouter(prefix="/v1", tags=["imports"])
Key = Annotated[ApiKey, Depends(caller)]
# The route whose bodies may be larger than the others' (RequestAccounting reads it).
IMPORTS_PATH = re.compile(r"^/v1/bots/[^/]+/imports$")
COPY_BYTES = 1 << 20
SAVE_SECONDS = 0.5  # how often a running job writes its progress


@router.post("/bots/{bot}/imports", status_code=202)
async def start_import(
    bot: str,
    key: Key,
    request: Request,
    file: Annotated[UploadFile, File(description="conversations.json, or the export's .zip")],
    fmt: Annotated[
        str | None, Form(alias="format", description="chatgpt or claude; left out: told")
    ] = None,
    user: Annotated[str | None, Form(description="The person; left out with a person key.")] = None,
) -> JSONResponse:
    """Start importing a ChatGPT or Claude export as the person's history with this bot;
    answers 202 with the job (``GET`` its ``Location`` to follow it)."""
    person = person_of(key, bot, user)
    service = service_of(request)
    if key.can_admin:
        service.memory.require_bot(bot)
    jobs = service.imports
    job_id = jobs.new_id()
    folder = jobs.upload_folder(job_id)
    name = Path(file.filename or "").name
    path = folder / (name if name not in ("", ".", "..") else "upload")
    try:
        await _copy(file, path)
        export = _opened(path, fmt, bot, person, folder)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    job = ImportJob(job_id, bot, person, path.name, export.format, total_bytes=export.total_bytes)
    jobs.prune()
    jobs.save(job)
    worker = threading.Thread(target=_run, args=(service, job, export, folder), daemon=True)
    worker.start()
    location = f"/v1/bots/{bot}/imports/{job_id}"
    return JSONResponse(job.to_json(), status_code=202, headers={"Location": location})


@router.get("/bots/{bot}/imports/{job_id}")
def import_progress(bot: str, job_id: str, key: Key, request: Request) -> dict[str, Any]:
    """How far an import has come: bytes and lines read, lines added, what was skipped."""
    need_bot(key, bot)
    job = service_of(request).imports.load(job_id)
    if job is None or job.bot != bot or (key.user is not None and key.user != job.user):
        raise NotFoundError(f"no import {job_id!r} of {bot!r}")  # another's: not found
    return job.to_json()


async def _copy(upload: UploadFile, path: Path) -> None:
    """The upload written to ``path`` a megabyte at a time (it is never held whole)."""
    with path.open("wb") as out:
        while chunk := await upload.read(COPY_BYTES):
            out.write(chunk)


def _opened(path: Path, fmt: str | None, bot: str, user: str, folder: Path) -> ChatExport:
    """The export opened and its format told; an error names the file as it was sent."""
    try:
        return ChatExport(path, fmt or None, bot=bot, user=user)
    except (ImportFormatError, ConfigError) as error:
        raise type(error)(str(error).replace(f"{folder}{os.sep}", "")) from None


def _run(service: Service, job: ImportJob, export: ChatExport, folder: Path) -> None:
    """The import itself, in a thread of its own, writing its progress as it goes."""
    jobs = service.imports
    saved = 0.0

    def progress(lines: int) -> None:
        nonlocal saved
        job.lines_read += lines
        job.bytes_read = export.bytes_read
        if time.monotonic() - saved > SAVE_SECONDS:
            job.tally = export.tally.to_json()
            jobs.save(job)
            saved = time.monotonic()

    try:
        with jobs.one_at_a_time, export:
            job.status = "running"
            jobs.save(job)
            job.added = service.memory.add_many(export.lines(), progress=progress)
            job.status = "done"
    except MembotError as error:
        job.status, job.error = "failed", str(error).replace(f"{folder}{os.sep}", "")
    except Exception:
        log.exception("import %s failed", job.id)
        job.status, job.error = "failed", "the import failed: the server's log says why"
    finally:
        job.bytes_read, job.tally = export.bytes_read, export.tally.to_json()
        job.finished_at = iso(now())
        jobs.save(job)
        shutil.rmtree(folder, ignore_errors=True)
