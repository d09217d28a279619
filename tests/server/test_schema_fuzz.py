"""Schemathesis against the server's own OpenAPI schema, in process: no 5xx, and every
answer (errors too) as the schema declares it."""

from __future__ import annotations

import os
from pathlib import Path

import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from membot import Memory, ScriptedLLM
from membot.server import create_app
from membot.server.sms_route import TwilioSettings
from membot.service.keys import create_key

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
]
# Names the store holds, for a share of the cases, so requests reach past "no such bot".
KNOWN = {"bot": "coach", "user": "alice", "thread": "t1", "name": "notes.txt"}
# Per operation and run; MEMBOT_FUZZ_EXAMPLES=500 for a deeper search than CI's.
EXAMPLES = int(os.environ.get("MEMBOT_FUZZ_EXAMPLES", "25"))


def cases(operation):
    names = [parameter.name for parameter in operation.path_parameters]
    known = {name: KNOWN[name] for name in names if name in KNOWN}
    ways = [
        operation.as_strategy(GenerationMode.POSITIVE),
        operation.as_strategy(GenerationMode.NEGATIVE),
    ]
    if known:
        ways.append(operation.as_strategy(GenerationMode.POSITIVE, path_parameters=known))
    return st.one_of(ways)


def seed(memory: Memory, folder: Path) -> None:
    """The bot, person, thread and document of :data:`KNOWN` (again, after a case deleted
    them), so every operation meets them."""
    if not memory.has_bot("coach"):
        memory.create_bot("coach")
    if memory.thread_state(bot="coach", user="alice", thread="t1") is None:
        memory.add("I run on Sundays", user="alice", thread="t1", bot="coach")
    if not memory.documents("coach"):
        notes = folder / "notes.txt"
        notes.write_text("Long runs build endurance.", encoding="utf-8")
        memory.add_documents([notes], bot="coach")


def test_every_operation_answers_as_declared(memory: Memory, tmp_path: Path) -> None:
    # The SMS route set up (else it answers 503 by design): unsigned requests get 403.
    twilio = TwilioSettings(auth_token="test-token", secret="a secret of 16+ characters")
    app = create_app(memory, llm=ScriptedLLM(), public_url="http://testserver", twilio=twilio)
    headers = {"Authorization": f"Bearer {create_key(memory, admin=True).secret}"}
    schema = schemathesis.openapi.from_asgi("/openapi.json", app)
    failures = []
    for result in schema.get_all_operations():
        operation = result.ok()
        seed(memory, tmp_path)

        @given(case=cases(operation))
        @settings(
            max_examples=EXAMPLES,
            deadline=None,
            derandomize=True,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        def check(case) -> None:
            case.call_and_validate(headers=headers, checks=CHECKS)

        try:
            check()
        except (Exception, BaseExceptionGroup) as error:
            failures.append(f"{operation.label}: {error}")
    assert not failures, "\n\n".join(failures)
