"""Embedding cost of the bundled all-MiniLM-L6-v2: ONNX Runtime (membot's default, its graph
built from the weights without torch), its int8 copy (``minilm-int8``) and sentence-transformers
on torch (where the ``st`` extra is installed), for one line (a turn) and for a batch (an
import); and how close the int8 vectors are to the full model's.

    .venv/bin/python benchmarks/embed_speed.py
    .venv/bin/python benchmarks/embed_speed.py --also st:/models/all-mpnet-base-v2

``--also SPEC`` (repeatable) times other embedders, any ``--embedder`` spec, on the same lines
(docs/recall.md, "A bigger embedder").
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np
from machine import announce

from membot.embed import Embedder, OnnxMiniLMEmbedder, bundled_minilm, resolve_embedder
from membot.eval import shared_data_dir

LOCOMO = shared_data_dir() / "locomo" / "locomo_dev.json"


def dialog_lines() -> list[str]:
    conversation = json.loads(LOCOMO.read_text())[0]["conversation"]
    return [
        turn["text"]
        for key, turns in conversation.items()
        if key.startswith("session_") and not key.endswith("date_time")
        for turn in turns
    ]


def median_ms(embed: Callable[[list[str]], np.ndarray], lines: list[str]) -> float:
    embed(lines[:1])  # load
    times = []
    for line in lines[:50]:
        started = time.perf_counter()
        embed([line])
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def batch_rate(embed: Callable[[list[str]], np.ndarray], lines: list[str]) -> float:
    started = time.perf_counter()
    embed(lines)
    return len(lines) / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--also", action="append", default=[], metavar="SPEC")
    also = parser.parse_args().also
    announce()
    lines = dialog_lines()
    with tempfile.TemporaryDirectory() as folder:
        onnx = OnnxMiniLMEmbedder(Path(folder))
        int8 = OnnxMiniLMEmbedder(Path(folder), quantized=True)
        with_torch = importlib.util.find_spec("sentence_transformers") is not None
        runs: list[tuple[str, Embedder]] = [("onnxruntime", onnx), ("onnx int8", int8)]
        runs += [("torch", bundled_minilm())] if with_torch else []
        runs += [(spec, resolve_embedder(spec)) for spec in also]
        for name, embedder in runs:
            one = median_ms(embedder.embed, lines)
            rate = batch_rate(embedder.embed, lines)
            print(f"{name:<12} one line {one:6.2f} ms (median of 50)   batch {rate:6.0f} lines/s")
        full = onnx.embed(lines)
        if with_torch:
            gap = np.abs(full[:200] - runs[2][1].embed(lines[:200])).max()
            print(f"largest difference between onnxruntime and torch, over 200 lines: {gap:.1e}")
        else:
            print("torch: not measured (pip install 'membot[st]')")
        cosines = np.sum(int8.embed(lines) * full, axis=1)
        print(
            f"cosine of int8 and full vectors: mean {cosines.mean():.4f}, min {cosines.min():.4f}"
        )
        print(f"({len(lines)} LoCoMo dialog lines)")


if __name__ == "__main__":
    main()
