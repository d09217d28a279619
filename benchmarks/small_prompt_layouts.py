"""Prompt layouts for the bundled SmolLM2, tried on the memories a LoCoMo turn recalls: which
one gets the answer said (docs/answers.md, "A prompt for a small model").

Each question of the conversation (single-hop, category 4, as ``membot eval --answers`` asks
them) is recalled once, as a dry-run turn of the default bot (strategy ``blend``), by the
conversation's first speaker the day after its last session; the recalled blocks are then
laid out by each layout and put to the bundled model (64 tokens, the small prompt's cap), and
the reply cleaned as a turn cleans it (``membot.turn.artefacts``). Per layout: F1 and
*contained* as ``eval --answers`` scores them, *in context* (the laid-out memories hold the
answer), *said* (of those, the reply holds it), and *raw artefacts*, replies that before the
clean-up held a line opening with a name and a colon, a tag, or "…response:".

    .venv/bin/python benchmarks/small_prompt_layouts.py [--conversation conv-26] [--limit 20]
        [--layouts transcript,said,said-near,...] [--show]

The layout a bot uses is ``said`` (``membot.turn.small_prompt``); the others are written out
here only.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import time
from collections.abc import Callable
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from machine import announce

from membot import Bot
from membot.eval import shared_data_dir
from membot.eval.answer_scores import contained, locomo_f1
from membot.eval.answers import locomo_groups, selected
from membot.eval.harness import cached_embedder, fresh_memory
from membot.llm import BundledSmolLM2
from membot.model import Block
from membot.turn.artefacts import ReplyContext, clean_reply
from membot.turn.quoting import escape, one_line
from membot.turn.small_prompt import INSTRUCTION, REPLY_TOKENS, SYSTEM

LOCOMO = shared_data_dir() / "locomo" / "locomo_dev.json"
RAW_ARTEFACT = re.compile(
    r"(?m)^\s*[A-Z][\w .'-]{0,30}:\s|<[a-z/|][^>]{0,40}>|\b(?:responds|response|utterance)\b"
    r"\s*(?:is)?\s*:"
)
WORDS = (
    "Answer the question in one short sentence, using the words of the memories above. "
    "If they do not hold the answer, say you don't know."
)


def recalled(conversation: str, limit: int) -> list[tuple[Any, list[Block]]]:
    """Each question with the blocks its turn recalls."""
    groups = locomo_groups(LOCOMO, [4])
    group = next(group for group in groups if group.key == conversation)
    (group,) = selected([group], [question.id for question in group.questions[:limit]])
    found = []
    with fresh_memory(cached_embedder(), group.lines) as memory:
        bot = Bot(memory, BundledSmolLM2())
        for question in group.questions:
            thread = f"layouts/{question.id}"
            turn = bot.turn(question.text, user=question.user, thread=thread, now=question.now,
                            dry_run=True, settings={"prompt_style": "full"})  # fmt: skip
            memory.forget(user=question.user, bot=bot.name, thread=thread)
            found.append((question, list(turn.recalled)))
    return found


def written(block: Block, form: str, near: int | None) -> str:
    lines = block.lines
    if near is not None and block.matched_seqs:
        wanted = {seq + step for seq in block.matched_seqs for step in range(-near, near + 1)}
        lines = tuple(line for line in lines if line.seq in wanted) or lines
    day = lines[0].created_at.strftime("%-d %B %Y")
    if form == "transcript":
        said = [f"{one_line(line.speaker or 'HUMAN')}: {one_line(line.text)}" for line in lines]
    else:
        said = [f'{one_line(line.speaker or "HUMAN")} said: "{one_line(line.text)}"'
                for line in lines]  # fmt: skip
    return "\n".join([f"On {day}:", *map(escape, said)])


def layout(
    form: str = "said",
    count: int = 2,
    near: int | None = None,
    best_last: bool = True,
    instruction: str = INSTRUCTION,
    question_first: bool = False,
    in_system: bool = False,
) -> Callable[..., Any]:
    def messages(question: str, blocks: list[Block]) -> tuple[list[dict[str, str]], str]:
        chosen = sorted(blocks, key=lambda block: -block.score)[:count]
        if best_last:
            chosen.reverse()
        memories = "\n\n".join(written(block, form, near) for block in chosen)
        system = SYSTEM.format(BOT="AI", HUMAN="HUMAN")
        user = f"Memories:\n{memories}\n\nQuestion: {question}\n{instruction}"
        if question_first:
            user = f"Question: {question}\n\n{user}"
        if in_system:  # the memories and the instruction in the system message
            system += f"\nMemories:\n{memories}\n\n{instruction.replace('above', 'below')}"
            system = system.replace("memories below", "memories above")
            user = question
        return [{"role": "system", "content": system}, {"role": "user", "content": user}], memories

    return messages


LAYOUTS = {
    "transcript": layout(form="transcript"),
    "said": layout(),
    "said-near": layout(near=2),
    "said-near-1": layout(near=1),
    "said-matched": layout(near=0),
    "said-question-twice": layout(question_first=True),
    "said-in-system": layout(in_system=True),
    "said-one": layout(count=1),
    "said-words": layout(instruction=WORDS),
    "said-best-first": layout(best_last=False),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversation", default="conv-26")
    parser.add_argument("--limit", type=int, default=20)
    parser.add_argument("--layouts", default=",".join(LAYOUTS))
    parser.add_argument("--show", action="store_true", help="print every reply")
    args = parser.parse_args()
    announce()
    questions = recalled(args.conversation, args.limit)
    llm = BundledSmolLM2()
    print("| layout | n | F1 | contained | in context | said, of in context | raw artefacts | s |")
    print("|---|---|---|---|---|---|---|---|")
    for name in args.layouts.split(","):
        started, rows = time.perf_counter(), []
        for question, blocks in questions:
            messages, memories = LAYOUTS[name](question.text, blocks)
            raw = llm.complete(messages, REPLY_TOKENS)
            speakers = {line.speaker for block in blocks for line in block.lines if line.speaker}
            context = ReplyContext.of("AI", "HUMAN", speakers, question.text)
            reply = clean_reply(raw, context).text
            answer, flagged = question.answer, bool(RAW_ARTEFACT.search(raw))
            rows.append((locomo_f1(reply, answer, 4), contained(reply, answer, 4),
                         contained(memories, answer, 4), flagged))  # fmt: skip
            if args.show:
                print(json.dumps({"id": question.id, "raw": raw, "reply": reply}))
        count = len(rows)
        in_context = [row for row in rows if row[2]]
        said = sum(row[1] for row in in_context)
        print(f"| {name} | {count} | {sum(row[0] for row in rows) / count:.3f} | "
              f"{sum(row[1] for row in rows)} | {len(in_context)} | {said} | "
              f"{sum(row[3] for row in rows)} | {time.perf_counter() - started:.0f} |",
              flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
