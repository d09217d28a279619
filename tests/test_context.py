"""context.assemble: the prompt never exceeds its budget, and cuts in the documented order."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest

from membot import Block, Line, Role
from membot.context import MIN_RECENT, Speakers, assemble, render_block

NOW = datetime(2024, 6, 1, 12, 0, tzinfo=UTC)
START = datetime(2024, 5, 1, 9, 0, tzinfo=UTC)
SENTENCE = (
    "alice works in logistics at a shipping company in Rotterdam and likes café au lait "
    "naïve 東京 🙂 42 forklifts containers the of and but yesterday tomorrow"
)
WORDS = SENTENCE.split(" ")


class Lines:
    """Makes lines with real token counts."""

    def __init__(self, counter, seed: int = 0) -> None:
        self.counter = counter
        self.rng = random.Random(seed)
        self.next_id = 1

    def text(self, words: int) -> str:
        return " ".join(self.rng.choice(WORDS) for _ in range(words))

    def line(self, thread: str, seq: int, text: str | None = None, role: Role | None = None):
        text = text if text is not None else self.text(self.rng.randint(1, 40))
        role = role or self.rng.choice([Role.HUMAN, Role.BOT])
        self.next_id += 1
        return Line(
            self.next_id,
            "membot",
            "alice",
            thread,
            seq,
            role,
            text,
            START + timedelta(minutes=self.next_id),
            self.counter.count(text),
        )

    def thread(self, name: str, count: int) -> list[Line]:
        return [self.line(name, seq) for seq in range(1, count + 1)]

    def block(self, name: str, count: int, score: float) -> Block:
        lines = tuple(self.thread(name, count))
        return Block(name, "alice", lines, score, (lines[0].seq,))


@pytest.fixture
def lines(token_counter) -> Lines:
    return Lines(token_counter)


def test_everything_fits_in_a_large_budget(lines: Lines, token_counter) -> None:
    recent = lines.thread("now", 5)
    new = lines.line("now", 6, "Where do I work?", Role.HUMAN)
    block = lines.block("earlier", 3, 0.7)

    prompt = assemble(recent, new, [block], token_counter, 4096, now=NOW)

    assert prompt.cut == {}
    assert prompt.recent == tuple(recent)
    assert prompt.blocks == (block,)
    assert prompt.text.endswith("HUMAN: Where do I work?\nAI:")
    assert render_block(block, Speakers()) in prompt.text
    assert '[thread "earlier", 2024-05-01' in prompt.text
    assert "It is now Saturday 2024-06-01 12:00 UTC." in prompt.text
    assert prompt.messages[1] == {"role": "user", "content": "Where do I work?"}
    assert prompt.messages[0]["role"] == "system"
    assert all(line.text in prompt.messages[0]["content"] for line in recent)
    assert prompt.tokens == token_counter.count(prompt.text) + 12


def test_recalled_blocks_appear_in_time_order(lines: Lines, token_counter) -> None:
    older = lines.block("older", 2, 0.5)
    newer = lines.block("newer", 2, 0.9)
    new = lines.line("now", 1, "hello", Role.HUMAN)
    prompt = assemble([], new, [newer, older], token_counter, 4096, now=NOW)
    assert prompt.text.index('"older"') < prompt.text.index('"newer"')
    assert "(it starts now)" not in prompt.text


def test_a_tight_budget_cuts_old_recent_lines_and_weak_blocks_first(lines, token_counter):
    recent = lines.thread("now", 30)
    new = lines.line("now", 31, "And what about the containers?", Role.HUMAN)
    said = [lines.text(25) for _ in range(4)]
    strong = Block(
        "strong",
        "alice",
        tuple(lines.line("strong", seq, text) for seq, text in enumerate(said[:3], 1)),
        0.9,
    )
    weak = Block(
        "weak",
        "alice",
        tuple(lines.line("weak", seq, text) for seq, text in enumerate(said, 1)),
        0.3,
    )
    seen = set()
    for budget in range(200, 1200, 20):
        prompt = assemble(recent, new, [weak, strong], token_counter, budget, now=NOW)

        assert prompt.tokens <= budget
        assert prompt.recent == tuple(recent[len(recent) - len(prompt.recent) :])
        if prompt.blocks:  # the newest lines of the conversation go in before any block
            assert len(prompt.recent) >= MIN_RECENT
        if weak in prompt.blocks:  # the better block, smaller too, is never cut for it
            assert strong in prompt.blocks
        assert prompt.cut.get("recalled_blocks", 0) == 2 - len(prompt.blocks)
        assert "new_line_tokens" not in prompt.cut
        seen.add(tuple(block.thread for block in prompt.blocks))
    assert seen == {(), ("strong",), ("strong", "weak")}


def test_a_new_line_too_long_for_the_budget_is_shortened_not_dropped(lines, token_counter):
    long_text = lines.text(600)
    new = lines.line("now", 3, long_text, Role.HUMAN)
    prompt = assemble(lines.thread("now", 2), new, [], token_counter, 200, now=NOW)

    kept = prompt.messages[1]["content"]
    assert prompt.tokens <= 200
    assert kept and long_text.startswith(kept)
    assert f"HUMAN: {kept}\nAI:" in prompt.text
    assert prompt.cut["new_line_tokens"] == token_counter.count(long_text) - token_counter.count(
        kept
    )


def test_speakers_label_lines(lines: Lines, token_counter) -> None:
    said = lines.line("now", 1, "Hi, I'm Caroline", Role.HUMAN)
    said = Line(
        said.id,
        said.bot,
        said.person,
        said.thread,
        said.seq,
        said.role,
        said.text,
        said.created_at,
        said.tokens,
        speaker="Caroline",
    )
    tool = lines.line("now", 2, "42 degrees", Role.TOOL)
    new = lines.line("now", 3, "thanks", Role.HUMAN)
    speakers = Speakers(human="ALICE", ai="MEMBOT")
    prompt = assemble([said, tool], new, [], token_counter, 1024, speakers, now=NOW)
    assert "Caroline: Hi, I'm Caroline\nTOOL: 42 degrees\nALICE: thanks\nMEMBOT:" in prompt.text
    assert "The MEMBOT has a conversation with the ALICE." in prompt.text


@pytest.mark.parametrize("seed", range(4))
def test_the_prompt_never_exceeds_the_budget(seed: int, token_counter) -> None:
    """Many random mixes of recent lines, blocks, line lengths and budgets."""
    lines = Lines(token_counter, seed)
    rng = lines.rng
    for _ in range(40):
        recent = lines.thread("now", rng.randint(0, 30))
        new_words = rng.choice([1, 8, 40, 400])
        new = lines.line("now", len(recent) + 1, lines.text(new_words), Role.HUMAN)
        blocks = [
            lines.block(f"t{n}", rng.randint(1, 8), rng.random()) for n in range(rng.randint(0, 6))
        ]
        budget = rng.choice([128, 129, 150, 200, 300, 512, 1000, 2048, rng.randint(128, 4000)])

        prompt = assemble(recent, new, blocks, token_counter, budget, now=NOW)

        assert prompt.tokens <= budget
        assert prompt.tokens == token_counter.count(prompt.text) + 12
        # The newest recent lines are the ones kept, contiguous up to the new line.
        assert prompt.recent == tuple(recent[len(recent) - len(prompt.recent) :])
        assert set(prompt.blocks) <= set(blocks)
        # The new line is always there, whole or as its beginning.
        kept = prompt.messages[1]["content"]
        assert kept and new.text.startswith(kept)
        assert prompt.text.endswith(f"HUMAN: {kept}\nAI:")
        # What was left out is reported, and only that.
        expected_cut = {
            "recent_lines": len(recent) - len(prompt.recent),
            "recalled_blocks": len(blocks) - len(prompt.blocks),
            "new_line_tokens": new.tokens - token_counter.count(kept),
        }
        assert prompt.cut == {name: value for name, value in expected_cut.items() if value}
