"""Keys and phone numbers are stored only hashed and never logged: every log record at DEBUG
(membot's and every library's) over making keys, using them, refusing bad ones, signing in
and texting is searched for them, and so are the store's raw files."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from membot import Memory, ScriptedLLM
from membot.server import create_app
from membot.server.sms_route import PATH, TwilioSettings
from membot.service import create_key, create_signin_key, revoke_key

TOKEN = "0123456789abcdef0123456789abcdef"  # Twilio's auth token
SECRET = "the server's secret for hashing numbers"
PUBLIC_URL = "https://membot.example.org"
PERSON = "+15550100001"
NUMBER_FORMS = (PERSON, PERSON.lstrip("+"), PERSON[-10:])


def text_message(body: str, number: int) -> tuple[dict[str, str], dict[str, str]]:
    """The form Twilio posts for a text, and its signature header."""
    from twilio.request_validator import RequestValidator

    form = {
        "MessageSid": f"SM{number:032x}",
        "AccountSid": "AC" + "0" * 32,
        "From": PERSON,
        "To": "+15550109999",
        "Body": body,
        "NumMedia": "0",
    }
    signed = RequestValidator(TOKEN).compute_signature(PUBLIC_URL + PATH, form)
    return form, {"X-Twilio-Signature": signed}


def store_bytes(folder: Path) -> bytes:
    # Every file of the store, those in folders beside it too (the turns' lock files).
    files = [path for path in sorted(folder.glob("memory.db*")) if path.is_file()]
    files += sorted(path for path in folder.glob("memory.db*/**/*") if path.is_file())
    return b"".join(path.read_bytes() for path in files)


def test_keys_and_numbers_are_in_no_log_and_stored_only_hashed(
    memory: Memory, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)  # the root logger: every library's records too
    memory.create_bot("coach", sms_number="+15550109999")
    admin = create_key(memory, admin=True)
    person = create_key(memory, bot="coach", user="sam")
    revoked = create_key(memory, bot="coach")
    revoke_key(memory, revoked.key.id)
    signin = create_signin_key(memory)
    wrong = admin.secret[:-4] + "AAAA"  # a key's shape with the wrong secret
    twilio = TwilioSettings(auth_token=TOKEN, account_sid="AC" + "0" * 32, secret=SECRET)
    app = create_app(memory, llm=ScriptedLLM(), public_url=PUBLIC_URL, twilio=twilio)
    with TestClient(app) as client:
        as_person = {"Authorization": f"Bearer {person.secret}"}
        turn = {"thread": "t", "text": "I run on Sundays"}
        assert client.post("/v1/bots/coach/turns", json=turn, headers=as_person).status_code == 200
        assert client.get("/v1/me", headers={"Authorization": f"Bearer {admin.secret}"}).is_success
        for bad in (wrong, revoked.secret, "mb_nonsense"):
            assert client.get("/v1/me", headers={"Authorization": f"Bearer {bad}"}).status_code in (
                401,
                403,
            )
        redeemed = client.post(
            "/v1/web/signin", headers={"Authorization": f"Bearer {signin.secret}"}
        )
        assert redeemed.status_code == 200
        web_key = redeemed.json()["key"]
        for number, body in enumerate(("Hi, I run on Sundays", "HELP", "STOP", "START")):
            form, signed = text_message(body, number)
            assert client.post(PATH, data=form, headers=signed).status_code == 200
        forged, _ = text_message("forged", 99)
        assert (
            client.post(PATH, data=forged, headers={"X-Twilio-Signature": "x"}).status_code == 403
        )

    secrets = [admin.secret, person.secret, revoked.secret, signin.secret, wrong, web_key]
    secrets += [key.split("_", 2)[2] for key in secrets]  # the secret part alone
    logged = caplog.text + "".join(str(record.args) for record in caplog.records)
    assert len(caplog.records) > 0
    for secret in [*secrets, *NUMBER_FORMS, SECRET, TOKEN]:
        assert secret not in logged, f"{secret[:8]}… was logged"
    stored = store_bytes(tmp_path)
    assert memory.people("coach")  # the texter is a person, by a keyed hash of the number
    for secret in [*secrets, *NUMBER_FORMS, SECRET, TOKEN]:
        assert secret.encode() not in stored, f"{secret[:8]}… is in the store's files"
