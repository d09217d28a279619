"""Calibrate the default expertise min score: how well a question meets the passage holding
its answer, when the passage is a document chunk rather than one line.

Documents here are LoCoMo's sessions (dev file), each written out as a transcript
("Speaker: text" per line, titled with its date) and chunked exactly as ``membot expertise
add`` chunks a file (200 tokens, 30 overlapping). A question's positive chunks are those
holding one of its evidence turns; every other chunk of its conversation is a negative. Small
talk ("ok", "thanks!") is scored against every chunk too.

For thresholds 0.20..0.60 it prints: ``found`` (share of questions whose best positive chunk
reaches the threshold), ``top4`` (share with a positive among the 4 best chunks that reach
it: what a turn puts in the prompt), ``false`` (mean negative chunks per question reaching
it, at most 4 counted) and ``chitchat`` (share of small-talk lines x conversations with any
chunk reaching it). The recommended default maximises ``top4 / best top4 - chitchat``.

    .venv/bin/python benchmarks/calibrate_expertise.py
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np
from calibrate_threshold import CHITCHAT  # the same small talk as the history threshold's

from membot.config import DEFAULT_BOT
from membot.eval import shared_data_dir
from membot.eval.harness import cached_embedder
from membot.memory.documents import Document, chunk_document
from membot.memory.importers import read_file
from membot.turn.tokens import default_token_counter

LOCOMO = shared_data_dir() / "locomo" / "locomo_dev.json"
THRESHOLDS = tuple(round(0.20 + 0.05 * step, 2) for step in range(9))
MAX_MATCHES = 4


def main() -> None:
    counter = default_token_counter()
    embedder = cached_embedder()
    samples = json.loads(Path(LOCOMO).read_text(encoding="utf-8"))
    sessions: dict[str, dict[str, list]] = defaultdict(lambda: defaultdict(list))
    for line in read_file(LOCOMO, "locomo", DEFAULT_BOT, None).lines:  # the importer's reading
        sample, session = line.thread.split("/")
        sessions[sample][session].append(line)
    rows: list[tuple[float, np.ndarray, np.ndarray]] = []  # best positive, top scores, labels
    chit_best: list[float] = []
    for sample in samples:
        chunk_texts: list[str] = []
        chunk_refs: list[set[str]] = []
        for lines in sessions[sample["sample_id"]].values():
            text = "\n\n".join(f"{line.speaker}: {line.text}" for line in lines)
            title = lines[0].created_at.date().isoformat()
            for chunk in chunk_document(Document("session.txt", title, text, "text", ""), counter):
                chunk_texts.append(chunk.text)
                chunk_refs.append({line.ref for line in lines if line.text[:80] in chunk.text})
        vectors = np.asarray(embedder.embed(chunk_texts), dtype=np.float32)
        questions = [qa for qa in sample["qa"] if qa.get("evidence")]
        asked = np.asarray(embedder.embed([qa["question"] for qa in questions]), np.float32)
        for qa, query in zip(questions, asked, strict=True):
            scores = vectors @ query
            positive = np.array([bool(set(qa["evidence"]) & refs) for refs in chunk_refs])
            if not positive.any():
                continue
            order = np.argsort(-scores)[:MAX_MATCHES]
            rows.append((float(scores[positive].max()), scores[order], positive[order]))
        chatter = np.asarray(embedder.embed(list(CHITCHAT)), dtype=np.float32)
        chit_best += [float((vectors @ vector).max()) for vector in chatter]
    table = {}
    for threshold in THRESHOLDS:
        found = np.mean([best >= threshold for best, _, _ in rows])
        top = np.mean([bool((labels & (scores >= threshold)).any()) for _, scores, labels in rows])
        false = np.mean(
            [int((~labels & (scores >= threshold)).sum()) for _, scores, labels in rows]
        )
        chit = np.mean([best >= threshold for best in chit_best])
        table[threshold] = (found, top, false, chit)
    best_top = max(row[1] for row in table.values())
    choice = max(table, key=lambda t: table[t][1] / best_top - table[t][3])
    print(f"{len(rows)} questions over {len(samples)} conversations' sessions as documents")
    print(f"{'min score':>9} {'found':>6} {'top4':>6} {'false':>6} {'chitchat':>9}")
    for threshold, (found, top, false, chit) in table.items():
        mark = "  <- recommended" if threshold == choice else ""
        print(f"{threshold:9.2f} {found:6.3f} {top:6.3f} {false:6.2f} {chit:9.3f}{mark}")


if __name__ == "__main__":
    main()
