"""The prune, pairs and windows strategies: turn partners, pair and window units, their order
(as the benchmarks read a turn's recall)."""

from __future__ import annotations

import pytest

from membot import BotSettings, LineInput, Memory
from membot.index.vectors import Scope
from membot.model import Role
from membot.recall.chat import recall_for_turn
from membot.recall.layout import Layout, StoredLine
from membot.recall.pairs import PairUnits, UnitCache, turn_pairs
from membot.recall.ranked import ranked_lines, settings_for_ranking
from membot.recall.windows import WindowUnits, windows_of
from membot.store import ThreadKey
from membot.store.base import lines_between

H, B = Role.HUMAN, Role.BOT


def layout(*roles: Role, thread: int = 1) -> Layout:
    return Layout([StoredLine(seq, thread, seq, role, f"line {seq}", None)
                   for seq, role in enumerate(roles, start=1)])  # fmt: skip


def dialog(memory: Memory, *turns: tuple[Role, str], thread: str = "t1", user: str = "ann"):
    return [memory.add(text, user=user, thread=thread, role=role).id for role, text in turns]


def scope(memory: Memory, **values: object) -> Scope:
    return Scope.of(memory.store.bot_id("membot") or 0, None, **values)


def ranked(memory: Memory, strategy: str, query: str, where: Scope | None = None,
           **options: float) -> list[int]:  # fmt: skip
    settings = settings_for_ranking(strategy, options)
    return ranked_lines(memory.recall_source, settings, query, where or scope(memory))


def test_a_turn_partner_is_the_reply_after_a_human_line_or_the_line_before_a_bot_line() -> None:
    lines = layout(H, B, H, H, B, B)
    partner = {line.seq: (p.seq if (p := lines.partner(line)) else None)
               for line in lines.by_id.values()}  # fmt: skip
    assert partner == {1: 2, 2: 1, 3: None, 4: 5, 5: 4, 6: None}
    units = turn_pairs(lines)
    assert [[line.seq for line in unit] for unit in units] == [[1, 2], [3], [4, 5], [6]]


def test_lines_of_another_thread_are_no_partners() -> None:
    lines = Layout([*layout(H).by_id.values(), StoredLine(9, 2, 2, B, "x", None)])
    assert lines.partner(lines.by_id[1]) is None


@pytest.mark.parametrize(
    ("count", "size", "overlap", "expected"),
    [
        (14, 8, 2, [(1, 8), (7, 14)]),
        (15, 8, 2, [(1, 8), (7, 14), (13, 15)]),
        (10, 4, 1, [(1, 4), (4, 7), (7, 10)]),
        (3, 8, 2, [(1, 3)]),
        (4, 2, 0, [(1, 2), (3, 4)]),
    ],
)
def test_windows_cover_each_thread_with_the_given_overlap(
    count: int, size: int, overlap: int, expected: list[tuple[int, int]]
) -> None:
    units = windows_of(layout(*[H] * count), size, overlap)
    assert [(unit[0].seq, unit[-1].seq) for unit in units] == expected
    assert all([line.seq for line in unit] == list(range(unit[0].seq, unit[-1].seq + 1))
               for unit in units)  # fmt: skip


def test_a_window_reads_as_a_transcript_with_speakers() -> None:
    unit = (StoredLine(1, 1, 1, H, "hi", "Ann"), StoredLine(2, 1, 2, B, "hello", None))
    assert WindowUnits().text(unit) == "Ann: hi\nhello"
    assert PairUnits().text(unit) == "Ann: hi hello"
    with pytest.raises(ValueError, match="overlap"):
        WindowUnits(4, 4)


@pytest.mark.slow
def test_prune_brings_each_match_in_with_its_partner(make_memory, minilm) -> None:
    memory = make_memory(minilm)
    ids = dialog(
        memory,
        (H, "The weather is cold and rainy today."),
        (B, "Wear a warm coat then."),
        (H, "I adopted a puppy and named him Rex."),
        (B, "Congratulations, that is lovely!"),
        (H, "I also bought new running shoes."),
        (H, "They are blue."),
    )
    order = ranked(memory, "prune", "What is the name of my dog?")
    assert order[:2] == [ids[2], ids[3]]  # the match, then the bot's reply to it
    assert sorted(order) == sorted(ids)


@pytest.mark.slow
def test_pairs_find_a_question_by_its_answer_and_place_both(make_memory, minilm) -> None:
    memory = make_memory(minilm)
    ids = dialog(
        memory,
        (H, "What should I cook tonight?"),
        (B, "Try a mushroom risotto with parmesan."),
        (H, "My sister lives in Berlin."),
        (B, "Berlin is a great city."),
    )
    others = dialog(memory, (H, "I love risotto"), (B, "me too"), user="bob", thread="t2")
    ann = memory.store.person_id("ann")
    order = ranked(memory, "pairs", "Italian rice dish")
    assert order[:2] in ([ids[0], ids[1]], others)  # a risotto pair, whoever said it
    only_ann = Scope.of(memory.store.bot_id("membot") or 0, ann)
    order = ranked(memory, "pairs", "Italian rice dish", only_ann)
    assert order == [ids[0], ids[1], ids[2], ids[3]]  # the pair in seq order, Bob's left out


@pytest.mark.slow
def test_windows_place_the_best_window_in_order(make_memory, minilm) -> None:
    memory = make_memory(minilm)
    ids = dialog(
        memory,
        (H, "Good morning."),
        (B, "Good morning to you."),
        (H, "I am flying to Lisbon next week."),
        (B, "Portugal in spring is beautiful."),
        (H, "I will visit the tram museum there."),
        (B, "Enjoy the trip."),
        (H, "Now, about my taxes."),
    )
    question = "Which city am I travelling to?"
    order = ranked(memory, "windows", question, window_size=3, window_overlap=1)
    assert order[:3] == ids[2:5]  # the window of lines 3-5, in seq order
    assert sorted(order) == sorted(ids)


def test_unit_vectors_are_built_once_per_state_of_the_store(memory: Memory, embedder) -> None:
    dialog(memory, (H, "red kite"), (B, "a bird"), (H, "blue sea"), (B, "the ocean"))
    units = UnitCache(PairUnits())
    bot_id = memory.store.bot_id("membot") or 0
    units.embedded_units(memory.store, memory.embed, bot_id, None)
    units.embedded_units(memory.store, memory.embed, bot_id, None)
    assert embedder.calls.count(["red kite a bird", "blue sea the ocean"]) == 1
    dialog(memory, (H, "green tree"))
    assert [
        line.id for line in units.embedded_units(memory.store, memory.embed, bot_id, None)[0][-1]
    ] == [5]
    dialog(memory, (B, "an oak"))  # the unit "green tree" becomes "green tree an oak"
    units.embedded_units(memory.store, memory.embed, bot_id, None)
    assert ["green tree an oak"] in embedder.calls
    # Units that did not change were embedded once, whatever came after.
    assert sum(call.count("red kite a bird") for call in embedder.calls) == 1


def turn_scope(memory: Memory, user: str, thread: str, shared: bool = False) -> Scope:
    """A turn's scope, as ``Memory.recall`` gives it: the person's lines (every person's
    when the bot shares memory), the thread's last line in the feed."""
    store = memory.store
    last = store.last_lines(store.thread_id(ThreadKey("membot", user, thread)) or 0, 1)
    feed = (store.thread_id(ThreadKey("membot", user, thread)) or 0, last[0].seq)
    settings = BotSettings(share_across_people=shared)
    return Scope.of(store.bot_id("membot") or 0, store.person_id(user), settings, feed=feed)


def units_recalled(memory: Memory, strategy: str, query: str, where: Scope) -> set[str]:
    settings = BotSettings(strategy=strategy, threshold=0.1, max_matches=10)
    chosen = recall_for_turn(memory.recall_source, settings, query, memory.embed([query])[0], where)
    texts = set()
    for block in chosen.blocks:
        lines = lines_between(memory.store, block.source_thread_id, block.first_seq,
                              block.last_seq)  # fmt: skip
        texts |= {line.text for line in lines}
    return texts


@pytest.mark.parametrize("memory", ["sqlite", "postgresql"], indirect=True)
@pytest.mark.parametrize("strategy", ["pairs", "windows"])
def test_a_person_gets_units_of_their_own_lines_only(memory: Memory, strategy: str) -> None:
    dialog(memory, (H, "my cat Miso sleeps all day"), (B, "lazy cat Miso"), user="ann")
    dialog(memory, (H, "I have a cat too"), (B, "cat people"), user="bob", thread="t2")
    dialog(memory, (H, "what about the cat Miso"), user="bob", thread="now")

    bob = units_recalled(memory, strategy, "cat Miso", turn_scope(memory, "bob", "now"))

    assert "I have a cat too" in bob
    assert not bob & {"my cat Miso sleeps all day", "lazy cat Miso"}
    shared = turn_scope(memory, "bob", "now", shared=True)  # a bot that shares memory
    assert "my cat Miso sleeps all day" in units_recalled(memory, strategy, "cat Miso", shared)


def test_a_turn_reads_and_embeds_no_unit_of_another_persons_lines(memory: Memory, embedder):
    others = [LineInput(f"bob's line {n} about cats", user="bob", thread=f"b{n // 100}",
                        role=(H, B)[n % 2]) for n in range(1200)]  # fmt: skip
    memory.add_many(others)
    dialog(memory, (H, "my cat Miso"), (B, "a fine cat"), (H, "thanks"), user="ann")
    before = len(embedder.embedded)

    recalled = units_recalled(memory, "pairs", "cat Miso", turn_scope(memory, "ann", "t1"))

    assert recalled == {"my cat Miso", "a fine cat"}
    embedded = embedder.embedded[before:]
    assert "my cat Miso a fine cat" in embedded and not any("bob" in text for text in embedded)
    held = memory.recall_source.held_texts()
    assert held and not any("bob" in text for text in held)  # bob's lines were not read
