"""The ``membot`` command line end to end, in-process, with the real bundled embedder.

Each command runs through ``typer.testing.CliRunner`` on a store in ``tmp_path``; the LLM is
``--dry-run`` or the scripted fake (``--llm script:PATH``). ``main()``'s own error handling is
tested with the installed script in ``test_cli_main.py``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from membot import (
    BotSettings,
    ConfigError,
    EmbedderMismatchError,
    ImportFormatError,
    Memory,
    ScriptedLLM,
)
from membot.eval import shared_data_dir
from membot.turn.bot import Bot

pytestmark = pytest.mark.slow

ALICE = "My name is Alice and I work in logistics."
LOCOMO = shared_data_dir() / "locomo" / "locomo_dev.json"


def flat(text: str) -> str:
    """Messages as one line: the console wraps long ones at its width."""
    return " ".join(text.split())


def recalled_texts(turn: dict) -> list[str]:
    return [line["text"] for block in turn["recalled"] for line in block["lines"]]


def test_alice_is_recalled_in_a_new_thread_but_never_for_bob(cli) -> None:
    assert cli.json("bot", "show")["settings"]["threshold"] == BotSettings().threshold
    cli.say(ALICE, "alice", "t1")

    asked = cli.say("Where do I work?", "alice", "t2")
    assert ALICE in recalled_texts(asked)
    (block,) = [block for block in asked["recalled"] if block["thread"] == "t1"]
    assert block["person"] == "alice" and block["score"] >= BotSettings().threshold

    bob = cli.say("Where do I work?", "bob", "t2")
    assert ALICE not in recalled_texts(bob)
    assert ALICE not in bob["prompt"]
    assert bob["matches"] == []


def test_a_recalled_block_stays_in_the_buffer_for_later_turns(cli) -> None:
    cli.say("I work in logistics at a shipping company in Rotterdam.", "alice", "t1")
    cli.say("What is the weather like today?", "alice", "t1")

    asked = cli.say(
        "Do you remember that I work in logistics at a shipping company?", "alice", "t2"
    )
    (block,) = asked["recalled"]
    assert block["thread"] == "t1" and block["carried_over"] is False

    later = cli.say("ok thanks", "alice", "t2")
    (kept,) = later["recalled"]
    assert kept["carried_over"] is True
    assert kept["lines"] == block["lines"] and kept["score"] == block["score"]
    assert later["matches"] == []


def test_seq_has_no_gaps_when_human_and_bot_lines_interleave(cli, script) -> None:
    llm = script("Hello Alice.", "Logistics sounds busy.", "Goodbye!", "Hi again.")
    for text in ("Hi!", "I work in logistics.", "Bye."):
        cli.say(text, "alice", "t1", llm=llm)
    cli.say("New thread here.", "alice", "t2", llm=llm)
    cli.say("Just noting this.", "alice", "t1")  # dry run: a human line with no reply

    history = cli.json("history", "--user", "alice")
    t1 = [line for line in history if line["thread"] == "t1"]
    assert [line["seq"] for line in t1] == [1, 2, 3, 4, 5, 6, 7]
    assert [line["role"] for line in t1] == ["human", "bot"] * 3 + ["human"]
    assert [line["text"] for line in t1][:2] == ["Hi!", "Hello Alice."]
    assert [(line["seq"], line["role"]) for line in history if line["thread"] == "t2"] == [
        (1, "human"),
        (2, "bot"),
    ]
    assert cli.json("history", "--user", "alice", "--thread", "t2")[1]["text"] == "Hi again."


def test_the_prompt_never_exceeds_a_small_budget(cli) -> None:
    cli.ok("bot", "set", "membot", "context_size", "556")  # 300 for the prompt
    # The full prompt's budget (the bundled model's small prompt caps replies at 64 tokens).
    cli.ok("bot", "set", "membot", "prompt_style", "full")
    cli.say(ALICE, "alice", "t1")
    cuts = []
    for number in range(12):
        turn = cli.say(
            f"Line {number}: the trucks left the depot in Rotterdam at dawn, carrying "
            f"containers of coffee and {number} pallets of spare parts for the port.",
            "alice",
            "t2",
        )
        assert turn["tokens"]["budget"] == 300
        assert turn["tokens"]["prompt"] <= 300
        assert "Now HUMAN says 'Line" in turn["prompt"]
        cuts.append(turn["cut"])
    assert cuts[-1].get("feed_lines", 0) > 0
    assert set(cuts[0]) <= {"history_hints", "summary"}


def test_say_json_has_the_whole_turn(cli, script, make_memory, minilm) -> None:
    cli.say(ALICE, "alice", "t1")
    cli.ok("bot", "set", "membot", "threshold", "0.2")
    dry = cli.say("Where do I work?", "alice", "t2")
    answered = cli.say("And my name?", "alice", "t2", llm=script("You are Alice."))

    assert dry["response"] == ""
    assert dry["reply_line"] is None
    assert answered["response"] == "You are Alice."
    assert answered["reply_line"]["role"] == "bot"
    for turn in (dry, answered):
        assert {"response", "recalled", "prompt", "tokens", "timings_ms", "cut"} <= set(turn)
        assert turn["user"] == "alice" and turn["thread"] == "t2" and turn["bot"] == "membot"
        block = turn["recalled"][0]
        assert {"thread", "score", "lines", "carried_over"} <= set(block)
        assert isinstance(block["score"], float)
        for line in block["lines"]:
            assert {"seq", "role", "text", "created_at"} <= set(line)
            assert line["created_at"].endswith("Z")
        assert isinstance(turn["prompt"], str) and ALICE in turn["prompt"]
        assert 0 < turn["tokens"]["prompt"] <= turn["tokens"]["budget"]
        timings = turn["timings_ms"]
        assert {"embed", "search", "assemble", "llm", "memory_total"} <= set(timings)
        assert all(isinstance(value, float) and value >= 0 for value in timings.values())
    assert dry["timings_ms"]["llm"] == 0

    # The Python API's Turn has the very same fields.
    memory = make_memory(minilm, cli.db)
    api = Bot(memory, ScriptedLLM(["Hi."])).turn("Where do I work?", user="alice", thread="t3")
    api_json = api.to_json()
    assert set(api_json) == set(answered)
    assert set(api_json["tokens"]) == set(answered["tokens"])
    assert set(api_json["timings_ms"]) == set(answered["timings_ms"])
    assert set(api_json["line"]) == set(answered["line"])


def test_a_failing_llm_exits_non_zero_and_keeps_the_line(cli, script) -> None:
    result = cli.run(
        "say",
        "Are you there?",
        "--user",
        "alice",
        "--thread",
        "t1",
        llm=script("!error the model is overloaded"),
    )
    assert result.exit_code != 0
    assert "error: the model is overloaded (your line was stored)" in flat(result.stderr)
    as_json = cli.run(
        "say",
        "Still there?",
        "--user",
        "alice",
        "--thread",
        "t1",
        "--json",
        llm=script("!error down again"),
    )
    assert as_json.exit_code != 0
    turn = json.loads(as_json.stdout)
    assert (turn["response"], turn["error"], turn["reply_line"]) == ("", "down again", None)
    history = cli.json("history", "--user", "alice")
    assert [(line["role"], line["text"]) for line in history] == [
        ("human", "Are you there?"),
        ("human", "Still there?"),
    ]


def test_search_json_lists_matches_without_storing_the_query(cli) -> None:
    cli.say(ALICE, "alice", "t1")
    cli.say("I collect stamps from Iceland.", "bob", "t1")

    found = cli.json("search", "which job in logistics", "--user", "alice")
    assert found[0]["text"] == ALICE
    assert (found[0]["user"], found[0]["thread"], found[0]["seq"]) == ("alice", "t1", 1)
    assert isinstance(found[0]["score"], float)
    everyone = cli.json("search", "stamps", "-k", "1")
    assert [match["user"] for match in everyone] == ["bob"]
    assert len(cli.json("history", "--user", "alice")) == 1
    assert cli.json("search", "anything", "--user", "nobody") == []


def locomo_slice(path: Path) -> Path:
    """The first two sessions of conversation conv-26, three turns each."""
    sample = json.loads(LOCOMO.read_text())[0]
    conversation = sample["conversation"]
    small = {key: conversation[key] for key in ("speaker_a", "speaker_b")}
    for number in (1, 2):
        small[f"session_{number}_date_time"] = conversation[f"session_{number}_date_time"]
        small[f"session_{number}"] = conversation[f"session_{number}"][:3]
    path.write_text(json.dumps([{"sample_id": sample["sample_id"], "conversation": small}]))
    return path


def test_import_locomo_then_search_and_history(cli, tmp_path: Path) -> None:
    result = cli.ok("import", str(locomo_slice(tmp_path / "slice.json")), "--format", "locomo")
    assert "imported 6 lines in 2 threads" in flat(result.stderr)

    history = cli.json("history", "--user", "Caroline")
    assert [line["thread"] for line in history] == ["conv-26/session_1"] * 3 + [
        "conv-26/session_2"
    ] * 3
    first = history[0]
    assert (first["seq"], first["speaker"], first["ref"]) == (1, "Caroline", "D1:1")
    assert first["created_at"] == "2023-05-08T13:56:00Z"
    assert history[3]["created_at"] == "2023-05-25T13:14:00Z"

    found = cli.json("search", "LGBTQ support group", "--user", "Caroline", "-k", "1")
    assert found[0]["ref"] == "D1:3"


def test_importing_a_file_again_adds_nothing_and_says_so(cli, tmp_path: Path) -> None:
    path = str(locomo_slice(tmp_path / "slice.json"))
    first = flat(cli.ok("import", path, "--format", "locomo").stderr)
    assert re.search(r"imported 6 lines in 2 threads: \d+ lines/s, [\d.]+ s", first)
    again = flat(cli.ok("import", path, "--format", "locomo").stderr)
    assert "imported 0 lines in 2 threads (6 were stored already)" in again
    assert len(cli.json("history", "--user", "Caroline")) == 6


def test_a_malformed_import_stores_nothing(cli, tmp_path: Path) -> None:
    cli.say("Already here.", "alice", "t1")
    bad = tmp_path / "bad.json"
    turns = [{"speaker": "A", "dia_id": "D1:1", "text": "hello"}]
    bad.write_text(json.dumps([{"sample_id": "x", "conversation": {"session_1": turns}}]))
    cli.json("history", "--user", "alice")

    result = cli.run("import", str(bad), "--format", "locomo", "--user", "alice")
    assert isinstance(result.exception, ImportFormatError)
    assert "not a LoCoMo conversation" in str(result.exception)
    result = cli.run("import", str(LOCOMO), "--format", "longmemeval", "--user", "alice")
    assert isinstance(result.exception, ImportFormatError)
    assert [line["text"] for line in cli.json("history", "--user", "alice")] == ["Already here."]


def test_forget_asks_first_and_removes_everything(cli) -> None:
    cli.say(ALICE, "alice", "t1")
    cli.say("I like sailing.", "alice", "t2")
    cli.say("I work in logistics too.", "bob", "t1")

    kept = cli.run("forget", "--user", "alice", input="n\n")
    assert kept.exit_code != 0 and "Forget everything 'alice' said?" in flat(kept.stderr)
    assert len(cli.json("history", "--user", "alice")) == 2

    one = cli.ok("forget", "--user", "alice", "--thread", "t1", input="y\n")
    assert "forgot 1 lines in 1 threads" in flat(one.stderr)
    assert [line["thread"] for line in cli.json("history", "--user", "alice")] == ["t2"]

    cli.ok("forget", "--user", "alice", "--yes")
    assert cli.json("history", "--user", "alice") == []
    assert cli.json("search", "logistics", "--user", "alice") == []
    assert [match["user"] for match in cli.json("search", "logistics")] == ["bob"]
    assert ALICE not in json.dumps(cli.say("Where do I work?", "alice", "t3"))


def test_bot_show_and_set(cli) -> None:
    shown = cli.json("bot", "show")
    assert shown == {"name": "membot", "settings": BotSettings().to_json()}

    result = cli.ok("bot", "set", "membot", "max_matches", "5")
    assert "membot: max_matches = 5" in flat(result.stderr)
    assert cli.json("bot", "show")["settings"]["max_matches"] == 5
    cli.ok("bot", "create", "other")  # a bot not made shows nothing (tests/test_cli_bots.py)
    assert cli.json("bot", "show", "other")["settings"]["max_matches"] == 3

    bad = cli.run("bot", "set", "membot", "threshold", "high")
    assert isinstance(bad.exception, ConfigError)
    assert "threshold wants a number, got 'high'" in str(bad.exception)
    unknown = cli.run("bot", "set", "membot", "colour", "blue")
    assert isinstance(unknown.exception, ConfigError)
    assert "unknown bot setting 'colour'" in str(unknown.exception)
    assert cli.json("bot", "show")["settings"]["threshold"] == BotSettings().threshold


def test_a_store_of_another_embedder_is_refused_until_reindexed(cli, make_memory, make_embedder):
    other = make_memory(make_embedder(name="tiny-hash", dimension=32), cli.db)
    other.add(ALICE, user="alice", thread="t1")
    other.add("I like sailing.", user="alice", thread="t2")

    refused = cli.run("search", "logistics", "--user", "alice")
    assert isinstance(refused.exception, EmbedderMismatchError)
    assert "tiny-hash" in str(refused.exception)
    assert "membot --embedder SPEC reindex" in str(refused.exception)

    unnamed = cli.run("reindex")  # the store's own embedder is no reason to re-embed
    assert isinstance(unnamed.exception, ConfigError)
    assert "--embedder" in str(unnamed.exception)
    result = cli.ok("--embedder", "minilm", "reindex")
    assert "re-embedded 2 lines with sentence-transformers/all-MiniLM-L6-v2" in flat(result.stderr)
    found = cli.json("search", "where do I work", "--user", "alice")
    assert found[0]["text"] == ALICE
    store = Memory(cli.db, embedder=make_embedder()).store
    assert store.get_meta("dimension") == "384"


def test_a_store_is_opened_with_the_embedder_its_vectors_were_made_by(cli) -> None:
    """No --embedder: the store's own (minilm-int8 here), where a spec makes it."""
    from membot.embed.onnx_minilm import INT8_NAME

    Memory(cli.db, embedder="minilm-int8").add(ALICE, user="alice", thread="t1")
    assert Memory(cli.db).embedder.name == INT8_NAME
    assert Memory(cli.db, embedder="minilm").embedder.name != INT8_NAME  # named wins
    found = cli.json("search", "where do I work", "--user", "alice")
    assert found[0]["text"] == ALICE  # searched with the int8 model: no mismatch
    refused = cli.run("--embedder", "minilm", "search", "work", "--user", "alice")
    assert isinstance(refused.exception, EmbedderMismatchError)


MARKUP = "my tag is [/] and [bold]not bold[/bold], see [@URL] :thumbs_up:"


def test_lines_that_look_like_console_markup_print_as_said(cli) -> None:
    """rich reads square brackets as styles: a line holding "[/]" crashed `history`."""
    cli.say(MARKUP, "ann", "[t]")
    history = cli.ok("history", "--user", "ann").stdout
    assert "[t]" in history and f"human: {MARKUP}" in flat(history)
    assert MARKUP in flat(cli.ok("search", "tag", "--user", "ann").stdout)
    cli.say("my folder is C:\\", "bo", "t\\")  # a backslash last: not doubled
    assert flat(cli.ok("history", "--user", "bo").stdout).endswith("human: my folder is C:\\")
    assert "bo/t\\#1 human my folder is C:\\" in cli.ok("search", "folder", "--user", "bo").stdout


def test_help_and_errors_keep_their_square_brackets(cli, monkeypatch, capsys) -> None:
    from membot.cli import main

    assert "openai:MODEL[@URL]" in flat(cli.ok("--help").stdout)
    monkeypatch.setattr("sys.argv", ["membot", "--db", str(cli.db), "reindex"])
    with pytest.raises(SystemExit):
        main()
    assert "openai:MODEL[@URL])" in flat(capsys.readouterr().err)


def test_the_llm_key_variable_can_be_named_in_the_environment(
    cli, openai_server, monkeypatch
) -> None:
    """MEMBOT_LLM_KEY_ENV, like --llm-key-env, names where an LLM's key is read from."""
    monkeypatch.setenv("MY_LLM_KEY", "sk-llm-789")
    monkeypatch.setenv("MEMBOT_LLM_KEY_ENV", "MY_LLM_KEY")
    cli.ok("say", "hello there", "--user", "u", "--thread", "t",
           llm=f"openai:m@{openai_server.base_url}")  # fmt: skip
    assert {request[2] for request in openai_server.requests} == {"Bearer sk-llm-789"}


def test_eval_refuses_a_report_path_it_cannot_write_before_the_run(cli, tmp_path: Path) -> None:
    """A folder as --out failed only after the whole run, with a traceback. The data file
    here cannot be evaluated at all, so the --out error shows the path was checked first."""
    data = tmp_path / "not-locomo.json"
    data.write_text("{}")
    folder = tmp_path / "reports"
    folder.mkdir()
    result = cli.run("eval", "locomo", str(data), "--out", str(folder))
    assert isinstance(result.exception, ConfigError), result.exception
    assert f"--out {folder} is a folder" in str(result.exception)
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    result = cli.run("eval", "locomo", str(data), "--out", str(blocked / "report.json"))
    assert isinstance(result.exception, ConfigError), result.exception
    assert "is not a folder" in str(result.exception)


def test_import_user_is_for_lines_that_name_none_and_its_help_says_so(cli, tmp_path) -> None:
    """--user was "Owner of the lines", yet a JSONL line's own user wins."""
    path = tmp_path / "lines.jsonl"
    path.write_text('{"text": "Mine.", "user": "filer", "thread": "t"}\n{"text": "Yours."}\n')
    cli.ok("import", str(path), "--user", "other")
    assert [x["text"] for x in cli.json("history", "--user", "filer")] == ["Mine."]
    assert [x["text"] for x in cli.json("history", "--user", "other")] == ["Yours."]
    shown = flat(cli.ok("import", "--help").stdout)
    assert "The person of lines that name none: a JSONL line's own 'user' wins" in shown


def test_a_missing_script_file_is_an_error(cli, tmp_path: Path) -> None:
    """It answered "(scripted reply)" to everything, and wrote the file."""
    missing = tmp_path / "no-script.json"
    result = cli.run("say", "hi", "-u", "u", "-t", "t", llm=f"script:{missing}")
    assert isinstance(result.exception, ConfigError), result.output
    assert f"the script file {missing} does not exist" in str(result.exception)
    assert not missing.exists()
    assert cli.json("history", "--user", "u") == []


def test_a_blank_tool_name_is_refused(cli) -> None:
    result = cli.run("tool", "31 C", "-u", "u", "-t", "t", "-n", " ")
    assert isinstance(result.exception, ConfigError), result.output
    assert "a tool result needs the tool's name" in str(result.exception)
    assert cli.json("history", "--user", "u") == []


def test_an_empty_search_is_refused(cli) -> None:
    cli.say("I work in logistics.", "u", "t")
    result = cli.run("search", " ", "-u", "u")
    assert isinstance(result.exception, ConfigError), result.output
    assert "nothing to search for" in str(result.exception)


def test_a_negative_setting_is_a_value_not_an_option(cli) -> None:
    """`bot set coach window_size -1` said "No such option: -1"."""
    negative = cli.run("bot", "set", "membot", "window_size", "-1")
    assert isinstance(negative.exception, ConfigError), negative.output
    assert "window_size must be 0 or more" in str(negative.exception)
    cli.ok("bot", "set", "membot", "threshold", "-0.1")
    cli.ok("bot", "set", "membot", "expand_before", "--", "2")
    settings = cli.json("bot", "show")["settings"]
    assert (settings["threshold"], settings["expand_before"]) == (-0.1, 2)
    assert "can follow `--` too" in flat(cli.ok("bot", "set", "--help").stdout)
