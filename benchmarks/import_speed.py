"""Import speed from an empty embedding cache: the LoCoMo dev file (2,760 lines) into a fresh
store, as ``membot import`` stores it, for each embedder named; and a generated ChatGPT export
of 50,000 messages (benchmarks/generated_exports.py) against the embedder's own speed.

    .venv/bin/python benchmarks/import_speed.py [--embedder minilm --embedder minilm-int8]
        [--runs 3] [--part locomo|chatgpt|both] [--chatgpt-messages 50000]

Each run is a new process with a new store and a new, empty embedding cache; the models are
exported (once, into the usual cache folder) and loaded before the clock starts, and their
load time is printed apart. Printed per run: wall seconds, lines per second, and the CPU
seconds of the process (all its threads), with the load average before and after, since on a
shared machine the wall time says as much about the neighbours as about membot. The LoCoMo
part uses only membot's public API, so it measures an older membot too:
``PYTHONPATH=OLD_CHECKOUT/src python benchmarks/import_speed.py --embedder minilm``.

The ChatGPT part alternates two kinds of run, each in its own process: the embedder alone
embedding what the import embeds, batch by batch: 256 lines and their parts, the sentences
of the long lines (read from the file and cut before the clock starts), and the whole import
of the file (reading it as a stream, embedding, storing); it prints both speeds, their ratio
(the goal: 0.85 or more, the import costing little beyond embedding) and the import's peak
resident memory (ru_maxrss; the goal: 500 MB or less).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from generated_exports import write_export
from machine import announce

from membot import ChatExport, Memory, read_file, resolve_embedder
from membot.embed import CachedEmbedder
from membot.eval import shared_data_dir
from membot.memory.line_parts import part_spans, part_texts
from membot.model import embedding_text

LOCOMO = shared_data_dir() / "locomo" / "locomo_dev.json"


def cached(spec: str, folder: Path) -> CachedEmbedder:
    """The embedder ``spec`` names behind a fresh cache in ``folder``, as membot makes it."""
    embedder = resolve_embedder(spec, cache_path=folder / "embeddings.db")
    assert isinstance(embedder, CachedEmbedder)
    return embedder


def one_run(spec: str, lines: list, folder: Path) -> tuple[float, float, float]:
    """(load seconds, import wall seconds, import CPU seconds) into a fresh store and cache."""
    started = time.perf_counter()
    embedder = cached(spec, folder)
    memory = Memory(folder / "import.db", embedder=embedder)
    embedder.inner.embed(["load the model"])  # the model, not the cache: it stays empty
    memory.tokens.count("load the tokenizer")
    loaded = time.perf_counter() - started
    wall, cpu = time.perf_counter(), time.process_time()
    added = memory.add_many(lines)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    assert added == len(lines) == memory.count_lines(), (added, len(lines))
    memory.close()
    return loaded, wall, cpu


BATCH = 256  # Memory.add_many's batch


def export_lines(path: Path) -> list:
    with ChatExport(path, None, bot="membot", user="ana") as export:
        return list(export.lines())


def embed_run(spec: str, path: Path, folder: Path) -> dict[str, float]:
    """The embedder alone over what an import embeds, batch by batch: each batch's lines
    and their parts (a line of 64+ word pieces is embedded whole and sentence by sentence,
    :mod:`membot.memory.line_parts`), in one call as ``Memory.add_many`` makes it."""
    lines = export_lines(path)
    batches = []
    for start in range(0, len(lines), BATCH):
        batch = lines[start : start + BATCH]
        texts = [embedding_text(x.text, x.speaker) for x in batch]
        texts += [part for x in batch for part in part_texts(x.text, x.speaker, part_spans(x.text))]
        batches.append(texts)
    embedder = cached(spec, folder).inner
    embedder.embed(["load the model"])
    wall = time.perf_counter()
    for texts in batches:
        embedder.embed(texts)
    wall = time.perf_counter() - wall
    return {"lines": len(lines), "seconds": wall, "peak_mb": _peak_mb()}


def chatgpt_run(spec: str, path: Path, folder: Path) -> dict[str, float]:
    """The whole import of the export into a fresh store and cache, as `membot import`."""
    embedder = cached(spec, folder)
    memory = Memory(folder / "import.db", embedder=embedder)
    embedder.inner.embed(["load the model"])
    memory.tokens.count("load the tokenizer")
    wall = time.perf_counter()
    with ChatExport(path, None, bot="membot", user="ana") as export:
        added = memory.add_many(export.lines())
    wall = time.perf_counter() - wall
    assert added == memory.count_lines(), added
    memory.close()
    return {"lines": added, "seconds": wall, "peak_mb": _peak_mb()}


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def chatgpt_part(specs: list[str], runs: int, messages: int) -> None:
    with tempfile.TemporaryDirectory(prefix="membot-chatgpt-") as folder:
        path = Path(folder) / "conversations.json"
        write_export(path, messages=messages)
        size = path.stat().st_size / 1e6
        print(f"generated ChatGPT export: {messages:,} messages, {size:.0f} MB", flush=True)
        for spec in specs:
            rates: dict[str, list[float]] = {"embed": [], "import": []}
            peaks = []
            for run in range(1, runs + 1):
                for kind in ("embed", "import"):  # alternating: both see the same neighbours
                    load_before = os.getloadavg()[0]
                    command = [sys.executable, __file__, f"--one-{kind}", spec, str(path)]
                    done = subprocess.run(command, check=True, capture_output=True, text=True)
                    got = json.loads(done.stdout.splitlines()[-1])
                    rates[kind].append(got["lines"] / got["seconds"])
                    peaks += [got["peak_mb"]] if kind == "import" else []
                    print(
                        f"{spec:<12} run {run} {kind:<6}: {got['seconds']:6.1f} s, "
                        f"{rates[kind][-1]:4.0f} lines/s, peak RSS {got['peak_mb']:.0f} MB "
                        f"(load average {load_before:.1f} -> {os.getloadavg()[0]:.1f})",
                        flush=True,
                    )
            embed, imported = statistics.median(rates["embed"]), statistics.median(rates["import"])
            print(
                f"{spec:<12} ChatGPT export: import {imported:.0f} lines/s, the embedder alone "
                f"{embed:.0f} lines/s: ratio {imported / embed:.2f} (medians of {runs}); "
                f"import peak RSS {max(peaks):.0f} MB",
                flush=True,
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--embedder", action="append", help="minilm, minilm-int8, ...")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--part", choices=["locomo", "chatgpt", "both"], default="both")
    parser.add_argument("--chatgpt-messages", type=int, default=50_000)
    parser.add_argument("--one", help=argparse.SUPPRESS)  # a run, in its own process
    parser.add_argument("--one-embed", nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("--one-import", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    for kind, runner in (("one_embed", embed_run), ("one_import", chatgpt_run)):
        if getattr(args, kind):
            spec, path = getattr(args, kind)
            with tempfile.TemporaryDirectory(prefix="membot-import-") as folder:
                print(json.dumps(runner(spec, Path(path), Path(folder))))
            return
    lines = read_file(LOCOMO, "locomo", "membot", None).lines
    if args.one:
        with tempfile.TemporaryDirectory(prefix="membot-import-") as folder:
            print(json.dumps(one_run(args.one, lines, Path(folder))))
        return
    announce()
    specs = args.embedder or ["minilm", "minilm-int8"]
    if args.part in ("chatgpt", "both"):
        chatgpt_part(specs, args.runs, args.chatgpt_messages)
    if args.part == "chatgpt":
        return
    print(f"{len(lines)} LoCoMo dev lines, {os.cpu_count()} cores")
    for spec in specs:
        rates = []
        for run in range(1, args.runs + 1):
            load_before = os.getloadavg()[0]
            command = [sys.executable, __file__, "--one", spec]
            result = subprocess.run(command, check=True, capture_output=True, text=True)
            loaded, wall, cpu = json.loads(result.stdout.splitlines()[-1])
            rates.append(len(lines) / wall)
            print(
                f"{spec:<12} run {run}: {wall:5.1f} s, {rates[-1]:4.0f} lines/s "
                f"(CPU {cpu:5.1f} s; model load {loaded:.1f} s; load average "
                f"{load_before:.1f} -> {os.getloadavg()[0]:.1f})",
                flush=True,
            )
        print(
            f"{spec:<12} median {statistics.median(rates):.0f} lines/s "
            f"(min {min(rates):.0f}, max {max(rates):.0f}, {len(rates)} runs)",
            flush=True,
        )


if __name__ == "__main__":
    main()
