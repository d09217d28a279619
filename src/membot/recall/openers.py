"""A thread as a unit: the line that opened a thread that matches, raised.

A person who opens a conversation with an assistant says what it is about first ("I'm
planning a trip to Europe; I went to a cultural festival yesterday, ...") and then follows
up ("what about the visas?"): the fact asked about months later often sits in that opening
line, while the follow-ups share more words with the question. Where the thread as a whole
matches the question (its best line scores high), :func:`opener_scores` gives its opening line
a score of its own, so the opening line of each of the best threads can stand beside their
best lines. Only the best threads' opening lines are raised (``opener_threads`` of them, 5 by
default): between
friends a session's first line is often a greeting, and raising the first line of every
thread that matches a little took places from the evidence on LoCoMo.

``blend`` adds it at ``opener_weight`` (0.1, the 5 best threads; chosen on the folds of both
benchmarks: docs/recall.md, "The line that opens a thread"). No search: it reads the scores
and the threads the ranking already holds.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from membot.index.scope import InScope


def opening_lines(lines: InScope) -> np.ndarray:
    """True for each line that is the first (lowest seq) of its thread among ``lines``: the
    lines in scope (for a large shared scope, those its search read)."""
    opening = np.zeros(len(lines.ids), dtype=bool)
    if not len(lines.ids):
        return opening
    order = np.lexsort((lines.seqs, lines.thread_ids))
    threads = lines.thread_ids[order]
    first = np.ones(len(order), dtype=bool)
    first[1:] = threads[1:] != threads[:-1]
    opening[order[first]] = True
    return opening


def opener_scores(lines: InScope, scores: np.ndarray, threads_raised: int) -> np.ndarray:
    """For the opening line (:func:`opening_lines`) of each of the ``threads_raised`` threads
    whose best score among ``scores`` (aligned with ``lines``) is highest, that best score
    min-max normalised over every thread's best; 0 for every other line (and for every line
    when all threads score alike)."""
    found = np.zeros(len(lines.ids), dtype=np.float64)
    if not len(lines.ids):
        return found
    threads, at = np.unique(lines.thread_ids, return_inverse=True)
    best = np.full(len(threads), -np.inf)
    np.maximum.at(best, at, np.asarray(scores, dtype=np.float64))
    spread = float(best.max() - best.min())
    if spread <= 0:
        return found
    raised = np.zeros(len(threads), dtype=bool)
    raised[np.argsort(-best, kind="stable")[:threads_raised]] = True
    opening = opening_lines(lines) & raised[at]
    found[opening] = (best[at[opening]] - best.min()) / spread
    return found
