"""Blended ranking: dense and BM25 scores, each normalised to [0, 1], added with weights.

A line's dense score is its cosine with the query, raised by two things the line's own vector
misses, then mixed with its neighbours':

1. **sentences** — a line of several sentences also gets one vector per sentence (``Speaker:
   sentence``); its score is ``(1 - sentence_weight) * line + sentence_weight * max(line, best
   sentence)``, so a fact said in passing ("By the way, I just got a Suica card") is not
   averaged away by the rest of a long line;
2. **neighbours** — ``score + neighbour_weight * (previous line's score + next line's score)``
   in the same thread (a line without a neighbour counts its own score there), so a line in a
   passage about the question outranks a lone line that happens to share its words.

The lexical side is BM25 over the lines, the query's stopwords left out ("what", "did", "I",
...; a query of stopwords only keeps them), each line's score moved ``sentence_weight`` of the
way toward its best sentence's BM25 (the same sentence units, scored in Python, since the
store's full-text index holds whole lines; both sides scaled to [0, 1] first): a long line
naming the thing once in passing is not outscored by every short line that names it. Both sides
are min-max normalised over the lines in scope and added ``dense_weight * dense +
lexical_weight * lexical`` (a line BM25 does not find adds nothing). When the query points to a
time (``membot.recall.timeframe``: "a week ago", "last Tuesday", "in January" against ``now``,
the moment it is asked; "on 7 July, 2023", "in May 2023" without it), lines dated within that
window add ``time_weight``. Neighbours up to ``before``/``after`` lines away then compete at
``neighbour_decay ** distance`` times their hit's blended score, as in ``hybrid`` -- with
``partners_only`` (the default), only neighbours said by the other party (another role or
speaker): the exchange around a match, the reply to it or the line it answers, not the same
person's previous or next line, which must earn its place by its own blended score (which
still holds its neighbours' share, ``neighbour_weight``). ``--set partners_only=0`` places
every neighbour.

Measured with `membot eval` on the dev files (LoCoMo evidence recall at 5 / 10 / 25 / 50
turns; LongMemEval session recall_all@5 read by turn2session -- the ``session_turn2session``
key of today's reports --, turn recall_all@10, turn ndcg_any@10), each step on
top of the one before, starting from ``hybrid`` (.560 / .675 / .807 / .870; .824 / .784 / .718):

- neighbour scores mixed in at 0.5, still with rank fusion (.579 / .710 / .817 / .868;
  .824 / .784 / .735); 0.25 and 0.75 did less on LoCoMo;
- sentence vectors mixed in at 0.5 (.596 / .715 / .824 / .875; .824 / .804 / .754);
- stopwords left out of the BM25 query (.600 / .712 / .828 / .883; .843 / .804 / .742);
- normalised score fusion instead of reciprocal ranks, BM25 weighing 0.5, neighbours placed at
  0.85 per line instead of 0.95: rank fusion throws away how far ahead the best match is
  (.643 / .749 / .842 / .889; .863 / .882 / .744). BM25 at 0.3 or 0.75 moved the two
  benchmarks in opposite directions; at 0.95, neighbours of a clear best match take the places
  right after it and LongMemEval's turn ndcg_any@10 drops to .69;
- with score fusion, neighbour scores at 0.25 instead of 0.5 (.659 / .762 / .851 / .902;
  .863 / .882 / .750); at 0 .635 / .761 / .847 / .900; .902 / .863 / .743. Without the
  sentence vectors (neighbours at 0.5): .623 / .732 / .837 / .883; .843 / .843 / .710;
- the time window, 0.25 for a line dated in it (LongMemEval asked at ``question_date``;
  LoCoMo with no ``now``, so only dates that name their year count): .675 / .781 / .862 /
  .909; .863 / .863 / .751. LoCoMo gains on both halves of its questions (split by a hash of
  the question: R@10 .741 -> .762 and .783 -> .801); on LongMemEval 8 of 51 questions name a
  time and one moves each way ("last week" finds its session sooner; "a week ago" raises the
  week's other lines over a gold turn a month older, which recall_all also wants). At 0.1:
  .669 / .767 / .857 / .906; .863 / .882 / .751; at 0.5: .684 / .785 / .867 / .912; .843 /
  .863 / .747. LoCoMo asked at its last session's date (relative words then count too, but
  they are relative to when they were said, not asked): R@10 .785, within noise of .781;
- sentence BM25 at ``sentence_weight`` (0.5): .679 / .783 / .864 / .911; .882 / .882 / .758;
  LongMemEval gains on both halves of its questions (split by a hash of the question id:
  .862 / .862 / .753 -> .897 / .897 / .753 and .864 / .864 / .747 -> .864 / .864 / .765).
  At 1.0 (a line scored by its best sentence when that is higher): .681 / .784 / .865 / .904;
  .882 / .902 / .758, within a question of 0.5 on every number but LoCoMo R@50;
- ``sentence_weight`` 0.75 for both sides (the default): .692 / .789 / .870 / .908; .902 /
  .902 / .759. LoCoMo gains at k <= 25 on both halves of its questions (split by a hash of
  the question: R@5/10/25 .671 / .766 / .853 -> .681 / .773 / .864 and .686 / .799 / .874 ->
  .703 / .805 / .876; R@50 .003 lower on both); LongMemEval's gain is one question, in one
  half (.846 / .846 / .758 -> .846 / .846 / .756 and .920 / .920 / .758 -> .960 / .960 /
  .762). At 1.0 on this state: .675 / .780 / .867 / .907; .882 / .902 / .751.
- ``partners_only`` (2026-11-23): .692 / .789 / .870 / .908 -> .686 / .780 / .858 / .902 on
  LoCoMo, whose neighbours by the same speaker two lines away no longer come with a match;
  LongMemEval turn recall_all@10 .902 -> .922 and ndcg_any@10 .759 -> .812 (session
  recall_all@5 unchanged, 1.000 read by sessions, .902 by the official turn2session). The
  benchmark store holds the user's turns only (the official corpus; the assistant's replies are
  seven times as much text to embed), so a line's neighbours there are the same person's other
  turns and no partner is stored: this is the same ranking as no expansion. On halves of the
  questions split by a hash: LoCoMo R@10 .786 -> .775 and .793 -> .787; LongMemEval ndcg_any@10
  .723 -> .779 and .789 -> .840. Placing the same party's lines one step further away instead
  (``decay ** (distance + 1)``) gave .781 / .865 at LoCoMo R@10 / 25 and LongMemEval turn
  recall_all@10 / ndcg_any@10 .882 / .784; with partners only, decay 0.9 and 0.95 lowered
  LoCoMo R@10 to .774 and .768.

Measured and left out (each on top of the time window): later lines of a thread lowered by
0.1 / 0.2 / 0.4 so the best lines of more threads come first (LongMemEval .863 / .863 / .740,
.863 / .843 / .735, .824 / .804 / .720; LoCoMo R@10 .769 / .751 / .739); dense pseudo-relevance
feedback, the query vector plus 0.25 to 1 times the mean of the top 3 to 10 lines' vectors
(LongMemEval at best .863 / .863 / .749, at 1.0 x 5 lines .902 / .804 / .734; LoCoMo R@10
.770 -- .776); sentence vectors at 0.75 (.678 / .789 / .866 / .914; .863 / .863 / .737);
neighbours at 0.75 per line (.672 / .779 / .850 / .909; .863 / .843 / .764). A cheaper form of
the sentence vectors, ``chunk_words``: only lines longer than that many words get extra
vectors, chunks of whole sentences up to that length (LongMemEval dev: 1,148 extra vectors for
128 words, 4,791 for 64, against 42,732 sentences for 15,063 lines): at 128 .663 / .760 / .858
/ .896; .824 / .824 / .711; at 64 .664 / .762 / .861 / .898; .843 / .843 / .718 -- most of the
sentence vectors' gain comes from facts said in passing in lines of ordinary length, not from
text past MiniLM's 256 word pieces.

One LongMemEval question moves its metrics by about 0.02: differences below that are noise.

The sentence vectors are built by the ranking from the stored lines, once per state of the
store, through ``Memory.embed`` (the harness's embedder cache included), like ``pairs`` and
``windows``; the per-line vectors are the harness's, of ``Speaker: text``.
"""

from __future__ import annotations

import re
import weakref
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

import numpy as np

from membot.recall.bm25 import STOPWORDS, bm25_hits
from membot.recall.hybrid import expand_by_score
from membot.recall.lines import Hit
from membot.recall.prune import Layout, layout_of, store_key
from membot.recall.ranking import dense_hits
from membot.recall.timeframe import window_of
from membot.search import Scope

if TYPE_CHECKING:
    from membot.memory import LineInput, Memory

_WORD = re.compile(r"\w+")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")


def sentences_of(text: str) -> list[str]:
    """``"Hi. I moved!\\nNew job?"`` -> ``["Hi.", "I moved!", "New job?"]``; blank parts
    dropped; a text without a break is one sentence."""
    parts = [part.strip() for part in _SENTENCE_END.split(text)]
    return [part for part in parts if part] or [text]


def sentence_units(layout: Layout) -> tuple[list[int], list[str]]:
    """(owning line id, ``Speaker: sentence``) for every sentence of a line of two or more."""
    owners: list[int] = []
    texts: list[str] = []
    for line in layout.by_id.values():
        parts = sentences_of(line.text)
        if len(parts) < 2:
            continue
        for part in parts:
            owners.append(line.id)
            texts.append(f"{line.speaker}: {part}" if line.speaker else part)
    return owners, texts


def chunk_units(layout: Layout, words: int) -> tuple[list[int], list[str]]:
    """(owning line id, ``Speaker: chunk``) for every line of more than ``words`` words: its
    sentences in order, joined into chunks of at most ``words`` words (a longer sentence is a
    chunk of its own)."""
    owners: list[int] = []
    texts: list[str] = []
    for line in layout.by_id.values():
        if len(line.text.split()) <= words:
            continue
        chunks: list[list[str]] = [[]]
        for part in sentences_of(line.text):
            size = sum(len(sentence.split()) for sentence in chunks[-1])
            if chunks[-1] and size + len(part.split()) > words:
                chunks.append([])
            chunks[-1].append(part)
        for chunk in chunks:
            owners.append(line.id)
            text = " ".join(chunk)
            texts.append(f"{line.speaker}: {text}" if line.speaker else text)
    return owners, texts


def with_sentences(hits: Sequence[Hit], best: Mapping[int, float], weight: float) -> list[Hit]:
    """Each hit's score moved ``weight`` of the way to its best sentence's, if that is higher."""
    return [
        Hit(
            hit.line_id,
            hit.thread_id,
            hit.seq,
            hit.score + weight * max(0.0, best.get(hit.line_id, hit.score) - hit.score),
        )
        for hit in hits
    ]


def with_neighbours(hits: Sequence[Hit], weight: float) -> list[Hit]:
    """Each hit's score plus ``weight`` times its previous and next lines' scores (its own
    where a neighbour is not among the hits); best first."""
    at = {(hit.thread_id, hit.seq): hit.score for hit in hits}
    smoothed = [
        Hit(
            hit.line_id,
            hit.thread_id,
            hit.seq,
            hit.score
            + weight
            * (
                at.get((hit.thread_id, hit.seq - 1), hit.score)
                + at.get((hit.thread_id, hit.seq + 1), hit.score)
            ),
        )
        for hit in hits
    ]
    return sorted(smoothed, key=lambda hit: -hit.score)


def min_max(values: Sequence[float] | np.ndarray) -> np.ndarray:
    """``values`` scaled to [0, 1] (all 1 when they are equal)."""
    scores = np.asarray(values, dtype=float)
    spread = float(scores.max() - scores.min()) if scores.size else 0.0
    return (scores - scores.min()) / spread if spread > 0 else np.ones_like(scores)


def normalised(hits: Sequence[Hit]) -> dict[int, float]:
    """Scores min-max scaled to [0, 1] (all 1 when they are equal), by line id."""
    scaled = min_max([hit.score for hit in hits])
    return {hit.line_id: float(value) for hit, value in zip(hits, scaled, strict=True)}


def blend(dense: Sequence[Hit], lexical: Sequence[Hit], weights: Sequence[float]) -> list[Hit]:
    """The dense hits scored ``weights[0] * dense + weights[1] * lexical``, both normalised;
    lexical hits outside ``dense`` are dropped; best first, ties in dense order."""
    dense_weight, lexical_weight = weights
    dense_scores, lexical_scores = normalised(dense), normalised(lexical)
    blended = [
        Hit(
            hit.line_id,
            hit.thread_id,
            hit.seq,
            dense_weight * dense_scores[hit.line_id]
            + lexical_weight * lexical_scores.get(hit.line_id, 0.0),
        )
        for hit in dense
    ]
    return sorted(blended, key=lambda hit: -hit.score)


class TermIndex:
    """Documents (their word counts) by word, for Okapi BM25 that reads only the documents
    holding a query word; IDF ``log(1 + (N - n + 0.5) / (n + 0.5))``."""

    def __init__(self, documents: Sequence[Counter[str]], k1: float = 1.2, b: float = 0.75):
        self.size = len(documents)
        self.k1 = k1
        lengths = np.asarray([sum(document.values()) for document in documents], dtype=float)
        mean = max(float(lengths.mean()), 1.0) if self.size else 1.0
        self.scale = k1 * (1 - b + b * lengths / mean)
        postings: dict[str, tuple[list[int], list[int]]] = {}
        for row, document in enumerate(documents):
            for word, count in document.items():
                rows, counts = postings.setdefault(word, ([], []))
                rows.append(row)
                counts.append(count)
        self.postings = {
            word: (np.asarray(rows), np.asarray(counts, dtype=float))
            for word, (rows, counts) in postings.items()
        }

    def bm25(self, words: Sequence[str]) -> np.ndarray:
        """Each document's BM25 for the query ``words`` (0 where it holds none)."""
        scores = np.zeros(self.size)
        for word in dict.fromkeys(words):
            if word not in self.postings:
                continue
            rows, counts = self.postings[word]
            idf = np.log(1 + (self.size - len(rows) + 0.5) / (len(rows) + 0.5))
            scores[rows] += idf * counts * (self.k1 + 1) / (counts + self.scale[rows])
        return scores


def other_party(layout: Layout) -> Callable[[int, int], bool]:
    """Whether two lines were said by different parties: another role or another speaker."""

    def differ(first: int, second: int) -> bool:
        one, other = layout.by_id[first], layout.by_id[second]
        return (one.role, one.speaker) != (other.role, other.speaker)

    return differ


def in_window(
    hits: Sequence[Hit],
    dates: Mapping[int, float],
    window: tuple[datetime, datetime],
    weight: float,
) -> list[Hit]:
    """Hits dated (``dates``: seconds since 1970 by line id) within ``window`` (start
    included, end not) raised by ``weight``; best first."""
    start, end = (moment.timestamp() for moment in window)
    raised = [
        Hit(hit.line_id, hit.thread_id, hit.seq, hit.score + weight)
        if hit.line_id in dates and start <= dates[hit.line_id] < end
        else hit
        for hit in hits
    ]
    return sorted(raised, key=lambda hit: -hit.score)


class BlendRanking:
    """Dense (with sentences and neighbours) and stopword-free BM25 (with sentences) scores,
    normalised and added; lines dated where the query points raised; neighbours placed by
    their decayed score."""

    name = "blend"

    def __init__(
        self,
        before: int = 2,
        after: int = 2,
        dense_weight: float = 1.0,
        lexical_weight: float = 0.5,
        sentence_weight: float = 0.75,
        neighbour_weight: float = 0.25,
        neighbour_decay: float = 0.85,
        time_weight: float = 0.25,
        chunk_words: int | None = None,
        partners_only: bool = True,
    ) -> None:
        self.before = before
        self.after = after
        self.weights = (dense_weight, lexical_weight)
        self.sentence_weight = sentence_weight
        self.neighbour_weight = neighbour_weight
        self.neighbour_decay = neighbour_decay
        self.time_weight = time_weight
        self.chunk_words = chunk_words
        self.partners_only = partners_only
        self._state: weakref.WeakKeyDictionary[Memory, tuple[tuple[int, int], dict[str, Any]]] = (
            weakref.WeakKeyDictionary()
        )

    def _per_state(self, memory: Memory, name: str, build: Callable[[], Any]) -> Any:
        """``build()``, run once per state of the store and kept with the Memory."""
        key = store_key(memory)
        cached = self._state.get(memory)
        if cached is None or cached[0] != key:
            cached = (key, {})
            self._state[memory] = cached
        if name not in cached[1]:
            cached[1][name] = build()
        return cached[1][name]

    def index_text(self, item: LineInput) -> str:
        return f"{item.speaker}: {item.text}" if item.speaker else item.text

    def units(self, memory: Memory) -> tuple[list[int], list[str]]:
        """The store's sentence units, or its chunks with ``chunk_words``, once per store
        state."""

        def build() -> tuple[list[int], list[str]]:
            layout = layout_of(memory)
            if self.chunk_words is None:
                return sentence_units(layout)
            return chunk_units(layout, self.chunk_words)

        return self._per_state(memory, "units", build)

    def sentence_vectors(self, memory: Memory) -> tuple[list[int], np.ndarray]:
        """Owning line ids and vectors of the store's sentences, built once per store state."""
        owners, texts = self.units(memory)

        def build() -> np.ndarray:
            return np.asarray(memory.embed(texts), np.float32) if texts else np.zeros((0, 0))

        return owners, self._per_state(memory, "sentence vectors", build)

    def sentence_terms(self, memory: Memory) -> tuple[list[int], TermIndex]:
        """Owning line ids and the term index of the store's sentences, once per store
        state."""
        owners, texts = self.units(memory)

        def build() -> TermIndex:
            return TermIndex([Counter(word.lower() for word in _WORD.findall(t)) for t in texts])

        return owners, self._per_state(memory, "sentence terms", build)

    def lexical(self, memory: Memory, query: str, scope: Scope) -> list[Hit]:
        """BM25 hits moved toward their best sentence's BM25 (both scaled to [0, 1]), best
        first."""
        hits = bm25_hits(memory, query, scope, stopwords=STOPWORDS)
        if not (self.sentence_weight and hits):
            return hits
        owners, terms = self.sentence_terms(memory)
        words = [word.lower() for word in _WORD.findall(query)]
        scores = terms.bm25([word for word in words if word not in STOPWORDS] or words)
        best: dict[int, float] = {}
        for row in np.flatnonzero(scores).tolist():
            best[owners[row]] = max(best.get(owners[row], 0.0), float(scores[row]))
        top = max(best.values(), default=0.0)
        if top <= 0:
            return hits
        scaled = normalised(hits)
        hits = [Hit(hit.line_id, hit.thread_id, hit.seq, scaled[hit.line_id]) for hit in hits]
        best = {line_id: score / top for line_id, score in best.items()}
        moved = with_sentences(hits, best, self.sentence_weight)
        return sorted(moved, key=lambda hit: -hit.score)

    def line_dates(self, memory: Memory) -> dict[int, float]:
        """Each stored line's date (seconds since 1970) by line id, once per store state."""
        return self._per_state(memory, "dates", memory.index.dates)

    def dense(self, memory: Memory, query: str, scope: Scope) -> list[Hit]:
        """Dense hits scored with their sentences and neighbours, best first."""
        vector = np.asarray(memory.embed([query])[0], dtype=np.float32)
        hits = dense_hits(memory, query, scope, vector)
        if self.sentence_weight:
            owners, vectors = self.sentence_vectors(memory)
            best: dict[int, float] = {}
            if owners:
                for owner, score in zip(owners, (vectors @ vector).tolist(), strict=True):
                    best[owner] = max(best.get(owner, score), score)
            hits = with_sentences(hits, best, self.sentence_weight)
        return with_neighbours(hits, self.neighbour_weight)

    def rank(
        self,
        memory: Memory,
        query: str,
        scope: Scope,
        depth: int | None = None,
        now: datetime | None = None,
    ) -> list[int]:
        lexical = self.lexical(memory, query, scope)
        blended = blend(self.dense(memory, query, scope), lexical, self.weights)
        window = window_of(query, now) if self.time_weight else None
        if window is not None:
            blended = in_window(blended, self.line_dates(memory), window, self.time_weight)
        placed_with = other_party(layout_of(memory)) if self.partners_only else None
        return expand_by_score(blended, self.before, self.after, self.neighbour_decay, placed_with)
