"""Replies in the shape asked for: how often the bundled SmolLM2 gives a reply fit to show and
cites a hint, over 50 LoCoMo questions asked as turns with citations on.

A store holds the 5 LoCoMo dev conversations (each owned by its first speaker); the first 10
questions of each are asked by that speaker, each in a new thread that is forgotten after
its turn, so recall finds the person's past sessions and nothing of the other questions.
Per turn it checks:

- *valid reply*: no error, a non-empty response that is not the bot's ``no_response``, not
  JSON or a piece of it, and not the prompt's example ("what AI says");
- *cites*: at least one citation of a hint that was in the prompt (the bot keeps no other);
- *cites evidence* (for reference): a cited history hint holds one of the question's
  evidence lines.

It uses only the public API, so it runs unchanged on older membot (to measure "before").
``--ask-json`` sets ``writes_json = True`` on the model, for code in which the bundled model
is otherwise held to text, and ``reads_long_prompts = True``, so that it is given the
templates' prompt, which asks for the JSON, rather than the small prompt.

    .venv/bin/python benchmarks/reply_shape.py [--reply-tokens 128] [--ask-json]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from machine import announce

from membot import Bot, Memory
from membot.eval import shared_data_dir
from membot.eval.harness import cached_embedder
from membot.llm import BundledSmolLM2
from membot.memory.importers import read_file
from membot.turn.templates import DEFAULTS

LOCOMO = shared_data_dir() / "locomo" / "locomo_dev.json"
QUESTIONS_PER_CONVERSATION = 10
BOT = "bench"
# What a reply shown to a person must never be: the prompt's JSON example or JSON itself.
TEMPLATE_ECHO = re.compile(r"^\W*what \w+ says\W*$|citation ids? of the hints?", re.IGNORECASE)
JSON_PIECE = re.compile(r'^\s*[{}\[\]]|[{\[]\s*$|"\s*:\s*[\[{"]|citation_ids|"response"')


def is_valid_reply(turn: Any) -> bool:
    text = turn.response.strip()
    return bool(
        turn.error is None
        and text
        and text != DEFAULTS["no_response"]
        and not TEMPLATE_ECHO.search(text)
        and not JSON_PIECE.search(text)
    )


def cites_evidence(turn: Any, evidence: list[str]) -> bool:
    blocks = {f"h{block.lines[0].id}": block for block in turn.recalled}
    for citation in turn.citations:
        block = blocks.get(citation.id)
        if block and any(line.ref in evidence for line in block.lines):
            return True
    return False


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reply-tokens", type=int, default=128)
    parser.add_argument("--ask-json", action="store_true")
    parser.add_argument("--show", action="store_true", help="print every reply")
    args = parser.parse_args()
    announce()
    samples = json.loads(LOCOMO.read_text())
    llm = BundledSmolLM2()
    if args.ask_json:
        llm.writes_json = True
        # and the templates' prompt, which asks for the JSON (the small prompt asks for none)
        llm.reads_long_prompts = True
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        memory = Memory(Path(folder) / "bench.db", embedder=cached_embedder())
        memory.add_many(read_file(LOCOMO, "locomo", BOT, None).lines)
        memory.configure_bot(BOT, reply_tokens=args.reply_tokens, citations=True)
        bot = Bot(memory, llm, BOT)
        started = time.perf_counter()
        for sample in samples:
            owner = sample["conversation"]["speaker_a"]
            for number, qa in enumerate(sample["qa"][:QUESTIONS_PER_CONVERSATION]):
                thread = f"question-{number}"
                turn = bot.turn(qa["question"], user=owner, thread=thread)
                # Each question meets the conversation alone, not the replies to the others.
                memory.forget(user=owner, bot=BOT, thread=thread)
                rows.append(
                    (
                        is_valid_reply(turn),
                        bool(turn.citations),
                        cites_evidence(turn, qa["evidence"]),
                    )
                )
                if args.show:
                    print(
                        f"{'ok ' if rows[-1][0] else 'BAD'} {turn.response!r} "
                        f"{[c.id for c in turn.citations]} {list(turn.notes)}"
                    )
        elapsed = time.perf_counter() - started
        memory.close()
    count = len(rows)
    valid, cites, evidence = (sum(row[column] for row in rows) for column in range(3))
    both = sum(row[0] and row[1] for row in rows)
    print(
        f"{count} turns, reply_tokens {args.reply_tokens}, {elapsed:.0f} s "
        f"({elapsed / count:.1f} s per turn)"
    )
    print(f"valid reply            {valid / count:6.1%}")
    print(f"cites a hint           {cites / count:6.1%}")
    print(f"valid reply and cites  {both / count:6.1%}")
    print(f"cites an evidence line {evidence / count:6.1%}")


if __name__ == "__main__":
    main()
