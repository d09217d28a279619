"""``Memory``: store lines with their vectors, search them, recall blocks, forget.

The library's entry point for storage and recall; ``Bot`` builds turns on top of it, and every
front end goes through these two classes.
"""

from __future__ import annotations

import numbers
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import numpy as np

from membot.config import DEFAULT_BOT, DEFAULT_EMBEDDER, BotSettings, cache_dir, default_db_path
from membot.embed import CachedEmbedder, Embedder, resolve_embedder, spec_of
from membot.embed.base import checked_vectors
from membot.errors import (
    ConfigError,
    ConflictError,
    EmbedderMismatchError,
    NotFoundError,
    StoreError,
)
from membot.index.source import IndexedLines
from membot.index.vectors import Scope
from membot.line_checks import check_moment, check_roles, checked_line
from membot.memory.bots import BotProfiles
from membot.memory.knowledge import SummariesAndExpertise, summary_parts
from membot.memory.line_parts import part_spans, part_texts
from membot.memory.person_links import PersonLinks, identities, linked_history, linked_threads
from membot.memory.person_view import PersonView
from membot.model import (
    Block,
    Line,
    Match,
    Role,
    ThreadInfo,
    ThreadState,
    aware,
    embedding_text,
    utc_now,
)
from membot.model import (
    LineInput as LineInput,  # re-exported: membot and the text-message service import it here
)
from membot.recall import push_to_buffer
from membot.recall.chat import embedded_question, recall_for_turn
from membot.store import BufferEntry, NewLine, SourceKey, Store, ThreadKey, open_store
from membot.store.base import LineParts, check_embedder_meta, lines_between
from membot.turn.tokens import TokenCounter, default_token_counter


def _source_key(item: LineInput) -> SourceKey | None:
    if item.source_key is None:
        return None
    return SourceKey(ThreadKey(item.bot, item.user, item.thread), item.source_key)


# A batch's line vectors and each line's parts (None: a line without parts).
Embedded = tuple[np.ndarray, list[LineParts | None]]


@dataclass(frozen=True)
class Recall:
    """What recall found for one line: this turn's matches and the buffer's blocks."""

    matches: tuple[Match, ...]
    blocks: tuple[Block, ...]
    search_ms: float


class Memory(BotProfiles, SummariesAndExpertise, PersonView, PersonLinks):
    """Every line of dialog, remembered with its embedding, in one store.

    ``db`` is a path (default: ``MEMBOT_DB`` or the user data folder) or a ready
    :class:`~membot.store.Store`; ``embedder`` an
    :class:`~membot.embed.Embedder` or a spec string such as ``"minilm"`` (default: the one
    the store's vectors were made by, where a spec makes it; ``"minilm"`` for a new store);
    ``embedder_key_env`` names the environment variable holding an ``openai:`` embedder's
    API key (default: ``OPENAI_API_KEY`` for OpenAI itself, none for another server).
    """

    def __init__(
        self,
        db: str | Path | Store | None = None,
        embedder: Embedder | str | None = None,
        token_counter: TokenCounter | None = None,
        cache: bool = True,
        embedder_key_env: str | None = None,
    ) -> None:
        if isinstance(db, str) and not db.strip():
            raise ConfigError("db is an empty path: name the store's file or database URL")
        if db is not None and not isinstance(db, str | Path) and not hasattr(db, "add_lines"):
            raise ConfigError(f"db is a path or a membot Store, not {type(db).__name__}")
        self.store: Store = (
            open_store(db or default_db_path()) if db is None or isinstance(db, str | Path) else db
        )
        if embedder is None:
            made_by = self.store.get_meta("embedder")
            embedder = (spec_of(made_by) if made_by else None) or DEFAULT_EMBEDDER
        if isinstance(embedder, str):
            cache_path = cache_dir() / "embeddings.db" if cache else None
            embedder = resolve_embedder(embedder, cache_path=cache_path, key_env=embedder_key_env)
        self.embedder = embedder
        self.tokens = token_counter or default_token_counter()
        # What recall reads: the store's lines through in-process caches (the vector index,
        # the strategies' units), one recall at a time, so a server's threads can share one
        # Memory. Storing lines is serialised by the store itself.
        self.recall_source = IndexedLines(
            self.store, self.embed, embed_transient=lambda texts: self.embed(texts, keep=False)
        )
        self.index = self.recall_source.index
        # The turn locks each of this process's threads holds: a thread holding one takes
        # it again at once (a line added inside a turn lock waited 180 s for itself).
        self._turns_held = threading.local()

    @property
    def location(self) -> str:
        """Where the store is, as its messages name it: a file path, or a database URL
        without its password."""
        return self.store.location

    def close(self) -> None:
        self.store.close()

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def check_store(self, timeout: float = 2.0) -> None:
        """``StoreError`` unless the store answers within about ``timeout`` seconds;
        ``EmbedderMismatchError`` (one) if its vectors are no longer this memory's
        embedder's (re-embedded by another process: ``membot reindex``)."""
        made_by = self.store.check_reachable(timeout)
        if made_by is not None:
            check_embedder_meta({"embedder": made_by}, self.embedder.name, None)

    def warm_up(self, *, shared_memory: bool = False) -> None:
        """Load the embedder and tokenizer now, so the first turn's timings are its own.
        With ``shared_memory``, also the memory of every bot that shares it across people
        (its lines' vectors and words, or past ``MEMBOT_APPROXIMATE_FROM`` lines its
        approximate index: seconds at a million lines; ``benchmarks/scale.py`` prints it),
        as ``membot serve`` does before it takes requests, so no person's turn waits for it."""
        self.embedder.embed(["warm up"])
        self.tokens.count("warm up")
        if not shared_memory:
            return
        shared = [bot for bot in self.bots() if self.bot_settings(bot).share_across_people]
        if not shared:
            return
        try:
            vector = self.embed(["warm up"], keep=False)[0]
        except EmbedderMismatchError:
            return  # a store made with another embedder: its first turn says so, as before
        for bot in shared:
            bot_id = self.store.bot_id(bot)
            if bot_id is not None:
                with self.recall_source.reading():
                    self.index.search(vector, Scope.of(bot_id, None), 1)

    # -- embedding ------------------------------------------------------------------------

    def embed(self, texts: Sequence[str], *, keep: bool | Sequence[bool] = True) -> np.ndarray:
        """Vectors for ``texts``, refusing an embedder that differs from the store's.
        ``keep=False`` (for all, or a flag for each text) for texts that are not stored
        (queries, points being checked): their vectors stay out of the on-disk embedding
        cache, which forgetting could not reach."""
        self.store.check_embedder(self.embedder.name)  # fail before spending an embedding
        kept = [keep] * len(texts) if isinstance(keep, bool) else list(keep)
        if not all(kept) and isinstance(self.embedder, CachedEmbedder):
            vectors = self.embedder.embed_keeping(list(texts), kept)
        else:
            vectors = self.embedder.embed(list(texts))
        vectors = checked_vectors(vectors, len(texts), self.embedder.name)
        if len(vectors):  # an empty answer may not know its width
            self.store.check_embedder(self.embedder.name, int(vectors.shape[1]))
        return vectors

    def embed_question(
        self, text: str, settings: BotSettings, *, keep: bool = True, said: str | None = None
    ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """The vector of ``text``, a turn's match string (kept in the embedding cache unless
        ``keep`` is false), and by text those of the forms of it the bot's strategy will
        search (never kept; ``said``: the new line), in one batch
        (:func:`membot.recall.chat.embedded_question`): what :meth:`recall` takes."""
        return embedded_question(
            lambda texts: self.embed(texts, keep=[keep] + [False] * (len(texts) - 1)),
            settings, text, said,
        )  # fmt: skip

    def _vectors_by(self, vectors: np.ndarray) -> tuple[str, int]:
        """Who made ``vectors``: checked and recorded by the store in the write itself."""
        return self.embedder.name, int(np.asarray(vectors).shape[-1])

    # -- writing --------------------------------------------------------------------------

    def add(
        self,
        text: str,
        *,
        user: str,
        thread: str,
        role: Role | str = Role.HUMAN,
        bot: str = DEFAULT_BOT,
        created_at: datetime | None = None,
        speaker: str | None = None,
    ) -> Line:
        """Store one line: line, vector and lexical row commit together. A turn of the
        thread under way, in any process, is answered first (the store's turn lock): the
        line never comes between a turn's line and its reply."""
        item = self.validate_line(LineInput(text, user, thread, role, bot, created_at, speaker))
        with self.turn_lock(bot=item.bot, user=item.user, thread=item.thread):
            line, _ = self.add_with_vector(item)
        return line

    def add_with_vector(
        self, item: LineInput, vector: np.ndarray | None = None
    ) -> tuple[Line, np.ndarray]:
        """Store one line, embedding it unless its vector is given; return both."""
        new = self.validate_line(item)
        vectors, (parts,) = self._embedded_lines([new], None if vector is None else vector[None])
        vector = vectors[0]
        stored = self.store.add_lines(
            [self._new_line(new, vector, parts)], self._vectors_by(vector)
        )
        if not stored and new.answers is not None:
            raise NotFoundError(
                f"line {new.answers} is gone (forgotten while its reply was written): "
                "the reply was not stored"
            )
        if not stored:
            raise ConflictError(
                f"thread {new.thread!r} holds a line from {new.source_key!r} already"
            )
        return stored[0], vector

    @contextmanager
    def turn_lock(self, *, bot: str, user: str, thread: str) -> Iterator[None]:
        """Held for a whole turn of the thread: two turns of one thread, in any processes,
        follow each other, and an import into it waits (docs/reliability.md). A thread of
        this process that holds it already holds it again (``add`` inside it)."""
        key = ThreadKey(bot, user, thread)
        held: set[ThreadKey] = self._turns_held.__dict__.setdefault("keys", set())
        if key in held:
            yield
            return
        with self.store.turn_lock(key):
            held.add(key)
            try:
                yield
            finally:
                held.discard(key)

    def discard_embedding(self, item: LineInput) -> None:
        """Forget the cached vector of a line that was embedded but not stored (a reply whose
        person was forgotten meanwhile): the embedding cache keeps texts."""
        if isinstance(self.embedder, CachedEmbedder):
            self.embedder.discard([embedding_text(item.text, item.speaker)])

    def add_many(
        self,
        items: Iterable[LineInput],
        batch_size: int = 256,
        progress: Callable[[int], None] | None = None,
    ) -> int:
        """Bulk add in batches: one embedding call and one transaction per batch, so a run
        stopped at any point has stored whole batches and nothing of the one in flight.
        Lines whose ``source_key`` their thread holds already are skipped before embedding:
        run again, an import adds only what is missing. A batch waits for the turns under
        way in its threads (the store's turn lock), so it never comes between a line and
        its reply. Returns the number of lines added; ``progress`` is told of every line
        read, added or skipped.

        A bad line is ``ConfigError`` naming its place (counted from 0). A list or other
        sequence is checked whole first, so then nothing is stored; lines from any other
        iterable (a generator, read as it goes) are checked as they come, and the batches
        before the bad one stay stored."""
        checked = isinstance(items, Sequence)
        if checked:
            items = [self._checked_item(item, place) for place, item in enumerate(items)]
        added = 0
        # The next batch is embedded while this one is stored (token counts, inserts,
        # commit): the cores the embedder leaves idle meanwhile get work.
        with ThreadPoolExecutor(1, thread_name_prefix="membot-embed") as embedding:
            pending = None
            batches = self._batches(items, batch_size, checked=checked)
            while True:
                try:
                    batch = next(batches, None)
                except Exception:  # a bad line, or the lines' source failed: the whole
                    # batches read before it are kept, as the docstring says
                    if pending:
                        self._store_batch(*pending, progress)
                    raise
                if batch is None:
                    break
                missing = self._not_stored(batch)
                upcoming = (batch, missing, embedding.submit(self._embed_lines, missing))
                if pending:
                    added += self._store_batch(*pending, progress)
                pending = upcoming
            if pending:
                added += self._store_batch(*pending, progress)
        return added

    def _batches(
        self, items: Iterable[LineInput], size: int, *, checked: bool = False
    ) -> Iterator[list[LineInput]]:
        batch: list[LineInput] = []
        for place, item in enumerate(items):
            batch.append(item if checked else self._checked_item(item, place))
            if len(batch) >= size:
                yield batch
                batch = []
        if batch:
            yield batch

    def _checked_item(self, item: object, place: int) -> LineInput:
        if not isinstance(item, LineInput):
            raise ConfigError(f"line {place}: a LineInput, not {type(item).__name__}")
        try:
            return self.validate_line(item)
        except ConfigError as error:
            raise ConfigError(f"line {place}: {error}") from None

    def _embed_lines(self, lines: list[LineInput]) -> Embedded | None:
        return self._embedded_lines(lines) if lines else None

    def _embedded_lines(
        self, lines: Sequence[LineInput], vectors: np.ndarray | None = None
    ) -> Embedded:
        """The lines' vectors (``vectors`` when given) and their parts' (each line's
        :func:`~membot.memory.line_parts.part_spans`), in one call to the embedder, which
        sorts the texts by length itself: less padding, same order out."""
        spans = [part_spans(line.text) for line in lines]
        said = [] if vectors is not None else lines  # the lines to embed themselves
        own = [embedding_text(line.text, line.speaker) for line in said]
        texts = own + [
            text
            for line, each in zip(lines, spans, strict=True)
            for text in part_texts(line.text, line.speaker, each)
        ]
        embedded = self.embed(texts) if texts else np.zeros((0, 0), dtype=np.float32)
        vectors = embedded[: len(own)] if vectors is None else vectors
        parts: list[LineParts | None] = []
        at = len(own)
        for each in spans:
            parts.append(LineParts(tuple(each), embedded[at : at + len(each)]) if each else None)
            at += len(each)
        return vectors, parts

    def _store_batch(
        self,
        batch: list[LineInput],
        missing: list[LineInput],
        vectors: Future[Embedded | None],
        progress: Callable[[int], None] | None,
    ) -> int:
        embedded = vectors.result()
        stored = []
        if embedded is not None:
            news = [
                self._new_line(line, vector, parts)
                for line, vector, parts in zip(missing, *embedded, strict=True)
            ]
            # A turn of one of these threads may be under way: its reply comes first.
            with self.store.turn_lock(*dict.fromkeys(line.key for line in news)):
                stored = self.store.add_lines(news, self._vectors_by(embedded[0]))
        if progress:
            progress(len(batch))
        return len(stored)

    def _not_stored(self, batch: list[LineInput]) -> list[LineInput]:
        """The lines of ``batch`` not stored by an earlier run (those without a key are new)."""
        keys = [_source_key(item) for item in batch]
        held = self.store.stored_source_keys(key for key in keys if key is not None)
        return [
            item for item, key in zip(batch, keys, strict=True) if key is None or key not in held
        ]

    def validate_line(self, item: LineInput) -> LineInput:
        """The line with its role parsed; ``ConfigError`` saying what is wrong otherwise."""
        return checked_line(item)

    def _new_line(
        self, item: LineInput, vector: np.ndarray, parts: LineParts | None = None
    ) -> NewLine:
        key = ThreadKey(item.bot, item.user, item.thread)
        return NewLine(key, Role(item.role), item.text, vector, self.tokens.count(item.text),
                       item.created_at, item.speaker, item.ref, item.source_key,
                       item.answers, parts)  # fmt: skip

    # -- reading --------------------------------------------------------------------------

    def search(
        self,
        query: str,
        *,
        user: str | None = None,
        bot: str = DEFAULT_BOT,
        thread: str | None = None,
        k: int = 10,
        roles: Sequence[str] = ("human", "bot"),
    ) -> list[Match]:
        """The ``k`` stored lines most similar to ``query``: one person's, one thread's, or
        (``user=None``) every person's of the bot — the operator's view of the store; a bot's
        recall never crosses people unless it shares memory. The query itself is not stored."""
        if not isinstance(query, str) or not query.strip():
            raise ConfigError("nothing to search for: the query is blank")
        if isinstance(k, bool) or not isinstance(k, numbers.Integral) or k < 1:
            raise ConfigError(f"k is how many lines, a whole number from 1; not {k!r}")
        roles = check_roles(roles)
        for label, name in (("user", user), ("thread", thread)):
            if name is not None and not (isinstance(name, str) and name.strip()):
                # "" would read as None: every person's lines, where one person's were meant.
                raise ConfigError(f"a blank {label} name: pass None to search every {label}'s")
        bot_id = self.store.bot_id(bot)
        person_id = self.store.person_id(user) if user else None
        if bot_id is None or (user and person_id is None):
            return []
        thread_id = None
        if thread:
            if not user:
                raise ConfigError("searching one thread needs its user")
            thread_id = self.store.thread_id(ThreadKey(bot, user, thread))
            if thread_id is None:
                return []
        vector = self.embed([query], keep=False)[0]
        scope = Scope.of(bot_id, person_id, thread_id=thread_id, roles=roles, links=self.store)
        with self.recall_source.reading():
            hits = self.index.search(vector, scope, k)
        return self._matches(hits)

    def _matches(
        self, hits: Sequence[tuple[int, float]], duplicates: Sequence[int] = ()
    ) -> list[Match]:
        """The hits' lines as matches; ``duplicates``: how many each stands for, in order."""
        lines = {line.id: line for line in self.store.lines([line_id for line_id, _ in hits])}
        counts = list(duplicates) or [0] * len(hits)
        return [
            Match(lines[i], score, count)
            for (i, score), count in zip(hits, counts, strict=True)
            if i in lines
        ]

    def history(
        self, *, user: str, bot: str | None = None, thread: str | None = None
    ) -> list[Line]:
        """``user``'s lines (of one thread, or of every thread with ``bot``, or with every
        bot); without ``thread``, with the lines of every identity linked with them
        (:mod:`membot.memory.person_links`), each line saying whose it is."""
        if thread is not None:
            return self.store.history(user, bot, thread)
        return linked_history(self.store, user, bot)

    def is_stored(self, line: Line) -> bool:
        """Whether ``line`` is still in the store (not forgotten since it was read)."""
        return bool(self.store.lines([line.id]))

    def count_lines(self) -> int:
        return self.store.count_lines()

    # -- threads --------------------------------------------------------------------------

    def threads(self, *, user: str, bot: str | None = None) -> list[ThreadInfo]:
        """A person's threads (with one bot, or every bot), oldest first, with those of every
        identity linked with them (each thread names its person)."""
        return linked_threads(self.store, user, bot)

    def people(self, bot: str) -> list[str]:
        """The people who have talked with ``bot``, by name."""
        return self.store.people(bot)

    def thread_state(self, *, bot: str, user: str, thread: str) -> ThreadState | None:
        """A thread's bookkeeping (ended, running summary), or None if it does not exist."""
        return self.store.thread_state(ThreadKey(bot, user, thread))

    def open_threads(self, bot: str, user: str | None = None) -> list[ThreadState]:
        """Threads of a bot (one person's, or everyone's) that have lines and are not ended."""
        return self.store.open_threads(bot, user)

    def end_thread(self, state: ThreadState, when: datetime | None = None) -> None:
        self.store.end_thread(state.id, when)

    def save_thread_summary(self, state: ThreadState, summary: str, through_seq: int) -> None:
        """Keep ``summary`` as the thread's running summary of its lines up to ``through_seq``."""
        self.store.save_thread_summary(state.id, summary, through_seq)

    def thread_lines(
        self, *, user: str, bot: str, thread: str, after_seq: int = 0, limit: int = 100
    ) -> list[Line]:
        """Up to ``limit`` lines of one thread after ``after_seq``, in order;
        ``NotFoundError`` for a thread the person does not have."""
        thread_id = self.store.thread_id(ThreadKey(bot, user, thread))
        if thread_id is None:
            raise NotFoundError(f"{user!r} has no thread {thread!r} with bot {bot!r}")
        return self.store.lines_after(thread_id, after_seq, limit)

    def new_thread_name(self, *, bot: str, user: str, now: datetime | None = None) -> str:
        """A name for a new thread, dated, never one the person already has with ``bot``
        (two in one second would otherwise share a thread, and a line in an ended thread
        takes it up again). Written as the web app names its threads: chat-2026-03-14-093000."""
        base = name = aware(now or datetime.now()).strftime("chat-%Y-%m-%d-%H%M%S")
        count = 1
        while self.store.thread_id(ThreadKey(bot, user, name)) is not None:
            count += 1
            name = f"{base}-{count}"
        return name

    def recent(self, line: Line, count: int) -> list[Line]:
        """The ``count`` lines of ``line``'s thread just before it, oldest first."""
        thread_id = self._thread_id(line)
        if count <= 0 or line.seq <= 1:
            return []
        return lines_between(self.store, thread_id, max(1, line.seq - count), line.seq - 1)

    def _thread_id(self, line: Line) -> int:
        thread_id = self.store.thread_id(ThreadKey(line.bot, line.person, line.thread))
        if thread_id is None:
            raise StoreError(f"thread {line.thread!r} of {line.person!r} is not in the store")
        return thread_id

    # -- recall ---------------------------------------------------------------------------

    def recall(
        self,
        line: Line,
        settings: BotSettings | None = None,
        vector: np.ndarray | None = None,
        match_text: str | None = None,
        now: datetime | None = None,
        prepared: Mapping[str, np.ndarray] | None = None,
    ) -> Recall:
        """Match ``line`` (or ``match_text``, the bot's history match string) against earlier
        lines with the bot's strategy, update the thread's buffer, and return the buffer's
        blocks (lines of the feed left out: they are in the prompt already). Time words in
        the line itself ("last week") are read from ``now`` (with its time zone), by
        default when the line was said. ``vector`` and ``prepared``: the line's, from
        :meth:`embed_question` (used where the line is the match string)."""
        started = time.perf_counter()
        settings = settings or self.bot_settings(line.bot)
        query = line.text if match_text is None else match_text
        if vector is None or query != line.text:
            vector, prepared = self.embed_question(
                query, settings, keep=query == line.text, said=line.text
            )
        thread_id = self._thread_id(line)
        # The feed is the window_size lines before the new one; neither is searched.
        window_from = line.seq - settings.window_size
        person_id = self.store.person_id(line.person)
        bot_id = self.store.bot_id(line.bot) or 0
        scope = Scope.of(
            bot_id, person_id, settings, feed=(thread_id, window_from), links=self.store
        )
        asked = check_moment(now, "now") if now is not None else line.created_at
        with self.recall_source.reading() as source:
            chosen = recall_for_turn(
                source, settings, query, vector, scope, asked, line.text, prepared
            )
        fresh = list(chosen.blocks)
        size = settings.buffer_size
        buffer = self.store.change_buffer(thread_id, lambda held: push_to_buffer(held, fresh, size))
        if size == 0:  # nothing is carried to later turns, but this turn's matches count
            buffer = fresh
        # A fresh block may have absorbed an older entry: the entry holding it is fresh.
        fresh_keys = {
            (entry.source_thread_id, entry.first_seq)
            for entry in buffer
            for block in fresh
            if entry.source_thread_id == block.source_thread_id
            and entry.first_seq <= block.first_seq
            and block.last_seq <= entry.last_seq
        }
        # Blocks held from when the bot shared memory across people stay out once it does not,
        # and those of an identity once it is no longer linked with this one.
        owners = None if settings.share_across_people else self._owners(line.bot, line.person)
        blocks = self._load_blocks(
            buffer, thread_id, window_from, fresh_keys, owners, settings.recall_roles
        )
        matches = tuple(self._matches([(hit.line_id, hit.score) for hit in chosen.hits],
                                      [hit.duplicates for hit in chosen.hits]))  # fmt: skip
        return Recall(matches, blocks, (time.perf_counter() - started) * 1000)

    def preview_recall(
        self,
        text: str,
        *,
        user: str,
        bot: str = DEFAULT_BOT,
        thread: str | None = None,
        now: datetime | None = None,
    ) -> Recall:
        """What a turn saying ``text`` would recall now, with scores, without storing the
        text or changing any thread's buffer. With ``thread``, its feed (the last
        ``window_size`` lines) is left out, as in a turn."""
        started = time.perf_counter()
        settings = self.bot_settings(bot)
        bot_id, person_id = self.store.bot_id(bot), self.store.person_id(user)
        if bot_id is None or (person_id is None and not settings.share_across_people):
            return Recall((), (), 0.0)
        thread_id = self.store.thread_id(ThreadKey(bot, user, thread)) if thread else None
        window_from, feed = None, None
        if thread_id is not None:
            last = self.store.last_lines(thread_id, 1)
            window_from = (last[-1].seq + 1 if last else 1) - settings.window_size
            feed = (thread_id, window_from)
        scope = Scope.of(bot_id, person_id, settings, feed=feed, links=self.store)
        # Recall without storing: a query, kept nowhere.
        vector, prepared = self.embed_question(text, settings, keep=False)
        asked = check_moment(now, "now") if now is not None else utc_now()
        with self.recall_source.reading() as source:
            chosen = recall_for_turn(source, settings, text, vector, scope, asked, text, prepared)
        owners = None if settings.share_across_people else self._owners(bot, user)
        fresh = {(entry.source_thread_id, entry.first_seq) for entry in chosen.blocks}
        blocks = self._load_blocks(
            chosen.blocks, thread_id or 0, window_from or 0, fresh, owners, settings.recall_roles
        )
        matches = tuple(self._matches([(hit.line_id, hit.score) for hit in chosen.hits],
                                      [hit.duplicates for hit in chosen.hits]))  # fmt: skip
        return Recall(matches, blocks, (time.perf_counter() - started) * 1000)

    def _owners(self, bot: str, person: str) -> frozenset[str]:
        """Whose lines a person's recall may show: theirs and their linked identities'."""
        return frozenset(self.store.linked_people(bot, person))

    def _load_blocks(
        self,
        buffer: Sequence[BufferEntry],
        thread_id: int,
        window_from: int,
        fresh_keys: set[tuple[int, int]],
        owners: frozenset[str] | None,
        roles: Sequence[str],
    ) -> tuple[Block, ...]:
        blocks = []
        ranges = [
            (entry.source_thread_id, entry.first_seq,
             min(entry.last_seq, window_from - 1)  # those lines are in the feed
             if entry.source_thread_id == thread_id else entry.last_seq)
            for entry in buffer
        ]  # fmt: skip
        for entry, found in zip(buffer, self.store.lines_in_ranges(ranges), strict=True):
            # Expansion brings neighbours by seq; roles left out of recall (tool results)
            # stay out of the blocks too.
            lines = [line for line in found if str(line.role) in roles]
            if lines and (owners is None or lines[0].person in owners):
                carried = (entry.source_thread_id, entry.first_seq) not in fresh_keys
                blocks.append(Block(lines[0].thread, lines[0].person, tuple(lines), entry.score,
                                    entry.matched_seqs, carried))  # fmt: skip
        return tuple(sorted(blocks, key=lambda block: block.started_at))

    # -- forgetting and re-embedding ------------------------------------------------------

    def forget(
        self, *, user: str, bot: str | None = None, thread: str | None = None
    ) -> dict[str, int]:
        """Remove a person's threads (or one): lines, vectors, lexical rows, buffer entries,
        summaries, what this process holds of them in memory, and their cached embeddings
        (a vector can be turned back into text); the store overwrites what it freed.

        Without ``bot`` it reaches every bot: all the person's threads, or each bot's thread
        named ``thread`` (unlike :meth:`add` and :meth:`search`, whose ``bot`` defaults to
        the default bot). Without ``thread``, every identity linked with the person by a bot
        it reaches (:mod:`membot.memory.person_links`) is forgotten with it, with the links
        and link codes, in one transaction: all of them or, where it fails, none. Returns
        counts of what was removed (``threads``, ``lines``, ...)."""
        from membot.memory.forgetting import derived_texts, drop_removed

        owners = identities(self.store, user, bot) if thread is None else [(user, bot)]
        texts: list[str] = []
        for person, each in owners:
            history = self.store.history(person, each, thread)
            summaries = [s for s in self.store.summaries(person, each)
                         if thread in (None, s.thread)]  # fmt: skip
            texts += derived_texts(history, summaries, self.window_shapes())
        # One transaction for the whole group: a forget cut short leaves every identity and
        # the links between them, so asking again reaches them all.
        removed = self.store.forget_identities(owners, thread)
        try:
            drop_removed(self.recall_source, self.embedder, texts)
        finally:
            self.store.finish_removal()  # also a rewrite an earlier forget could not finish
        return removed

    def _embedding_texts(
        self, rows: Sequence[tuple[int, str]]
    ) -> tuple[list[str], list[list[tuple[int, int]]]]:
        """What each (line id, text) is embedded as (its speaker read from the store), then
        its parts, and the parts' spans by line."""
        speakers = {line.id: line.speaker for line in self.store.lines([i for i, _ in rows])}
        texts = [embedding_text(text, speakers.get(line_id)) for line_id, text in rows]
        spans = [part_spans(text) for _, text in rows]
        for (line_id, text), each in zip(rows, spans, strict=True):
            texts += part_texts(text, speakers.get(line_id), each)
        return texts, spans

    def reindex(self, embedder: Embedder, batch_size: int = 256,
                progress: Callable[[int], None] | None = None) -> int:  # fmt: skip
        """Re-embed every line (and its parts, cut again), summary and expertise chunk with
        ``embedder`` and make it the store's embedder; returns the number of lines."""
        generation = self.store.generation()
        rows = self.store.all_line_texts()
        vectors: list[tuple[int, np.ndarray]] = []
        parts: list[tuple[int, LineParts]] = []
        for start in range(0, len(rows), batch_size):
            chunk = rows[start : start + batch_size]
            texts, spans = self._embedding_texts(chunk)
            embedded = _embedded(embedder, texts)
            own = embedded[: len(chunk)]
            vectors.extend((line_id, v) for (line_id, _), v in zip(chunk, own, strict=True))
            at = len(chunk)
            for (line_id, _), each in zip(chunk, spans, strict=True):
                if each:
                    parts.append((line_id, LineParts(tuple(each), embedded[at : at + len(each)])))
                    at += len(each)
            if progress:
                progress(len(chunk))
        extras: dict[str, list[tuple[int, np.ndarray]]] = {}
        for table, held in self.store.all_extra_texts().items():  # summaries, expertise
            extras[table] = []
            if table == "memories":  # a summary's vectors: the whole, then each key point
                extras[table] = [(i, _embedded(embedder, summary_parts(text))) for i, text in held]
                continue
            for start in range(0, len(held), batch_size):
                chunk = held[start : start + batch_size]
                embedded = _embedded(embedder, [text for _, text in chunk])
                extras[table] += [(i, v) for (i, _), v in zip(chunk, embedded, strict=True)]
        dimension = embedder.dimension if not vectors else int(vectors[0][1].shape[0])
        meta = {"embedder": embedder.name, "dimension": str(dimension)}
        last_id = rows[-1][0] if rows else 0
        self.store.replace_vectors(
            vectors, meta, last_id=last_id, generation=generation, extras=extras, parts=parts
        )
        self.embedder = embedder
        return len(vectors)


def _embedded(embedder: Embedder, texts: list[str]) -> np.ndarray:
    return checked_vectors(embedder.embed(texts), len(texts), embedder.name)
