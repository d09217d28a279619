"""A turn's cost as the store grows: stores of 10k, 100k and 1M lines from 1,000 people, on
SQLite and PostgreSQL, asked by one person and by a bot that shares memory across them all.

The person talking holds the lines of LoCoMo's first dev conversation. The other lines are
LoCoMo and LongMemEval dev lines again, spread over 999 people in threads of 40, written in
batches of 5,000 with their vectors given (``Store.add_lines``): what an import writes, the
embedding aside. Each line has its real MiniLM vector of ``Speaker: text`` and, as an import
cuts them (``membot.memory.line_parts``), its parts with theirs, all embedded once through the
embedding cache (the first build embeds the parts not there yet: about 230,000 sentences of
LongMemEval's long lines). A store is built once per size and kept under ``--cache`` (SQLite
files; PostgreSQL databases of a pgserver kept there), so a rerun only measures; its name
carries ``STORES``, so a store an older version of this script wrote is not reused. On
PostgreSQL the HNSW index is built after the lines (what ``membot migrate`` does), on SQLite
the shared bot's usearch index is built by a first search and saved beside the file.

Each measurement runs in a new process, which first warms up as ``membot serve`` does before
its first request (the embedder loaded; a bot that shares memory has its lines or its
approximate index loaded; the warm-up's time is printed):
the talker asks LoCoMo's questions as turns (blend, the default strategy; scripted LLM), first
with the bot keeping each person's memory apart (``person``), then sharing memory across
people (``shared``: the scope is every line, searched approximately past 50,000 lines). It
prints ``memory_total`` of the first turn and p50/p95 of the others, the search's p50, the
process's peak RSS, the store's bytes per line on disk and the filler's lines per second.

    .venv/bin/python benchmarks/scale.py [--sizes 10000 100000 1000000]
        [--stores sqlite postgresql] [--turns 30] [--cache DIR] [--png DIR] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np
from machine import announce

from membot import Bot, Memory, ScriptedLLM, migrate_store
from membot.embed import default_embedder
from membot.eval import shared_data_dir
from membot.eval.harness import cached_embedder
from membot.memory.importers import read_file
from membot.memory.line_parts import part_spans, part_texts
from membot.model import Role, embedding_text
from membot.store import NewLine, ThreadKey, open_store
from membot.store.base import LineParts
from membot.store.sql_store import SqlStore

LOCOMO = shared_data_dir() / "locomo" / "locomo_dev.json"
LONGMEMEVAL = shared_data_dir() / "longmemeval" / "longmemeval_s_dev.json"
PEOPLE, THREAD_LINES, BATCH = 1000, 40, 5000
BOT, TALKER = "scale", "talker"
CACHE = Path.home() / ".cache" / "membot-scale"
# In each store's name: v2 stores hold their lines' parts, v1 stores (unnamed) did not.
STORES = "v2"
EMBED_CHUNK = 10_000  # texts per call to the embedder: the cache keeps each chunk as it ends


class Corpus:
    """Every dev line with its vector and its parts (the filler, reused in turn), and the
    places of the talker's lines among them."""

    def __init__(self) -> None:
        locomo = read_file(LOCOMO, "locomo", BOT, None).lines
        self.lines = locomo + read_file(LONGMEMEVAL, "longmemeval", BOT, None).lines
        self.talker = [n for n, line in enumerate(locomo) if line.user == locomo[0].user]
        spans = [part_spans(line.text) for line in self.lines]
        texts = [embedding_text(line.text, line.speaker) for line in self.lines]
        texts += [
            text
            for line, each in zip(self.lines, spans, strict=True)
            for text in part_texts(line.text, line.speaker, each)
        ]
        embedded = embedded_in_chunks(texts)
        self.vectors = embedded[: len(self.lines)]
        self.parts = with_vectors(spans, embedded[len(self.lines) :])
        self.by = ("sentence-transformers/all-MiniLM-L6-v2", int(self.vectors.shape[1]))

    def new_line(self, at: int, person: str, thread: str) -> NewLine:
        line = self.lines[at]
        key = ThreadKey(BOT, person, thread)
        vector, parts = self.vectors[at], self.parts[at]
        role = Role(line.role)
        return NewLine(key, role, line.text, vector, 12, line.created_at, line.speaker, parts=parts)


def with_vectors(spans: list[list[tuple[int, int]]], vectors: np.ndarray) -> list:
    """Each line's parts: its spans with the next rows of ``vectors`` (None: no parts)."""
    parts: list[LineParts | None] = []
    at = 0
    for each in spans:
        parts.append(LineParts(tuple(each), vectors[at : at + len(each)]) if each else None)
        at += len(each)
    return parts


def embedded_in_chunks(texts: list[str]) -> np.ndarray:
    """``texts`` embedded through the shared cache, ``EMBED_CHUNK`` at a time (with the
    progress on stderr when any were missing)."""
    embedder = cached_embedder("minilm")
    rows = []
    for start in range(0, len(texts), EMBED_CHUNK):
        rows.append(embedder.embed(texts[start : start + EMBED_CHUNK]))
        if getattr(embedder, "misses", 0):
            print(f"embedded {start + len(rows[-1]):,} of {len(texts):,} texts", file=sys.stderr)
    return np.vstack(rows)


def fill(store, size: int) -> float:
    """The talker's conversation, then filler up to ``size`` lines; filler lines per second
    (the lines with their parts, as an import writes them)."""
    corpus = Corpus()
    talker = [corpus.new_line(at, TALKER, corpus.lines[at].thread) for at in corpus.talker]
    store.add_lines(talker, corpus.by)
    started, written, batch = time.perf_counter(), len(talker), []
    for position in range(size - len(talker)):
        person = f"person-{position // THREAD_LINES % (PEOPLE - 1)}"
        thread = f"t{position // (THREAD_LINES * (PEOPLE - 1))}"
        batch.append(corpus.new_line(position % len(corpus.lines), person, thread))
        if len(batch) == BATCH or position == size - len(talker) - 1:
            store.add_lines(batch, corpus.by)
            written, batch = written + len(batch), []
    return (written - len(talker)) / max(time.perf_counter() - started, 1e-9)


def postgres_server(cache: Path) -> str:
    """A pgserver kept under ``cache``: stopped when this run ends, its databases kept."""
    folder = cache / "pg"
    folder.mkdir(parents=True, exist_ok=True)
    # pgserver keeps its bookkeeping in the runtime folder, which must be private, and opens
    # every folder above its data to the user it runs PostgreSQL as (under root): so the two
    # are apart. Both were ``pg``, made private again at the second size of a run, and the
    # running server lost its data folder (PANIC at its next checkpoint).
    runtime = cache / "pg-runtime"
    runtime.mkdir(mode=0o700, exist_ok=True)
    os.environ.setdefault("XDG_RUNTIME_DIR", str(runtime))
    from pgserver.postgres_server import get_server

    return get_server(folder / "data", cleanup_mode="stop").get_uri()


def location(kind: str, size: int, cache: Path) -> str:
    """Where the store of ``size`` lines lives; a PostgreSQL database is made if missing."""
    if kind == "sqlite":
        return str(cache / f"scale-{size}-{STORES}.db")
    import psycopg

    server = postgres_server(cache)
    name = f"scale_{size}_{STORES}"
    with psycopg.connect(server, autocommit=True) as connection:
        connection.execute("CREATE EXTENSION IF NOT EXISTS vector")
        known = "SELECT 1 FROM pg_database WHERE datname = %s"
        if not connection.execute(known, (name,)).fetchone():
            connection.execute(f"CREATE DATABASE {name}")
    return server.replace("/postgres?", f"/{name}?")


def build(kind: str, size: int, url: str, cache: Path, measure_only: bool = False) -> dict | None:
    """The store, filled and indexed unless it was already (its meta says how fast); None
    when it was not and ``measure_only`` says not to."""
    store = open_store(url)
    try:
        if store.get_meta("scale_lines_per_s") is None:
            if measure_only:
                print(f"skipped: no {kind} store of {size:,} lines built yet", file=sys.stderr)
                return None
            print(f"building the {kind} store of {size:,} lines", file=sys.stderr)
            if kind == "postgresql":
                store.close()
                rate, index_s = fill_postgres(size, url, cache), 0.0
                store = open_store(url)
            else:
                rate = fill(store, size)
                index_s = shared_search_once(url)
            assert isinstance(store, SqlStore)
            store.set_meta({"scale_lines_per_s": str(round(rate)), "scale_index_s": str(index_s)})
        built: dict[str, Any] = {
            "filler_lines_per_s": int(store.get_meta("scale_lines_per_s") or 0),
            "first_shared_search_s": float(store.get_meta("scale_index_s") or 0),
            "stored_lines": store.count_lines(),
        }
    finally:
        store.close()
    built.update(disk_bytes(kind, url, built["stored_lines"]))
    return built


def fill_postgres(size: int, url: str, cache: Path) -> float:
    """The SQLite store of the same size copied in by ``membot migrate`` (its tables in
    batches, then the HNSW index; writing lines one by one through ``add_lines`` runs at
    about 140 lines/s here); lines per second of the whole copy."""
    import psycopg

    source = location("sqlite", size, cache)
    build("sqlite", size, source, cache)
    with psycopg.connect(url, autocommit=True) as connection:
        # HNSW builds in memory when its graph fits (about 1.7 GB at a million lines).
        database = f"scale_{size}_{STORES}"
        connection.execute(f"ALTER DATABASE {database} SET maintenance_work_mem = '2GB'")
    started = time.perf_counter()
    migrate_store(source, url)
    rate = size / (time.perf_counter() - started)
    with psycopg.connect(url, autocommit=True) as connection:
        # What an operator runs after a bulk load: without it the first turn of one run at
        # 10,000 lines took 34 s (the tables had no statistics yet).
        connection.execute("VACUUM ANALYZE")
    return rate


def shared_search_once(url: str) -> float:
    """Seconds the first search of the shared scope takes: it builds the approximate index of
    a scope past the threshold, saved beside the SQLite file."""
    memory = Memory(url, embedder=default_embedder())
    try:
        started = time.perf_counter()
        memory.search("what did they say about the weekend?", bot=BOT)
        return time.perf_counter() - started
    finally:
        memory.close()


def disk_bytes(kind: str, url: str, lines: int) -> dict:
    if kind == "sqlite":
        from membot.store.sqlite_driver import sqlite3

        path = Path(url)
        with sqlite3.connect(path) as connection:  # the write-ahead log into the file
            connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        files = [path, Path(f"{path}-wal")]
        ann = sum(f.stat().st_size for f in Path(f"{path}.ann").glob("*.usearch"))
        total = sum(f.stat().st_size for f in files if f.exists())
        return {"bytes_per_line": round(total / lines), "ann_bytes_per_line": round(ann / lines)}
    import psycopg

    with psycopg.connect(url) as connection:
        row = connection.execute("SELECT pg_database_size(current_database())").fetchone()
    assert row is not None
    (total,) = row
    return {"bytes_per_line": round(total / lines), "ann_bytes_per_line": 0}


def questions(count: int) -> list[tuple[str, str]]:
    data = json.loads(LOCOMO.read_text())
    return [(qa["question"], str(qa.get("answer", ""))) for qa in data[0]["qa"]][:count]


def measure(url: str, mode: str, turns: int) -> dict:
    """Turns of the talker in a process of its own: ``person`` or ``shared`` memory."""
    memory = Memory(url, embedder=default_embedder())
    memory.configure_bot(BOT, share_across_people=mode == "shared")
    started = time.perf_counter()
    memory.warm_up(shared_memory=True)  # what `membot serve` does before its first request
    warm_up_ms = (time.perf_counter() - started) * 1000
    asked = questions(turns + 1)
    bot = Bot(memory, ScriptedLLM([f"I think it was {answer}." for _, answer in asked]), name=BOT)
    timings = []
    for number, (question, _) in enumerate(asked):
        turn = bot.turn(question, user=TALKER, thread=f"asking-{mode}-{number}")
        timings.append(turn.timings_ms)
    memory.close()
    first, rest = timings[0], timings[1:]
    totals = sorted(t["memory_total"] for t in rest)
    return {
        "warm_up_ms": round(warm_up_ms, 1),
        "first_turn_ms": round(first["memory_total"], 1),
        "p50_ms": round(statistics.median(totals), 1),
        "p95_ms": round(totals[int(0.95 * (len(totals) - 1))], 1),
        "search_p50_ms": round(statistics.median(t["search"] for t in rest), 1),
        "peak_rss_mb": peak_rss_mb(),
    }


def peak_rss_mb() -> int:
    """This process's peak resident memory: VmHWM, not ``getrusage``'s ru_maxrss, which Linux
    carries over from the parent that started the process (here the builder's peak)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return round(int(line.split()[1]) / 1024)
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)


def measured(url: str, mode: str, turns: int) -> dict:
    """:func:`measure` in a new process, so its first turn and peak RSS are its own."""
    command = [sys.executable, __file__, "--measure", url, mode, "--turns", str(turns)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"measuring {mode} turns failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def run(
    kinds: list[str], sizes: list[int], turns: int, cache: Path, measure_only: bool = False
) -> list[dict]:
    cache.mkdir(parents=True, exist_ok=True)
    reports = []
    for kind in kinds:
        for size in sizes:
            url = location(kind, size, cache)
            built = build(kind, size, url, cache, measure_only)
            if built is None:
                continue
            report = {"store": kind, "lines": size, "people": PEOPLE, **built}
            for mode in ("person", "shared"):
                report[mode] = measured(url, mode, turns)
            report["load_average"] = round(os.getloadavg()[0], 1)
            print(json.dumps(report), file=sys.stderr)
            reports.append(report)
    return reports


def plot(reports: list[dict], folder: Path) -> None:
    """PNGs of p50 turn time and peak RSS against lines in the store, per store and scope."""
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt

    folder.mkdir(parents=True, exist_ok=True)
    charts = (
        ("p50_ms", "memory_total p50 (ms)", "scale-turn.png", "log"),
        ("peak_rss_mb", "peak RSS (MB)", "scale-rss.png", "linear"),
    )
    for key, label, name, yscale in charts:
        figure, axes = plt.subplots(figsize=(6, 4))
        for kind in sorted({r["store"] for r in reports}):
            for mode in ("person", "shared"):
                rows = [r for r in reports if r["store"] == kind]
                sizes, values = [r["lines"] for r in rows], [r[mode][key] for r in rows]
                axes.plot(sizes, values, marker="o", label=f"{kind}, {mode}")
        axes.set(xscale="log", yscale=yscale, xlabel="lines in the store", ylabel=label)
        axes.grid(True, alpha=0.3)
        axes.legend()
        figure.tight_layout()
        figure.savefig(folder / name, dpi=100)
        plt.close(figure)


def table(reports: list[dict]) -> None:
    print(
        "store       lines      scope   warm-up     first turn  p50       p95       search p50  "
        "RSS      bytes/line (+index)  filler lines/s  load"
    )
    for r in reports:
        disk = f"{r['bytes_per_line']:,}"
        if r["ann_bytes_per_line"]:
            disk += f" +{r['ann_bytes_per_line']}"
        for mode in ("person", "shared"):
            m = r[mode]
            print(
                f"{r['store']:<10} {r['lines']:>9,}  {mode:<7} {m['warm_up_ms']:>7.1f} ms  "
                f"{m['first_turn_ms']:>7.1f} ms  "
                f"{m['p50_ms']:>5.1f} ms  {m['p95_ms']:>5.1f} ms  {m['search_p50_ms']:>6.1f} ms  "
                f"{m['peak_rss_mb']:>4} MB  {disk:>19}  {r['filler_lines_per_s']:>14,}  "
                f"{r['load_average']}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--stores", nargs="+", default=["sqlite", "postgresql"])
    parser.add_argument("--turns", type=int, default=30)
    parser.add_argument("--cache", type=Path, default=CACHE, help="where built stores are kept")
    parser.add_argument("--png", type=Path, help="write the plots into this folder")
    parser.add_argument("--measure-only", action="store_true", help="skip the stores not built yet")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--measure", nargs=2, metavar=("URL", "MODE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(args.measure[0], args.measure[1], args.turns)))
        return
    announce()
    reports = run(args.stores, args.sizes, args.turns, args.cache, args.measure_only)
    if args.png:
        plot(reports, args.png)
    if args.json:
        print(json.dumps(reports, indent=2))
    else:
        table(reports)


if __name__ == "__main__":
    main()
