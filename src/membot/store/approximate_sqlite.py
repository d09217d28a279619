"""Approximate search on SQLite: a usearch HNSW index of int8 vectors (about 530 bytes a line
with its graph, where float32 takes 1,536 for the vector alone; the candidates are rescored
from the store's float32 vectors, so int8's rounding only shuffles the 200 nominees), built
from the store page by page the first time, saved beside the store file
(``<store>.ann/bot-<id>.usearch``) so that a new process loads it instead of building it, and
brought up to date from the store (the lines past its cursor) before each search. After lines
of the bot are removed, a child process builds it again (:mod:`membot.store.approximate_build`)
while the old graph, without them, answers.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from membot.errors import StoreError
from membot.store.near_lines import SEARCH_DEPTH, PagedStore

if TYPE_CHECKING:
    from usearch.index import Index

log = logging.getLogger(__name__)

BUILD_MODULE = "membot.store.approximate_build"  # run as python -m, in a child process


class Rebuild:
    """A child process building one bot's graph (the parent's handle on it)."""

    def __init__(self, store_path: Path, bot_id: int, generation: int) -> None:
        self.generation = generation  # the bot's when it started: its file is of this or later
        self.process = subprocess.Popen(
            [sys.executable, "-m", BUILD_MODULE, str(store_path), str(bot_id)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,  # its errors go to the parent's stderr, as its own
        )

    def running(self) -> bool:
        return self.process.poll() is None

    def wait(self, timeout: float | None = None) -> None:
        self.process.wait(timeout)


# usearch's graph: 16 links a node (32 on the ground layer); 64 candidates kept while adding,
# half usearch's default, since building is what a large scope waits for the first time and
# the nominees are rescored exactly anyway.
CONNECTIVITY, EXPANSION_ADD = 16, 64
PAGE_LINES = 20_000  # vectors read from the store at a time while building (30 MB)
PART = ".part"  # the suffix of an index file being written, renamed over the old when whole
SAVE_EVERY = 1_000  # lines added since the index file was written, at least, before it is again


class UsearchNominator:
    """Nominees from a usearch index of one bot's lines, kept beside the SQLite store file.

    The file records the cursor (last line id added), the embedder its vectors came from and
    the bot's generation: a new process loads it and adds the lines past the cursor. When
    the bot's lines were removed or re-embedded (its generation moved: forgetting in that
    bot, deleting it, ``membot reindex``), a process holding a graph takes the removed lines'
    keys out of it at its next search, so no search nominates them, and goes on answering
    from it while a child process (:mod:`membot.store.approximate_build`) builds a fresh graph from
    the store and saves it; the process then loads that file in place of its own, and the
    removed lines' bytes (usearch's removal keeps them in the graph) leave its memory. A
    graph that had lines taken out is never saved, and a file of an older generation is
    never loaded. A process with no graph yet, or whose embedder changed, builds one itself
    at its search. Forgetting also removes that bot's saved files at once
    (:func:`drop_saved_files`); other bots' indexes, in files and in memory, stand."""

    def __init__(self, store: PagedStore, bot_id: int, add_threads: int = 0) -> None:
        self.store, self.bot_id = store, bot_id
        folder = Path(f"{store.path}.ann")
        self.path, self.stamp_path = folder / f"bot-{bot_id}.usearch", folder / f"bot-{bot_id}.json"
        self.index: Index | None = None
        self.cursor = 0
        self.made_by: list[str | None] | None = None
        self.generation: int | None = None
        self.unsaved = 0
        self.add_threads = add_threads  # 0: every core
        self.rebuild: Rebuild | None = None  # the fresh graph a child builds while this answers

    def nominate(self, query: np.ndarray, count: int) -> list[int]:
        index = self.refresh()
        if len(index) == 0:
            return []
        # usearch 2.21 defines this setter apart from its getter, which mypy reads as read-only.
        index.expansion_search = max(SEARCH_DEPTH, count)  # type: ignore[misc]
        matches = index.search(np.asarray(query, dtype=np.float32), count, threads=1)
        return [int(key) for key in matches.keys]

    def take_out_removed(self) -> None:
        """A graph held takes the lines the store no longer holds out now (a fresh one is
        built beside it); none held: the first search builds or loads one."""
        if self.index is not None:
            self.refresh()

    def refresh(self) -> Index:
        """The index, with every line of the bot up to now."""
        generation = self.store.bot_generation(self.bot_id)
        if self.rebuild is not None and not self.rebuild.running():
            self._take_rebuilt(generation)
        if generation != self.generation or self.index is None:
            made_by = self._made_by()
            if self.index is None:
                self._load(made_by, generation)
            if made_by != self.made_by or self.generation not in (None, generation):
                if self.index is not None and made_by == self.made_by:
                    self._answer_while_rebuilt(self.index)
                else:
                    self._start(made_by)
            self.generation = generation
        self._add_new()
        return self._graph()

    def _graph(self) -> Index:
        """The graph held: every caller comes after :meth:`refresh` loaded or started one."""
        if self.index is None:
            raise StoreError(f"bot {self.bot_id}'s approximate index was used before it was built")
        return self.index

    def settle(self, timeout: float | None = None) -> None:
        """Wait for the fresh graph being built, if one is, and take it in place of this one."""
        if self.rebuild is not None:
            self.rebuild.wait(timeout)
            self.refresh()

    def _answer_while_rebuilt(self, index: Index) -> None:
        """Take the lines the store no longer holds out of the graph, and have a child
        process build a fresh one (unless one is at it already)."""
        alive = self.store.bot_line_ids(self.bot_id)
        if not len(alive):  # the bot was deleted or emptied: nothing to build
            self._start(self.made_by)
            return
        keys = np.asarray(index.keys, dtype=np.int64)
        gone = np.setdiff1d(keys, alive, assume_unique=True)
        if len(gone):
            index.remove(gone)
        log.info("lines of bot %s were removed or re-embedded: %d left its graph, which answers "
                 "while a fresh one is built", self.bot_id, len(gone))  # fmt: skip
        if self.rebuild is None or not self.rebuild.running():
            self._rebuild_beside()

    def _rebuild_beside(self) -> None:
        """A child process building a fresh graph; where none can start, one built here."""
        try:
            generation = self.store.bot_generation(self.bot_id)
            self.rebuild = Rebuild(Path(self.store.path), self.bot_id, generation)
        except OSError as error:
            log.warning("cannot start a process to build bot %s's graph (%s): building it "
                        "here", self.bot_id, error)  # fmt: skip
            self._start(self.made_by)

    def _take_rebuilt(self, generation: int) -> None:
        """The child is done: load what it saved, if of the bot's generation now; if lines
        went again while it built, have another build; if it failed, build here."""
        rebuild, self.rebuild = self.rebuild, None
        if self._load(self.made_by, generation):
            self.generation, self.unsaved = generation, 0
            log.info("bot %s's fresh graph is loaded", self.bot_id)
        elif rebuild is not None and generation != rebuild.generation:
            self._rebuild_beside()  # lines went again after it started: its file is old
        else:
            status = rebuild.process.returncode if rebuild is not None else None
            log.warning("building bot %s's graph in a child process failed (exit status %s): "
                        "building it here", self.bot_id, status)  # fmt: skip
            self._start(self.made_by)

    def _new_index(self, dimension: int) -> Index:
        from usearch.index import Index  # an import of native code, only where it is used

        return Index(
            ndim=dimension,
            metric="cos",
            dtype="i8",
            connectivity=CONNECTIVITY,
            expansion_add=EXPANSION_ADD,
            expansion_search=SEARCH_DEPTH,
        )

    def _start(self, made_by: list[str | None] | None) -> None:
        """An empty graph, which :meth:`_add_new` fills from the store, here."""
        if self.generation is not None:
            log.info("building the approximate index of bot %s here", self.bot_id)
        self.index = self._new_index(int((made_by or [None, None])[1] or 0))
        self.made_by, self.cursor, self.unsaved, self.rebuild = made_by, 0, 0, None

    def _made_by(self) -> list[str | None]:
        """The store's embedder and dimension, as a saved index's stamp records them."""
        return [self.store.get_meta("embedder"), self.store.get_meta("dimension")]

    def _current_stamp(
        self, made_by: list[str | None] | None, generation: int
    ) -> dict[str, Any] | None:
        """The saved index's stamp, if it is of ``made_by``'s vectors at ``generation``."""
        try:
            stamp = json.loads(self.stamp_path.read_text())
        except (OSError, ValueError):
            return None
        current = stamp.get("made_by") == made_by and stamp.get("generation") == generation
        return stamp if current and "cursor" in stamp else None

    def saved_is_current(self) -> bool:
        """Whether the saved index is of the store's embedder and the bot's generation now
        (another process built it already)."""
        stamp = self._current_stamp(self._made_by(), self.store.bot_generation(self.bot_id))
        return stamp is not None and self.path.exists()

    def _load(self, made_by: list[str | None] | None, generation: int) -> bool:
        """The saved index, where one of this embedder's vectors, of the bot's generation, is
        there and readable; whether it was."""
        stamp = self._current_stamp(made_by, generation)
        if stamp is None:
            return False
        try:
            from usearch.index import Index

            index = Index.restore(str(self.path))
        except (OSError, ValueError, RuntimeError) as error:
            log.info("building the approximate index of bot %s again: %s", self.bot_id, error)
            return False
        if index is None:
            return False
        self.index, self.made_by, self.cursor = index, made_by, int(stamp["cursor"])
        return True

    def _add_new(self) -> None:
        index = self._graph()
        added = 0
        while True:
            rows = self.store.vector_page(self.bot_id, self.cursor, PAGE_LINES)
            if not len(rows.ids):
                break
            if self.cursor == 0 and added == 0:
                log.info("building the approximate index of bot %s", self.bot_id)
            new = ~np.asarray(index.contains(rows.ids), dtype=np.bool_)
            if new.any():
                index.add(rows.ids[new], rows.vectors[new], threads=self.add_threads)
            self.cursor, added = int(rows.ids[-1]), added + int(new.sum())
        self.unsaved += added
        if self.unsaved >= max(SAVE_EVERY, len(index) // 100):
            self.save()

    def save(self) -> None:
        """Write the index and its stamp (each to a new file renamed over the old: a reader
        sees a whole file; an index newer than its stamp only re-reads lines it skips). Not
        while a fresh graph is built: this one had lines taken out, whose bytes it keeps."""
        if self.rebuild is not None:
            return
        index = self._graph()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        stamp = json.dumps(
            {"made_by": self.made_by, "cursor": self.cursor, "generation": self.generation}
        )
        for target, write in (
            (self.path, lambda name: index.save(name)),
            (self.stamp_path, lambda name: Path(name).write_text(stamp)),
        ):
            handle, name = tempfile.mkstemp(dir=self.path.parent, suffix=PART)
            os.close(handle)
            try:
                write(name)
                os.replace(name, target)
            except FileNotFoundError:  # a forget removed the file being written: not saved
                log.info("bot %s's index was not saved: lines were forgotten", self.bot_id)
                return
            finally:
                Path(name).unlink(missing_ok=True)
        self.unsaved = 0
        if self.store.bot_generation(self.bot_id) != self.generation:
            # Lines went while this was written, after the forget removed the files: what
            # was just written may hold them, and is never loaded; it goes too.
            for written in (self.stamp_path, self.path):
                written.unlink(missing_ok=True)


def drop_saved_files(store: PagedStore) -> None:
    """Remove the approximate indexes saved beside a SQLite store (``<store>.ann``) that are
    not of their bot's generation, after lines were forgotten or a bot deleted: the
    forgotten lines' vectors are in them. Each process builds those bots' indexes again from
    the store at its next search of them (their generation moved); other bots' files stay."""
    folder = Path(f"{store.path}.ann")
    for stamp_path in folder.glob("bot-*.json"):
        try:
            stamp = json.loads(stamp_path.read_text())
            current = stamp["generation"] == store.bot_generation(int(stamp_path.stem[4:]))
        except (OSError, ValueError, KeyError, TypeError):
            current = False
        if not current:
            _remove(stamp_path.with_suffix(".usearch"))
            _remove(stamp_path)
    for saved in folder.glob("bot-*.usearch"):
        if not saved.with_suffix(".json").exists():  # no stamp: no telling what it holds
            _remove(saved)
    for part in folder.glob(f"*{PART}"):  # being written, or left by a process killed meanwhile
        _remove(part)


def _remove(saved: Path) -> None:
    try:
        saved.unlink(missing_ok=True)
    except OSError as error:
        raise StoreError(
            f"the lines are forgotten, but {saved} (an approximate index holding their "
            f"vectors) could not be removed: {error.strerror}; remove it by hand"
        ) from error
