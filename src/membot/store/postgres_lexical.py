"""BM25 over PostgreSQL full-text search, the way SQLite's FTS5 ranks.

PostgreSQL's own ``ts_rank``/``ts_rank_cd`` weigh how often and how close the words occur in
one line, but know nothing of how rare a word is across the store, and a blended recall
min-max-normalises the scores it gets, so their shape matters, not only their order. This
query computes Okapi BM25 with FTS5's constants (k1 = 1.2, b = 0.75, IDF floored at 1e-6)
from the generated ``tsvector`` (term frequencies are its positions), the ``words`` column
(a line's length in words) and the store-wide counts in ``lexical_totals``, so the two stores
rank alike; they still differ where PostgreSQL's parser and Snowball stemmer cut words
differently from FTS5's unicode61 tokenizer and Porter stemmer (docs/deploy.md).

A word's count in a line (its term frequency, ``tf``) is read without unnesting the line's
``tsvector`` (which costs a row per word of every matched line: 850,000 rows for the 7,939
lines one question matched in a store of 100,000): with every weight 1, ``ts_rank`` of a
one-word query is ``(1 + 1/2² + … + 1/tf²) / (π²/6)``, PostgreSQL's own formula for a word
found ``tf`` times, and since the sum's tail past ``tf`` is about ``1/tf - 1/(2 tf²)``,
``tf = round(1 / (π²/6 × (1 - rank)) - 1/2)``, exact for every count a ``tsvector`` can hold
(at most 256 positions a word). ``tests/store/test_postgres.py`` checks the scores against
FTS5's on lines that repeat a word.
"""

from __future__ import annotations

import re
from typing import Any

from membot.store.sql_store import LexicalQuery

_WORDS = re.compile(r"[^\W_]+")


def word_count(text: str) -> int:
    """A line's length as FTS5's unicode61 tokenizer counts it: runs of letters and digits."""
    return len(_WORDS.findall(text))


# A term's lexemes are quoted as tsquery text: '' doubles a quote and \\ a backslash.
_BM25_SQL = """
WITH lexemes AS (
    SELECT word FROM unnest(%(terms)s::text[]) AS term,
         unnest(tsvector_to_array(to_tsvector('membot_english', term))) AS word
),
wanted AS (  -- each lexeme and the one-word query that finds it, quoted as tsquery text
    SELECT word, ('''' || replace(replace(word, '\\', '\\\\'), '''', '''''') || '''')::tsquery AS q
    FROM lexemes
),
totals AS (
    SELECT greatest(sum(lines), 1)::float8 AS n,
           greatest(sum(words)::float8 / greatest(sum(lines), 1), 1) AS average
    FROM lexical_totals
),
common AS (  -- lines holding each frequent word, as ANALYZE last estimated them
    SELECT e.word, e.frequency * greatest(c.reltuples, 0) AS estimate
    FROM pg_stats s JOIN pg_class c ON c.oid = 'lines'::regclass
    CROSS JOIN LATERAL unnest(s.most_common_elems::text::text[], s.most_common_elem_freqs)
        AS e(word, frequency)
    WHERE %(budget)s::float8 IS NOT NULL AND s.schemaname = current_schema()
      AND s.tablename = 'lines' AND s.attname = 'lexical' AND e.word IS NOT NULL
),
counting AS (  -- a word estimated at twice the budget and more is left out uncounted
    SELECT w.word, w.q, coalesce(common.estimate >= 2 * %(budget)s::float8, false) AS skipped
    FROM wanted w LEFT JOIN common ON common.word = w.word
),
counted AS (
    SELECT w.word, w.q, found.n,
           greatest(ln((totals.n - found.n + 0.5) / (found.n + 0.5)), 1e-6) AS idf
    FROM counting w CROSS JOIN totals CROSS JOIN LATERAL (
        SELECT CASE WHEN w.skipped THEN %(count_cap)s::float8 ELSE count(*)::float8 END AS n
        FROM (
            SELECT 1 FROM lines
            WHERE NOT w.skipped AND lexical @@ w.q
            LIMIT %(count_cap)s  -- a word past the budget is left out: no need to count on
        ) hits
    ) found
),
weights AS (  -- with a budget: the rarest words, holding at most that many lines together
    SELECT word, q, idf FROM (
        SELECT word, q, idf, sum(n) OVER (ORDER BY n, word) AS running FROM counted
    ) ranked
    WHERE %(budget)s::float8 IS NULL OR running <= %(budget)s::float8
),
query AS (
    SELECT string_agg(DISTINCT q::text, ' | ')::tsquery AS q FROM weights
),
matched AS (
    SELECT l.id, l.words, l.lexical FROM lines l, query
    WHERE query.q IS NOT NULL AND l.lexical @@ query.q AND {where}
),
frequencies AS (  -- how often each word is in each matched line (module doc: ts_rank)
    SELECT m.id, m.words, weights.idf,
           round(1 / (1.64493406685 * (1 - ts_rank('{1,1,1,1}', m.lexical, weights.q)::float8))
                 - 0.5) AS tf
    FROM matched m JOIN weights ON m.lexical @@ weights.q
)
SELECT f.id, sum(
    f.idf * f.tf * 2.2 / (f.tf + 1.2 * (0.25 + 0.75 * f.words / totals.average))
) AS score
FROM frequencies f CROSS JOIN totals
GROUP BY f.id ORDER BY score DESC, f.id LIMIT %(limit)s
"""


def bm25_query(query: LexicalQuery) -> tuple[str, dict[str, Any]]:
    """The SQL and parameters of a BM25 search for any of ``terms`` in one scope; with
    ``max_postings``, for the rarest of them that hold at most that many lines together; with
    ``among``, of those lines only (read by id: the lines a large scope's approximate index
    nominated, rather than every line holding a word)."""
    conditions = ["l.bot_id = %(bot)s", "l.role = ANY(%(roles)s)"]
    budget = query.max_postings
    params: dict[str, Any] = {
        "terms": list(query.terms), "bot": query.bot_id, "roles": list(query.roles),
        "limit": query.limit, "budget": budget, "count_cap": None if budget is None else budget + 1,
    }  # fmt: skip
    if query.person_ids is not None:
        conditions.append("l.person_id = ANY(%(people)s::bigint[])")
        params["people"] = [int(person_id) for person_id in query.person_ids]
    if query.thread_id is not None:
        conditions.append("l.thread_id = %(thread)s")
        params["thread"] = query.thread_id
    if query.among is not None:
        conditions.append("l.id = ANY(%(among)s::bigint[])")
        params["among"] = [int(line_id) for line_id in query.among]
    return _BM25_SQL.replace("{where}", " AND ".join(conditions)), params
