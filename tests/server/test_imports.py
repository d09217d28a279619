"""POST /v1/bots/{bot}/imports: an export uploaded, imported in the background, its
progress read by GET while it runs; sent again, nothing twice; only its person (or the
bot's keys) may read it."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from export_files import CHATGPT_LINES, chatgpt_export, claude_export, write_zip
from fastapi.testclient import TestClient

from membot import Memory, ScriptedLLM
from membot.server import create_app
from membot.server.import_jobs import ImportJob, ImportJobs
from membot.service.keys import create_key


@pytest.fixture
def client(memory: Memory, tmp_path: Path) -> Iterator[TestClient]:
    memory.create_bot("coach")
    app = create_app(memory, llm=ScriptedLLM(), imports_dir=tmp_path / "imports", max_import_mb=1)
    with TestClient(app, raise_server_exceptions=False) as client:
        yield client


def headers(memory: Memory, **scope) -> dict[str, str]:
    return {"Authorization": f"Bearer {create_key(memory, **scope).secret}"}


def finished(client: TestClient, location: str, key: dict[str, str]) -> dict:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        job = client.get(location, headers=key).json()
        if job["status"] not in ("queued", "running"):
            return job
        time.sleep(0.05)
    raise AssertionError(f"the import did not finish: {job}")


def test_a_person_imports_their_export_and_follows_it(
    client: TestClient, memory: Memory, tmp_path: Path
) -> None:
    ana = headers(memory, bot="coach", user="ana")
    upload = write_zip(tmp_path / "chatgpt.zip", chatgpt_export()).read_bytes()
    started = client.post("/v1/bots/coach/imports", files={"file": ("my export.zip", upload)},
                          headers=ana)  # fmt: skip
    assert started.status_code == 202, started.text
    body = started.json()
    assert body["format"] == "chatgpt" and body["file"] == "my export.zip"
    assert body["status"] in ("queued", "running") and body["user"] == "ana"
    location = started.headers["location"]
    assert location == f"/v1/bots/coach/imports/{body['id']}"

    job = finished(client, location, ana)
    lines = CHATGPT_LINES  # the 60,000-character paste among them, whole
    assert job["status"] == "done" and job["error"] is None
    assert job["added"] == job["lines_read"] == len(lines) and job["already_stored"] == 0
    assert job["bytes_read"] == job["total_bytes"] > 0
    assert job["conversations"] == 3 and job["skipped"]["on abandoned branches"] == 2
    assert [line.text for line in memory.history(user="ana", bot="coach")] == [
        line[3] for line in lines
    ]
    assert not list((tmp_path / "imports" / "uploads").iterdir())  # the upload is gone

    again = client.post("/v1/bots/coach/imports", files={"file": ("x.zip", upload)}, headers=ana)
    job = finished(client, again.headers["location"], ana)
    assert job["added"] == 0 and job["already_stored"] == len(lines)
    assert memory.count_lines() == len(lines)


def test_only_its_person_and_the_bots_keys_read_an_import(
    client: TestClient, memory: Memory, tmp_path: Path
) -> None:
    memory.create_bot("other")
    upload = json.dumps(claude_export()).encode()
    bot_key = headers(memory, bot="coach")
    refused = client.post("/v1/bots/coach/imports", files={"file": ("c.json", upload)},
                          headers=bot_key)  # fmt: skip
    assert refused.status_code == 422 and "user" in refused.text  # whose history is it?
    started = client.post("/v1/bots/coach/imports", files={"file": ("c.json", upload)},
                          data={"user": "ana", "format": "claude"}, headers=bot_key)  # fmt: skip
    assert started.status_code == 202
    location = started.headers["location"]
    assert finished(client, location, bot_key)["status"] == "done"
    assert client.get(location, headers=headers(memory, admin=True)).status_code == 200
    for stranger in (headers(memory, bot="coach", user="sam"), headers(memory, bot="other")):
        assert client.get(location, headers=stranger).status_code == 404
    other_bot = location.replace("/coach/", "/other/")
    assert client.get(other_bot, headers=headers(memory, admin=True)).status_code == 404


def test_a_file_that_is_no_export_is_refused_at_once_by_its_name(
    client: TestClient, memory: Memory, tmp_path: Path
) -> None:
    ana = headers(memory, bot="coach", user="ana")
    lines = b'{"text": "hello"}\n'
    answer = client.post("/v1/bots/coach/imports", files={"file": ("notes.jsonl", lines)},
                         headers=ana)  # fmt: skip
    assert answer.status_code == 400
    message = answer.json()["error"]["message"]
    assert (
        message.startswith("notes.jsonl: not a list of conversations") and "imports" not in message
    )
    chatgpt = {"file": ("c.json", json.dumps(chatgpt_export()))}
    wrong = client.post("/v1/bots/coach/imports", files=chatgpt, data={"format": "claude"},
                        headers=ana)  # fmt: skip
    assert wrong.status_code == 400 and "--format chatgpt" in wrong.json()["error"]["message"]
    assert not list((tmp_path / "imports" / "uploads").iterdir())


def test_an_export_past_the_limit_is_refused(client: TestClient, memory: Memory) -> None:
    ana = headers(memory, bot="coach", user="ana")
    big = b"[" + b" " * (1024 * 1024 + 10) + b"]"
    answer = client.post("/v1/bots/coach/imports", files={"file": ("big.json", big)}, headers=ana)
    assert answer.status_code == 413
    assert "limited to 1 MB" in answer.json()["error"]["message"]


def test_a_job_whose_server_stopped_reads_as_interrupted(tmp_path: Path) -> None:
    jobs = ImportJobs(tmp_path)
    job = ImportJob(jobs.new_id(), "coach", "ana", "c.json", "chatgpt", status="running")
    job.pid = 2**22 + 12345  # no such process
    jobs.save(job)
    loaded = jobs.load(job.id)
    assert loaded is not None and loaded.status == "interrupted"
    assert "send the file again" in str(loaded.error)
    assert jobs.load("../../etc/passwd") is None
