"""API keys: made once and stored as a hash, scoped to everything, a bot or one person,
refused when missing, malformed, unknown, revoked or expired."""

from __future__ import annotations

import hashlib
from datetime import timedelta

import pytest

from membot import ConfigError, Memory
from membot.errors import AuthError
from membot.model import utc_now
from membot.service.keys import KEY_PATTERN, authenticate, create_key, list_keys, revoke_key
from membot.store.sqlite_driver import sqlite3


def raw_rows(memory: Memory) -> list[tuple]:
    with sqlite3.connect(memory.store.path) as db:
        rows = db.execute("SELECT * FROM api_keys").fetchall()
    db.close()
    return rows


def reason_for(memory: Memory, token: str | None, **options) -> str:
    with pytest.raises(AuthError) as caught:
        authenticate(memory, token, **options)
    return caught.value.reason


def test_only_a_hash_of_the_key_is_stored(memory: Memory) -> None:
    new = create_key(memory, bot="membot", user="alice", label="alice's phone")
    assert KEY_PATTERN.fullmatch(new.secret)
    (row,) = raw_rows(memory)
    assert hashlib.sha256(new.secret.encode()).hexdigest() in row
    assert not any(new.secret in str(value) for value in row)
    memory.close()
    for file in memory.store.path.parent.glob(memory.store.path.name + "*"):  # with WAL files
        assert new.secret.encode() not in file.read_bytes()


def test_the_secret_is_kept_out_of_reprs_and_listings(memory: Memory) -> None:
    new = create_key(memory, admin=True)
    assert new.secret not in repr(new)
    assert new.to_json()["key"] == new.secret
    assert new.secret[3:15] == new.key.id  # the key says which one it is
    (listed,) = list_keys(memory)
    assert listed == new.key
    assert "key" not in listed.to_json() and new.secret not in str(listed.to_json())


def test_a_made_key_authenticates_as_itself(memory: Memory) -> None:
    new = create_key(memory, bot="membot", user="alice")
    key = authenticate(memory, new.secret)
    assert (key.id, key.scope, key.bot, key.user) == (new.key.id, "person", "membot", "alice")
    assert authenticate(memory, f"  {new.secret}\n").id == new.key.id


def test_json_of_a_new_key_has_its_id_secret_bot_and_user(memory: Memory) -> None:
    shown = create_key(memory, bot="membot", expires_days=7).to_json()
    assert {"id", "key", "bot", "user"} <= shown.keys()
    assert (shown["bot"], shown["user"], shown["scope"]) == ("membot", None, "bot")
    assert shown["expires_at"].endswith("Z")


SCOPE_CASES = [
    # (bot, user) asked for: admin, bot key of membot, person key of alice at membot
    (("membot", "alice"), (True, True, True)),
    (("membot", "bob"), (True, True, False)),
    (("membot", None), (True, True, False)),
    (("other", "alice"), (True, False, False)),
    (("other", None), (True, False, False)),
    ((None, None), (True, False, False)),
    ((None, "alice"), (True, False, False)),
]


@pytest.mark.parametrize(("asked", "allowed"), SCOPE_CASES)
def test_each_scope_allows_only_its_own(memory: Memory, asked, allowed) -> None:
    keys = [
        create_key(memory, admin=True).key,
        create_key(memory, bot="membot").key,
        create_key(memory, bot="membot", user="alice").key,
    ]
    assert [key.scope for key in keys] == ["admin", "bot", "person"]
    assert [key.can_admin for key in keys] == [True, False, False]
    assert tuple(key.allows(*asked) for key in keys) == allowed


@pytest.mark.parametrize("token", [None, "", "   "])
def test_a_missing_key_is_refused(memory: Memory, token) -> None:
    assert reason_for(memory, token) == "missing"


def test_a_malformed_key_is_refused_before_the_store_is_asked(memory: Memory) -> None:
    secret = create_key(memory, admin=True).secret
    for token in (
        f"Bearer {secret}",
        secret[:-1],
        secret + "x",
        "mb_",
        "password",
        "mb_!" + secret[4:],
    ):
        assert reason_for(memory, token) == "malformed", token


def test_a_key_this_store_never_made_is_unknown(memory: Memory, make_memory, tmp_path) -> None:
    other = make_memory(path=tmp_path / "other.db")
    stranger = create_key(other, admin=True).secret
    create_key(memory, admin=True)
    assert reason_for(memory, stranger) == "unknown"
    assert reason_for(memory, "mb_0123456789ab_" + "A" * 43) == "unknown"


def test_a_revoked_key_is_refused_and_revoking_again_is_fine(memory: Memory) -> None:
    new = create_key(memory, bot="membot")
    kept = create_key(memory, bot="membot")
    revoked = revoke_key(memory, new.key.id)
    assert revoked.revoked_at is not None and revoked.state() == "revoked"
    assert revoke_key(memory, new.key.id).revoked_at == revoked.revoked_at
    assert reason_for(memory, new.secret) == "revoked"
    assert authenticate(memory, kept.secret).id == kept.key.id


def test_revoking_an_unknown_id_says_where_to_look(memory: Memory) -> None:
    with pytest.raises(ConfigError, match="membot keys list"):
        revoke_key(memory, "nope")


def test_a_key_stops_working_when_it_expires(memory: Memory) -> None:
    new = create_key(memory, bot="membot", expires_days=1)
    made = new.key.created_at
    assert new.key.expires_at == made + timedelta(days=1)
    assert authenticate(memory, new.secret, now=made + timedelta(hours=23)).id == new.key.id
    assert reason_for(memory, new.secret, now=made + timedelta(days=1)) == "expired"
    assert reason_for(memory, new.secret, now=made + timedelta(days=400)) == "expired"
    assert list_keys(memory)[0].state(made + timedelta(days=2)) == "expired"


def test_a_key_without_expiry_works_years_later(memory: Memory) -> None:
    new = create_key(memory, admin=True)
    assert authenticate(memory, new.secret, now=utc_now() + timedelta(days=3650)).can_admin


def test_the_last_use_is_recorded_at_most_once_a_minute(memory: Memory) -> None:
    new = create_key(memory, bot="membot")
    start = new.key.created_at
    authenticate(memory, new.secret, now=start + timedelta(seconds=1))
    authenticate(memory, new.secret, now=start + timedelta(seconds=30))
    assert list_keys(memory)[0].last_used_at == start + timedelta(seconds=1)
    authenticate(memory, new.secret, now=start + timedelta(minutes=2))
    assert list_keys(memory)[0].last_used_at == start + timedelta(minutes=2)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({}, "say whom the key acts for"),
        ({"admin": True, "bot": "membot"}, "--admin alone"),
        ({"admin": True, "user": "alice"}, "--admin alone"),
        ({"user": "alice"}, "needs their bot"),
        ({"bot": " "}, "bot name is empty"),
        ({"bot": "membot", "user": ""}, "user name is empty"),
        ({"bot": "membot", "expires_days": 0}, "1 or more, not 0"),
        ({"bot": "membot", "expires_days": -3}, "1 or more, not -3"),
        ({"bot": "membot", "expires_days": 10**9}, "past the year 9999"),
    ],
)
def test_a_key_with_a_muddled_scope_is_not_made(memory: Memory, options, message) -> None:
    with pytest.raises(ConfigError, match=message):
        create_key(memory, **options)
    assert list_keys(memory) == []


def test_keys_are_listed_oldest_first_with_their_state(memory: Memory) -> None:
    first = create_key(memory, admin=True, label="ops")
    second = create_key(memory, bot="membot", user="alice")
    revoke_key(memory, second.key.id)
    listed = list_keys(memory)
    assert [key.id for key in listed] == [first.key.id, second.key.id]
    assert [key.state() for key in listed] == ["active", "revoked"]
    assert listed[0].to_json()["label"] == "ops"


def test_membots_own_key_labels_are_not_given_to_other_keys(memory) -> None:
    """A key labelled as the sign-in link's was spent at the sign-in route like one."""
    from membot.service.keys import SESSION_LABEL, SIGNIN_LABEL

    for label in (SIGNIN_LABEL, SESSION_LABEL):
        with pytest.raises(ConfigError, match="membot's own sign-in keys"):
            create_key(memory, admin=True, label=label)
    assert list_keys(memory) == []
