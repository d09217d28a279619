"""``membot keys create / list / revoke`` from the command line."""

from __future__ import annotations

import pytest

from membot import ConfigError, Memory
from membot.errors import AuthError
from membot.service.keys import authenticate


@pytest.fixture
def keys_cli(cli):
    return cli


@pytest.fixture
def memory_of_cli(keys_cli, make_memory) -> Memory:
    """The library's view of the store the commands write to."""
    return make_memory(path=keys_cli.db)


def test_create_prints_the_key_alone_on_stdout(keys_cli, memory_of_cli: Memory) -> None:
    result = keys_cli.ok("keys", "create", "--admin", "--name", "ops")
    secret = result.stdout.strip()
    assert result.stdout == secret + "\n"
    assert "only time it is shown" in " ".join(result.stderr.split())
    assert authenticate(memory_of_cli, secret).can_admin


def test_create_json_and_list_never_show_the_key(keys_cli, memory_of_cli: Memory) -> None:
    made = keys_cli.json(
        "keys", "create", "--bot", "membot", "--user", "alice", "--expires-days", "30"
    )
    assert (made["bot"], made["user"], made["scope"]) == ("membot", "alice", "person")
    assert authenticate(memory_of_cli, made["key"]).id == made["id"]

    (listed,) = keys_cli.json("keys", "list")
    assert listed["id"] == made["id"] and "key" not in listed
    plain = keys_cli.ok("keys", "list").stdout
    assert made["id"] in plain and "person alice of membot" in plain and "active" in plain
    for output in (plain, str(listed)):
        assert made["key"] not in output and made["key"][16:] not in output


def test_revoke_stops_the_key(keys_cli, memory_of_cli: Memory) -> None:
    made = keys_cli.json("keys", "create", "--bot", "membot")
    result = keys_cli.ok("keys", "revoke", made["id"])
    assert f"revoked key {made['id']}" in result.stderr
    assert "revoked" in keys_cli.ok("keys", "list").stdout
    with pytest.raises(AuthError, match="revoked"):
        authenticate(memory_of_cli, made["key"])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["create"], "say whom the key acts for"),
        (["create", "--user", "alice"], "needs their bot"),
        (["create", "--admin", "--bot", "membot"], "--admin alone"),
        (["create", "--bot", "membot", "--expires-days", "0"], "1 or more"),
        (["revoke", "nope"], "no API key has the id 'nope'"),
    ],
)
def test_mistakes_are_refused_with_what_to_do(keys_cli, args, message) -> None:
    result = keys_cli.run("keys", *args)
    assert result.exit_code != 0
    assert isinstance(result.exception, ConfigError)
    assert message in str(result.exception)
    assert keys_cli.json("keys", "list") == []
