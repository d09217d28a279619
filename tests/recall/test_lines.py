"""The line recall steps: expand a hit, merge blocks, push them through the FIFO buffer."""

from __future__ import annotations

import random

import pytest

from membot import BotSettings
from membot.recall import Hit, blocks_for_hits, expand_neighbors, merge_blocks, push_to_buffer
from membot.store import BufferEntry


def entry(thread: int, first: int, last: int, score: float = 0.5, *matched: int) -> BufferEntry:
    return BufferEntry(thread, first, last, score, matched or (first,))


def test_a_hit_grows_by_its_neighbours_within_its_thread() -> None:
    block = expand_neighbors(Hit(line_id=40, thread_id=7, seq=10, score=0.8), 3, 2)
    assert block == BufferEntry(7, 7, 12, 0.8, (10,))


def test_expansion_stops_at_the_first_line() -> None:
    assert expand_neighbors(Hit(1, 7, seq=2, score=0.6), 3, 3) == BufferEntry(7, 1, 5, 0.6, (2,))
    assert expand_neighbors(Hit(1, 7, seq=1, score=0.6), 0, 0) == BufferEntry(7, 1, 1, 0.6, (1,))


def test_overlapping_and_touching_blocks_of_a_thread_merge() -> None:
    merged = merge_blocks(
        [
            entry(1, 10, 16, 0.5, 13),
            entry(1, 1, 4, 0.9, 2),
            entry(1, 5, 8, 0.4, 6),  # touches 1-4
            entry(1, 14, 20, 0.7, 17),  # overlaps 10-16
            entry(2, 5, 8, 0.6, 6),  # same seqs, other thread: stays apart
        ]
    )
    assert merged == [
        BufferEntry(1, 1, 8, 0.9, (2, 6)),
        BufferEntry(1, 10, 20, 0.7, (13, 17)),
        BufferEntry(2, 5, 8, 0.6, (6,)),
    ]


def test_blocks_with_a_gap_between_them_stay_apart() -> None:
    assert len(merge_blocks([entry(1, 1, 4), entry(1, 6, 9)])) == 2


def test_blocks_for_hits_expands_with_the_settings_then_merges() -> None:
    settings = BotSettings(expand_before=1, expand_after=1)
    hits = [Hit(1, 3, 5, 0.9), Hit(2, 3, 7, 0.8), Hit(3, 4, 5, 0.5)]
    assert blocks_for_hits(hits, settings) == [
        BufferEntry(3, 4, 8, 0.9, (5, 7)),
        BufferEntry(4, 4, 6, 0.5, (5,)),
    ]


def test_the_buffer_is_first_in_first_out_with_its_size() -> None:
    buffer: list[BufferEntry] = []
    for number in range(1, 6):
        buffer = push_to_buffer(buffer, [entry(number, 1, 3, 0.1 * number)], size=3)
    assert [block.source_thread_id for block in buffer] == [3, 4, 5]  # oldest fell out
    # Eviction is by age, not by score: a weak new block pushes out the strong old one.
    buffer = push_to_buffer(buffer, [entry(9, 1, 3, 0.01)], size=3)
    assert [block.source_thread_id for block in buffer] == [4, 5, 9]


def test_the_best_fresh_block_ends_up_newest() -> None:
    fresh = [entry(1, 1, 3, 0.9), entry(2, 1, 3, 0.5)]  # best first, as merge_blocks gives
    buffer = push_to_buffer([entry(5, 1, 3)], fresh, size=10)
    assert [block.source_thread_id for block in buffer] == [5, 2, 1]


def test_a_fresh_block_absorbs_an_overlapping_entry_and_moves_to_the_newest_end() -> None:
    buffer = [entry(1, 1, 5, 0.9, 3), entry(2, 1, 5), entry(3, 1, 5)]
    buffer = push_to_buffer(buffer, [entry(1, 4, 9, 0.6, 7)], size=10)
    assert buffer == [entry(2, 1, 5), entry(3, 1, 5), BufferEntry(1, 1, 9, 0.9, (3, 7))]


def test_a_fresh_block_can_bridge_two_held_entries() -> None:
    buffer = [entry(1, 1, 3, 0.4), entry(1, 9, 12, 0.5)]
    buffer = push_to_buffer(buffer, [entry(1, 4, 8, 0.6, 6)], size=10)
    assert buffer == [BufferEntry(1, 1, 12, 0.6, (1, 6, 9))]


def test_a_buffer_of_size_zero_holds_nothing() -> None:
    assert push_to_buffer([entry(1, 1, 3)], [entry(2, 1, 3)], size=0) == []


@pytest.mark.parametrize("seed", range(20))
def test_the_buffer_never_exceeds_its_size_nor_holds_overlaps(seed: int) -> None:
    rng = random.Random(seed)
    size = rng.randint(1, 6)
    buffer: list[BufferEntry] = []
    for _ in range(30):
        fresh = merge_blocks(
            [
                entry(rng.randint(1, 3), first, first + rng.randint(0, 6), rng.random())
                for first in (rng.randint(1, 40) for _ in range(rng.randint(0, 3)))
            ]
        )
        buffer = push_to_buffer(buffer, fresh, size)
        assert len(buffer) <= size
        for index, one in enumerate(buffer):
            for other in buffer[index + 1 :]:
                apart = one.last_seq + 1 < other.first_seq or other.last_seq + 1 < one.first_seq
                assert one.source_thread_id != other.source_thread_id or apart
        for block in fresh[:size]:  # the best fresh blocks are held, whole, at the newest end
            assert any(
                held.source_thread_id == block.source_thread_id
                and held.first_seq <= block.first_seq
                and block.last_seq <= held.last_seq
                for held in buffer[-min(len(fresh), size) :]
            )
