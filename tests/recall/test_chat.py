"""Recall in a live turn: each strategy's keep-or-drop rule, scope, feed and options."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest

from membot import BotSettings, ConfigError, Memory, Role
from membot.index.vectors import Scope
from membot.recall.chat import ChatRecall, recall_for_turn, strategy_named, strategy_names
from membot.store import ThreadKey
from membot.store.base import lines_between

QUERY = "tell me about my cat Miso"
OLD = [
    ("I adopted a cat named Miso", Role.HUMAN),
    ("Miso is a lovely name for a cat", Role.BOT),
    ("my sister lives in Lisbon", Role.HUMAN),
    ("Lisbon has great wine", Role.BOT),
    ("I work as a nurse at night", Role.HUMAN),
    ("night shifts are hard", Role.BOT),
    ("the cat Miso sleeps all day", Role.HUMAN),
    ("lazy Miso", Role.BOT),
]


def settings_of(**values: Any) -> BotSettings:
    return BotSettings().with_values(values)


def recall(
    memory: Memory,
    text: str,
    settings: BotSettings,
    user: str = "alice",
    thread: str = "now",
    keep: bool = False,
) -> ChatRecall:
    """Store ``text`` as the new line and recall for it, with the scope ``Memory.recall`` uses;
    the new line's thread is forgotten after unless ``keep`` (so later calls do not find it)."""
    line = memory.add(text, user=user, thread=thread)
    thread_id = memory.store.thread_id(ThreadKey("membot", user, thread))
    feed = (thread_id or 0, line.seq - settings.window_size)
    scope = Scope.of(memory.store.bot_id("membot") or 0, memory.store.person_id(user), settings,
                     feed=feed)  # fmt: skip
    chosen = recall_for_turn(memory.recall_source, settings, text, memory.embed([text])[0], scope)
    if not keep:
        memory.forget(user=user, thread=thread)
    return chosen


def cosine(memory: Memory, a: str, b: str) -> float:
    first, second = memory.embed([a, b])
    return float(np.dot(first, second))


def add_thread(memory: Memory, lines, user: str = "alice", thread: str = "old") -> list[int]:
    return [memory.add(text, user=user, thread=thread, role=role).id for text, role in lines]


def recalled_ids(memory: Memory, chosen: ChatRecall) -> set[int]:
    ids = set()
    for block in chosen.blocks:
        for line in lines_between(memory.store, block.source_thread_id, block.first_seq,
                                               block.last_seq):  # fmt: skip
            ids.add(line.id)
    return ids


@pytest.mark.parametrize("strategy", strategy_names())
def test_every_strategy_finds_the_cat_and_respects_the_threshold(memory, strategy) -> None:
    ids = add_thread(memory, OLD)
    threshold = 0.3
    chosen = recall(memory, QUERY, settings_of(strategy=strategy, threshold=threshold))
    assert chosen.hits, strategy
    assert all(hit.score >= threshold for hit in chosen.hits)
    if strategy in ("lines", "prune", "pairs", "windows"):  # the others: fused order
        assert [hit.score for hit in chosen.hits] == sorted(
            (hit.score for hit in chosen.hits), reverse=True
        )
    texts = dict(zip(ids, (text for text, _ in OLD), strict=True))
    assert {hit.line_id for hit in chosen.hits} <= set(ids)
    assert any("Miso" in texts[hit.line_id] for hit in chosen.hits)
    if strategy in ("lines", "prune", "hybrid", "blend", "bm25"):
        # A line's score is its own cosine with the new line.
        for hit in chosen.hits:
            assert hit.score == pytest.approx(cosine(memory, QUERY, texts[hit.line_id]), abs=1e-5)


@pytest.mark.parametrize("strategy", ["lines", "hybrid", "blend", "bm25", "prune"])
def test_lines_below_the_threshold_are_not_kept(memory, strategy) -> None:
    ids = add_thread(memory, OLD)
    scores = {i: cosine(memory, QUERY, text) for i, (text, _) in zip(ids, OLD, strict=True)}
    threshold = sorted(scores.values())[-2] + 1e-4  # only the best line reaches it
    lexical = ("hybrid", "blend", "bm25")
    options = {"strategy.lexical_margin": 0} if strategy in lexical else {}
    chosen = recall(memory, QUERY, settings_of(strategy=strategy, threshold=threshold, **options))
    (best,) = [i for i, score in scores.items() if score >= threshold]
    assert [hit.line_id for hit in chosen.hits] == [best]


@pytest.mark.parametrize("strategy", strategy_names())
def test_an_unrelated_line_recalls_nothing(memory, strategy) -> None:
    add_thread(memory, OLD)
    chosen = recall(memory, "quantum chromodynamics lecture", settings_of(strategy=strategy))
    assert chosen == ChatRecall((), ())


@pytest.mark.parametrize("strategy", strategy_names())
def test_max_matches_is_respected(memory, strategy) -> None:
    says = ("naps", "purrs", "eats", "hides", "climbs", "plays")  # not duplicates of each other
    for thread, word in enumerate(says):
        said = [(f"cat Miso {word}", Role.HUMAN), ("ok", Role.BOT)]
        add_thread(memory, said, thread=f"t{thread}")
    for limit in (0, 1, 2):
        settings = settings_of(strategy=strategy, threshold=0.2, max_matches=limit)
        chosen = recall(memory, QUERY, settings, thread=f"now{limit}")
        assert len(chosen.hits) == limit, (strategy, limit)
        assert len(chosen.blocks) <= limit


@pytest.mark.parametrize("strategy", strategy_names())
def test_the_feed_is_never_recalled(memory, strategy) -> None:
    """The new line's window_size lines before it are in the prompt already (a window unit
    holding feed lines is skipped whole, so window 2 / overlap 0 leaves line 1 recallable)."""
    settings = settings_of(strategy=strategy, threshold=0.2, window_size=2, window_overlap=0,
                           expand_before=0, expand_after=0)  # fmt: skip
    older = add_thread(memory, [("cat Miso older", Role.HUMAN), ("fine", Role.BOT)], thread="now")
    filler = add_thread(memory, [("x1", Role.HUMAN), ("x2", Role.BOT)], thread="now")
    feed = add_thread(memory, [("cat Miso again", Role.HUMAN)], thread="now")
    chosen = recall(memory, QUERY, settings, thread="now", keep=True)
    new_line = memory.history(user="alice", thread="now")[-1]
    assert new_line.seq == 6
    ids = recalled_ids(memory, chosen)
    assert feed[0] not in ids and filler[1] not in ids and new_line.id not in ids
    assert {hit.line_id for hit in chosen.hits} & {*feed, *filler, new_line.id} == set()
    assert older[0] in ids  # scrolled off: recallable again


@pytest.mark.parametrize("strategy", strategy_names())
def test_another_persons_lines_only_with_shared_memory(memory, strategy) -> None:
    bobs = add_thread(memory, [("my cat Miso is grey", Role.HUMAN), ("nice", Role.BOT)],
                      user="bob")  # fmt: skip
    alone = recall(memory, QUERY, settings_of(strategy=strategy, threshold=0.2))
    assert alone == ChatRecall((), ())
    shared = recall(
        memory, QUERY, settings_of(strategy=strategy, threshold=0.2, share_across_people=True),
        thread="again",
    )  # fmt: skip
    assert bobs[0] in recalled_ids(memory, shared)


@pytest.mark.parametrize("strategy", strategy_names())
def test_tool_lines_are_recalled_only_when_asked(memory, strategy) -> None:
    add_thread(memory, [("weather for cat Miso walk: sunny", Role.TOOL)])
    plain = recall(memory, QUERY, settings_of(strategy=strategy, threshold=0.2))
    assert plain.hits == ()
    with_tools = settings_of(strategy=strategy, threshold=0.2, recall_roles="human,bot,tool")
    assert recall(memory, QUERY, with_tools, thread="again").hits != ()


def lexical_case(memory: Memory) -> tuple[int, int, float]:
    """Two old lines at one cosine with the query: one shares its rare word, one a word
    that many lines share. Returns (rare line id, common line id, their cosine)."""
    query = "where is the zebra"
    rare = memory.add("zebra alpha beta gamma", user="alice", thread="old").id
    common = memory.add("where delta epsilon kappa", user="alice", thread="old").id
    for n in range(6):
        memory.add(f"where {n} lambda mu nu omicron pi rho", user="alice", thread="fill")
    score = cosine(memory, query, "zebra alpha beta gamma")
    assert score == pytest.approx(cosine(memory, query, "where delta epsilon kappa"))
    return rare, common, score


@pytest.mark.parametrize("strategy", ["hybrid", "blend", "bm25"])
def test_a_shared_rare_word_lowers_the_bar_by_the_margin(memory, strategy) -> None:
    rare, common, score = lexical_case(memory)
    threshold = score + 0.05  # both lines fall short of it, within the margin of 0.1
    settings = settings_of(strategy=strategy, threshold=threshold, expand_before=0,
                           expand_after=0, **{"strategy.lexical_top": 1})  # fmt: skip
    chosen = recall(memory, "where is the zebra", settings)
    assert [hit.line_id for hit in chosen.hits] == [rare]
    assert chosen.hits[0].score == pytest.approx(score)
    assert common not in recalled_ids(memory, chosen)

    dense = settings_of(strategy="lines", threshold=threshold)
    assert recall(memory, "where is the zebra", dense, thread="n2").hits == ()


@pytest.mark.parametrize("strategy", ["hybrid", "blend", "bm25"])
def test_the_margin_and_the_lexical_top_are_read_from_strategy_options(memory, strategy) -> None:
    _, _, score = lexical_case(memory)
    threshold = score + 0.05
    no_margin = settings_of(strategy=strategy, threshold=threshold,
                            **{"strategy.lexical_margin": 0.0})  # fmt: skip
    assert recall(memory, "where is the zebra", no_margin).hits == ()
    too_small = settings_of(strategy=strategy, threshold=score + 0.2)  # beyond the margin
    assert recall(memory, "where is the zebra", too_small, thread="n2").hits == ()
    none_lexical = settings_of(strategy=strategy, threshold=threshold,
                               **{"strategy.lexical_top": 0})  # fmt: skip
    assert recall(memory, "where is the zebra", none_lexical, thread="n3").hits == ()


def test_blend_orders_equal_lines_by_their_neighbours(memory) -> None:
    """Two lines at one cosine: the one whose neighbours are about the question comes first."""
    lively = add_thread(memory, [("Miso the cat purrs", Role.BOT), ("my cat Miso", Role.HUMAN),
                                 ("cats like Miso sleep a lot", Role.BOT)], thread="b")  # fmt: skip
    quiet = add_thread(memory, [("ok", Role.BOT), ("my cat Miso", Role.HUMAN),
                                ("sure", Role.BOT)], thread="a")  # fmt: skip
    settings = settings_of(strategy="blend", threshold=0.3, max_matches=10)
    chosen = recall(memory, "my cat Miso", settings)
    # The two copies are one match: the one first in blend's order stands for both.
    (copy,) = [hit for hit in chosen.hits if hit.line_id in (lively[1], quiet[1])]
    assert (copy.line_id, copy.duplicates) == (lively[1], 1)
    without = settings_of(strategy="blend", threshold=0.3, max_matches=10,
                          **{"strategy.neighbour_weight": 0.0})  # fmt: skip
    plain = recall(memory, "my cat Miso", without, thread="n2").hits
    (copy,) = [hit for hit in plain if hit.line_id in (lively[1], quiet[1])]
    assert (copy.line_id, copy.duplicates) == (quiet[1], 1)  # a tie keeps the most recent


def test_blend_leaves_stopwords_out_of_bm25(memory) -> None:
    """The first line shares only stopwords with "what did I eat": BM25 gives it nothing."""
    stop = memory.add("what did I say about the weather", user="alice", thread="old").id
    memory.add("lorem ipsum", user="alice", thread="old")
    settings = settings_of(strategy="blend", threshold=0.99,
                           **{"strategy.lexical_margin": 1.0})  # fmt: skip
    assert recall(memory, "what did I eat", settings).hits == ()
    lexical = recall(memory, "what did I say", settings, thread="n2")
    assert [hit.line_id for hit in lexical.hits] == [stop]  # "say" is no stopword


def test_strategy_options_come_from_the_stored_profile(memory) -> None:
    rare, _, score = lexical_case(memory)
    memory.configure_bot(threshold=score + 0.05, **{"strategy.lexical_margin": 0.0})
    line = memory.add("where is the zebra", user="alice", thread="n1")
    assert memory.recall(line).matches == ()
    memory.forget(user="alice", thread="n1")
    memory.configure_bot(**{"strategy.lexical_margin": 0.1, "strategy.lexical_top": 1})
    assert memory.bot_settings().option("lexical_margin", -1) == 0.1
    line = memory.add("where is the zebra", user="alice", thread="n2")
    assert [match.line.id for match in memory.recall(line).matches] == [rare]


def test_prune_brings_each_match_with_its_turn_partner_only(memory) -> None:
    ids = add_thread(memory, OLD)
    settings = settings_of(strategy="prune", threshold=0.3, max_matches=1)
    chosen = recall(memory, "I adopted a cat named Miso", settings)
    (hit,) = chosen.hits
    assert hit.line_id == ids[0]
    (block,) = chosen.blocks
    assert (block.first_seq, block.last_seq, block.matched_seqs) == (1, 2, (1,))
    bot_side = recall(memory, "lazy Miso", settings, thread="n2")
    (block,) = bot_side.blocks
    assert (block.first_seq, block.last_seq, block.matched_seqs) == (7, 8, (8,))


def test_pairs_bring_the_exchange_whole(memory) -> None:
    ids = add_thread(memory, OLD)
    chosen = recall(memory, "sister Lisbon", settings_of(strategy="pairs", threshold=0.3))
    assert {hit.line_id for hit in chosen.hits} <= {ids[2], ids[3]}
    assert [(b.first_seq, b.last_seq) for b in chosen.blocks] == [(3, 4)]


def test_windows_bring_their_window_whole(memory) -> None:
    add_thread(memory, OLD)
    settings = settings_of(strategy="windows", threshold=0.15, window_size=4, window_overlap=1)
    chosen = recall(memory, "my sister", settings)
    assert chosen.hits
    assert [(b.first_seq, b.last_seq) for b in chosen.blocks] == [(1, 4)]


def test_an_unknown_strategy_names_the_known_ones(memory) -> None:
    memory.add("hello", user="alice", thread="old")
    with pytest.raises(ConfigError) as raised:
        recall(memory, "hello", BotSettings(strategy="magic"))
    message = str(raised.value)
    assert "'magic'" in message
    assert all(name in message for name in strategy_names())
    with pytest.raises(ConfigError, match="unknown strategy 'magic'"):
        memory.configure_bot(strategy="magic")


def test_an_unknown_option_names_the_ones_the_strategy_reads(memory) -> None:
    memory.add("hello", user="alice", thread="old")
    with pytest.raises(ConfigError) as raised:
        recall(memory, "hello", settings_of(strategy="hybrid", **{"strategy.speed": 2}))
    message = str(raised.value)
    assert "no option 'speed'" in message
    assert all(f"strategy.{name}" in message for name in strategy_named("hybrid").options)
    with pytest.raises(ConfigError, match=r"lines has no option 'lexical_top' \(it reads: strat"):
        recall(memory, "hello", settings_of(strategy="lines", **{"strategy.lexical_top": 2}))
    with pytest.raises(ConfigError, match=r"prune has no option 'lexical_top' \(it reads: none\)"):
        recall(memory, "hello", settings_of(strategy="prune", **{"strategy.lexical_top": 2}))
    with pytest.raises(ConfigError, match=r"partners_only is 1 \(on\) or 0 \(off\), not 0\.5"):
        recall(memory, "hello", settings_of(**{"strategy.partners_only": 0.5}))
    with pytest.raises(ConfigError, match=r"lexical_top is a whole number, not 1\.5"):
        recall(memory, "hello", settings_of(**{"strategy.lexical_top": 1.5}))
    with pytest.raises(ConfigError, match="no option 'speed'"):
        memory.configure_bot(**{"strategy.speed": 2})
    with pytest.raises(ConfigError, match="no option 'speed'"):
        memory.bot_settings(overrides={"strategy.speed": 2})


def test_blend_raises_and_keeps_lines_said_when_the_question_points_to(memory) -> None:
    """Two lines about the same at one cosine, said a month and a week ago: "a week ago"
    puts the week-old one first, and keeps it at the lower bar."""
    now = datetime(2024, 5, 20, 12, tzinfo=UTC)
    memory.add("I baked a lemon cake", user="alice", thread="april",
               created_at=now - timedelta(days=30))  # fmt: skip
    recent = memory.add("I baked a lemon cake!", user="alice", thread="may",
                        created_at=now - timedelta(days=7)).id  # fmt: skip
    query = "What did I bake a week ago?"
    line = memory.add(query, user="alice", thread="now", created_at=now)
    vector = memory.embed([query])[0]
    feed = (memory.store.thread_id(ThreadKey("membot", "alice", "now")) or 0, line.seq - 8)
    scope = Scope.of(memory.store.bot_id("membot") or 0, memory.store.person_id("alice"),
                     feed=feed)  # fmt: skip
    score = max(cosine(memory, query, "I baked a lemon cake"),
                cosine(memory, query, "I baked a lemon cake!"))  # fmt: skip
    # Both lines fall short of the threshold, within the margin; BM25 is left out.
    settings = settings_of(strategy="blend", threshold=score + 0.05, max_matches=5,
                           expand_before=0, expand_after=0,
                           **{"strategy.lexical_top": 0})  # fmt: skip
    dated = recall_for_turn(memory.recall_source, settings, query, vector, scope, now)
    assert [hit.line_id for hit in dated.hits] == [recent]  # the old one: not in the window
    undated = recall_for_turn(memory.recall_source, settings, query, vector, scope, None)
    assert recent not in {hit.line_id for hit in undated.hits}
    off = settings.with_values({"strategy.time_weight": 0})
    assert recall_for_turn(memory.recall_source, off, query, vector, scope, now).hits == ()
    # Time words are read in the line said, not in a match string built around it.
    plain = recall_for_turn(
        memory.recall_source, settings, query, vector, scope, now, said="What did I bake?"
    )
    assert plain.hits == ()


@pytest.mark.parametrize("memory", ["sqlite", "postgresql"], indirect=True)
def test_blend_raises_the_lines_said_by_a_speaker_the_question_names(memory) -> None:
    """With ``speaker_weight``, "What has melanie painted?" puts Melanie's own line before
    the reply that names her; a question naming nobody keeps the plain order."""
    said = [("Wow, Melanie! What has she painted? Melanie painted a lot", "Caroline"),
            ("Yes, a sunset by the lake", "Melanie")]  # fmt: skip
    reply, own = (memory.add(text, user="alice", thread="old", speaker=speaker).id
                  for text, speaker in said)  # fmt: skip
    scope = Scope.of(memory.store.bot_id("membot") or 0, memory.store.person_id("alice"))
    plain = settings_of(strategy="blend", threshold=-1.0, max_matches=2, expand_before=0,
                        expand_after=0, **{"strategy.speaker_weight": 0})  # fmt: skip
    raised = plain.with_values({"strategy.speaker_weight": 5.0})

    def order(settings: BotSettings, query: str) -> list[int]:
        vector = memory.embed([query])[0]
        found = recall_for_turn(memory.recall_source, settings, query, vector, scope)
        return [hit.line_id for hit in found.hits]

    assert order(raised, "What has melanie painted?") == [own, reply]
    assert order(plain, "What has melanie painted?") == [reply, own]
    unnamed = "What has been painted?"
    assert order(raised, unnamed) == order(plain, unnamed)


def test_windows_embed_no_unit_of_the_feed_until_it_leaves_it(memory, embedder) -> None:
    add_thread(memory, OLD)
    settings = settings_of(strategy="windows", threshold=0.15, window_size=4, window_overlap=1)
    now = [("we talk about wine today", Role.HUMAN), ("wine is nice", Role.BOT)]
    add_thread(memory, now, thread="now")

    def windows_with(words: str) -> int:  # window texts hold several lines
        return sum("\n" in text and words in text for text in embedder.embedded)

    first = recall(memory, "my sister", settings, keep=True)
    assert [(b.first_seq, b.last_seq) for b in first.blocks] == [(1, 4)]
    # the "now" thread is all feed: its window is not embedded, the old thread's are
    assert windows_with("wine today") == 0
    assert windows_with("my sister lives in Lisbon") == 1
    # seven more lines push the first window (lines 1-4) out of the feed (the last 4 lines):
    # it is embedded now; the windows holding feed lines still are not
    lines = [(f"line {n} about nothing", Role.HUMAN) for n in range(7)]
    add_thread(memory, lines, thread="now")
    recall(memory, "my sister", settings, keep=True)
    assert windows_with("wine today") == 1
    assert windows_with("line 6 about nothing") == 0
    # every unit out of the feed was embedded once, whatever came after
    assert windows_with("my sister lives in Lisbon") == 1
