"""Prompt layouts for the bundled SmolLM2, tried on the memories a LoCoMo turn recalls: which
one gets the answer said (docs/answers.md, "A prompt for a small model").

Each question of the conversations (single-hop, category 4, as ``membot eval --answers`` asks
them) is recalled once, as a dry-run turn of the default bot (strategy ``blend``), by the
conversation's first speaker the day after its last session; the recalled blocks are then
laid out by each layout and put to the bundled model (64 tokens, the small prompt's cap), and
the reply cleaned as a turn cleans it (``membot.turn.artefacts``). Every layout gets the same
draw for a question (the model samples; its seed is set from the question's place). Per
layout: F1 and *contained* as ``eval --answers`` scores them; *recalled*, questions whose two
best blocks by score hold the answer (the same for every layout), and *said*, of those, the
replies that hold it; *shown*, questions whose laid-out memories hold it, and *said* of
those; *raw artefacts*, replies that before the clean-up held a line opening with a name and
a colon, a tag, or "…response:"; *said with fallback*, said when a reply naming no word of
the memories outside the question is replaced by the matched line most like the question.

    .venv/bin/python benchmarks/small_prompt_layouts.py [--conversation conv-26,conv-30]
        [--limit 20] [--skip 10] [--split 20] [--layouts transcript,said,...] [--show]

``--skip`` leaves out each conversation's first questions of the ``--limit``: choose on
``--limit 10``, confirm on ``--limit 20 --skip 10``. The layout a bot uses is ``pick-words``
(``membot.turn.small_prompt``); the others are written out here only. A layout samples as the
bundled model does (temperature 0.2, repeat penalty 1.2) unless ``DECODING`` says otherwise.

A best-of-n layout (``BEST_OF``) draws n replies to ``pick-words``' prompt, each with its own
seed, cleans each, and keeps the one best grounded in the memories shown (``best_grounded``);
its first draw is ``pick-words``' own. A reply is drawn once per run and reused by any layout
asking for the same one; *s* counts its seconds for each. A question's second and later draws
reuse the prompt llama.cpp evaluated for the one before, so a best-of layout's *s* is what it
takes alone only when it runs first (``--layouts pick-best3,pick-words``); after
``pick-words`` it counts the prompt twice.
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

import snowballstemmer
from machine import announce

from membot import Bot
from membot.eval import shared_data_dir
from membot.eval.answer_scores import contained, locomo_f1
from membot.eval.answers import locomo_groups, selected
from membot.eval.harness import cached_embedder, fresh_memory
from membot.llm import BundledSmolLM2
from membot.model import Block
from membot.recall.bm25 import STOPWORDS, query_terms
from membot.turn.artefacts import ReplyContext, clean_reply
from membot.turn.quoting import escape, one_line
from membot.turn.small_prompt import INSTRUCTION, REPLY_TOKENS, SYSTEM

STEMMER = snowballstemmer.stemmer("porter")
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


def written(block: Block, form: str, near: int | None, question: str = "", chat: bool = True,
            long: int = 0, mark: str = "", date: str = "day") -> str:  # fmt: skip
    lines = block.lines
    if near is not None and block.matched_seqs and len(lines) > long:
        wanted = {seq + step for seq in block.matched_seqs for step in range(-near, near + 1)}
        lines = tuple(line for line in lines if line.seq in wanted) or lines
    if not chat:
        lines = tuple(line for line in lines
                      if line.seq in block.matched_seqs
                      or not chit_chat(line.text, question, names(block))
                      ) or lines  # fmt: skip
    if form == "transcript":
        said = [f"{one_line(line.speaker or 'HUMAN')}: {one_line(line.text)}" for line in lines]
    else:
        said = [f'{one_line(line.speaker or "HUMAN")} said: "{one_line(line.text)}"'
                for line in lines]  # fmt: skip
    if mark:  # the matched lines marked
        said = [f"{mark}{text}" if line.seq in block.matched_seqs else text
                for line, text in zip(lines, said, strict=True)]  # fmt: skip
    opening = {"day": "On %-d %B %Y:", "month": "In %B %Y:", "none": ""}[date]
    heading = [lines[0].created_at.strftime(opening)] if opening else []
    return "\n".join([*heading, *map(escape, said)])


GREETING = re.compile(
    r"(?i)^\W*(hey|hi|hello|thanks|thank you|wow|aw+|omg|congrat\w*|bye|"
    r"good to|great to|glad|cool|awesome|amazing|yeah|haha|lol|sounds|that's|so|oh|yes|sure|"
    r"totally|definitely)\b"
)
COPY = (
    "Answer the question with a short phrase copied from the memories above. "
    "If they do not hold the answer, say you don't know."
)


def stems(text: str) -> set[str]:
    """The stems of ``text``'s content words (no stopwords, none shorter than three letters)."""
    return {STEMMER.stemWord(word) for word in query_terms(text, STOPWORDS)
            if len(word) > 2 and word not in STOPWORDS}  # fmt: skip


def chit_chat(text: str, question: str, names: set[str]) -> bool:
    """A line that greets, thanks or exclaims and shares no content word with the question
    (names aside), or that holds fewer than four content words."""
    own = stems(text) - names
    if own & stems(question):
        return False
    return len(own) < 4 or (bool(GREETING.match(text)) and len(own) < 8)


def names(block: Block) -> set[str]:
    """The stems of the block's speakers' names."""
    return {stem for line in block.lines for stem in stems(line.speaker or "")}


def question_words(block: Block, question: str) -> int:
    """How many of the question's content words (names aside) the block's matched lines hold."""
    wanted = stems(question) - names(block)
    matched = [line for line in block.lines if line.seq in block.matched_seqs] or block.lines
    return max(len(stems(line.text) & wanted) for line in matched)


def focus_line(blocks: list[Block], question: str) -> Any:
    """The matched line of ``blocks`` sharing most content words with the question."""
    wanted = stems(question) - {stem for block in blocks for stem in names(block)}
    lines = [line for block in blocks for line in block.lines if line.seq in block.matched_seqs]
    if not lines:
        return None
    return max(lines, key=lambda line: len(stems(line.text) & wanted))


def layout(
    form: str = "said",
    count: int = 2,
    near: int | None = None,
    best_last: bool = True,
    instruction: str = INSTRUCTION,
    question_first: bool = False,
    in_system: bool = False,
    pick: str = "score",
    long: int = 0,
    chat: bool = True,
    focus: str = "",
    mark: str = "",
    date: str = "day",
    example: str = "",
) -> Callable[..., Any]:
    def messages(question: str, blocks: list[Block]) -> tuple[list[dict[str, str]], str]:
        chosen = sorted(blocks, key=lambda block: -block.score)[:count]
        if pick == "words":  # the two best by score, or a lower one holding more question words
            chosen = sorted(blocks, key=lambda block: (-question_words(block, question),
                                                       -block.score))[:count]  # fmt: skip
        if best_last:
            chosen.reverse()
        memories = "\n\n".join(written(block, form, near, question, chat, long, mark, date)
                                 for block in chosen)  # fmt: skip
        if focus and (line := focus_line(chosen, question)) is not None:
            said = escape(f'{one_line(line.speaker or "HUMAN")} said: "{one_line(line.text)}"')
            memories += f"\n\n{focus}\n{said}"
        system = SYSTEM.format(BOT="AI", HUMAN="HUMAN")
        user = f"Memories:\n{memories}\n\nQuestion: {question}\n{instruction}"
        if question_first:
            user = f"Question: {question}\n\n{user}"
        if in_system:  # the memories and the instruction in the system message
            system += f"\nMemories:\n{memories}\n\n{instruction.replace('above', 'below')}"
            system = system.replace("memories below", "memories above")
            if example == "first":
                system = system.replace("\nMemories:", f"\n{EXAMPLE}\nMemories:", 1)
            elif example:
                system += f"\n{EXAMPLE}"
            user = question
        return [{"role": "system", "content": system}, {"role": "user", "content": user}], memories

    return messages


# A made-up memory, question and answer (no benchmark's), showing a phrase copied out
EXAMPLE = (
    'For example, given the memory Tom said: "We adopted a beagle puppy called Rusty last '
    'week!", the question "What breed is Tom\'s dog?" is answered "Tom\'s dog is a beagle."'
)
SMALL: dict[str, Any] = {
    "in_system": True
}  # the layout a bot used until pick-words (membot.turn.small_prompt)
PICK: dict[str, Any] = {"in_system": True, "pick": "words"}  # the layout a bot uses
LAYOUTS = {
    "transcript": layout(form="transcript"),
    "said": layout(),
    "said-near": layout(near=2),
    "said-near-1": layout(near=1),
    "said-matched": layout(near=0),
    "said-question-twice": layout(question_first=True),
    "said-in-system": layout(**SMALL),
    "said-one": layout(count=1),
    "said-words": layout(instruction=WORDS),
    "said-best-first": layout(best_last=False),
    # issue 31 item 5: which memories, how much of each, the line nearest the question
    "pick-words": layout(**SMALL, pick="words"),
    "trim-long": layout(**SMALL, near=1, long=5),
    "no-chat": layout(**SMALL, chat=False),
    "focus-last": layout(**SMALL, focus="Most like the question:"),
    "copy": layout(**SMALL, instruction=COPY),
    "pick-trim": layout(**SMALL, pick="words", near=1, long=5),
    "pick-no-chat": layout(**SMALL, pick="words", chat=False),
    "pick-copy": layout(**SMALL, pick="words", instruction=COPY),
    "pick-focus": layout(**SMALL, pick="words", focus="Most like the question:"),
    "pick-no-chat-focus": layout(
        **SMALL, pick="words", chat=False, focus="Most like the question:"
    ),
    "pick-trim-focus": layout(
        **SMALL, pick="words", near=1, long=5, focus="Most like the question:"
    ),
    # issue 31 item 5, second round: decoding, a worked example, a primed reply, the form
    "pick-greedy": layout(**PICK),
    "pick-penalty-1.0": layout(**PICK),
    "pick-penalty-1.1": layout(**PICK),
    "pick-penalty-1.3": layout(**PICK),
    "pick-example": layout(**PICK, example="last"),
    "pick-example-first": layout(**PICK, example="first"),
    "pick-primed-name": layout(**PICK),
    "pick-mark": layout(**PICK, mark="* "),
    "pick-month": layout(**PICK, date="month"),
    "pick-bias-1": layout(**PICK),
    "pick-bias-2": layout(**PICK),
    "pick-bias-3": layout(**PICK),
    # issue 31 item 5, fourth round: n replies to pick-words' prompt, the best grounded kept
    "pick-best2": layout(**PICK),
    "pick-best3": layout(**PICK),
    "pick-best3-t0.7": layout(**PICK),
    "pick-best3-share": layout(**PICK),
    # no repeat penalty; a run of N tokens the reply wrote not written again (llm/no_repeat.py)
    "pick-runs-4": layout(**PICK),
    "pick-runs-6": layout(**PICK),
    "pick-runs-8": layout(**PICK),
}
# Each layout's sampling: the bundled model's (BundledSmolLM2's defaults), or as DECODING says
SAMPLING = {"temperature": 0.2, "repeat_penalty": 1.2}
DECODING = {
    "pick-greedy": {"temperature": 0.0},
    "pick-penalty-1.0": {"repeat_penalty": 1.0},
    "pick-penalty-1.1": {"repeat_penalty": 1.1},
    "pick-penalty-1.3": {"repeat_penalty": 1.3},
    "pick-runs-4": {"repeat_penalty": 1.0},
    "pick-runs-6": {"repeat_penalty": 1.0},
    "pick-runs-8": {"repeat_penalty": 1.0},
}
# Each layout's no_repeat_tokens (the bundled model's; none unless named here)
RUNS = {"pick-runs-4": 4, "pick-runs-6": 6, "pick-runs-8": 8}


def named(question: str, blocks: list[Block]) -> str:
    """The first speaker's name the question holds, as written there ("Caroline's")."""
    speakers = {line.speaker for block in blocks for line in block.lines if line.speaker}
    for word in question.rstrip("?").split():
        if word.removesuffix("'s").removesuffix("’s") in speakers:
            return word
    return ""


# Copy-biased decoding: each token of the memories' content words raised by this much
BIASES = {"pick-bias-1": 1.0, "pick-bias-2": 2.0, "pick-bias-3": 3.0}


def memory_bias(model: Any, memories: str, amount: float) -> dict[int, float]:
    """A logit bias raising the tokens that spell the memories' quoted content words (the
    words inside quotes, stopwords out), with and without a leading space."""
    quoted = " ".join(re.findall(r'"([^"]*)"', memories)) or memories
    words = {word for word in re.findall(r"[A-Za-z0-9][\w'-]*", quoted)
             if word.lower() not in STOPWORDS}  # fmt: skip
    tokens: set[int] = set()
    for word in words:
        for form in (word, " " + word):
            tokens.update(model.tokenize(form.encode(), add_bos=False, special=False))
    return dict.fromkeys(tokens, amount)


# The reply started for the model, which goes on from there
PRIMERS: dict[str, Callable[[str, list[Block]], str]] = {
    "pick-primed-name": named,
}


def primed(model: Any, messages: list[dict[str, str]], start: str, settings: dict[str, float]
           ) -> str:  # fmt: skip
    """The model's reply to ``messages`` begun with ``start``: the chat template's text (the
    model's own ChatML) with the assistant's turn opened and ``start`` written in it."""
    from membot.llm.bundled import STOP

    prompt = "".join(f"<|im_start|>{message['role']}\n{message['content']}<|im_end|>\n"
                     for message in messages) + f"<|im_start|>assistant\n{start}"  # fmt: skip
    result = model.create_completion(prompt, max_tokens=REPLY_TOKENS, stop=STOP, **settings)
    return (start + result["choices"][0]["text"]).strip()


# Best of n: each layout's samples, as (the seed's offset, temperature); the first is the draw
# pick-words makes (the question's seed, 0.2), so a layout differs from it by the picking only
BEST_OF = {
    "pick-best2": ((0, 0.2), (1, 0.2)),
    "pick-best3": ((0, 0.2), (1, 0.2), (2, 0.2)),
    "pick-best3-t0.7": ((0, 0.2), (1, 0.7), (2, 0.7)),
    "pick-best3-share": ((0, 0.2), (1, 0.2), (2, 0.2)),
}
# Layouts picking by the share of the reply's words that are grounded, not by their count: a
# count favours the longer reply, which strings more of the memories' words together
BY_SHARE = {"pick-best3-share"}
SEED_STEP = 1000  # a sample's seed: the question's seed + SEED_STEP * its offset
DONT_KNOW = re.compile(
    r"(?i)\b(?:don't|do not|doesn't|does not|can't|cannot) (?:know|hold|have|say|tell|find)\b"
    r"|\bno (?:information|answer|memor(?:y|ies) of)\b|\bnot (?:mentioned|sure)\b|\bI'm sorry\b"
)


def grounding(reply: str, memories: str, question: str, share: bool = False) -> float:
    """How many content-word stems the reply shares with the memories' quoted lines and not
    with the question (words it can only have taken from what it was shown); with ``share``,
    that count over the reply's content-word stems."""
    quoted = " ".join(re.findall(r'"([^"]*)"', memories)) or memories
    own = stems(reply)
    grounded = len(own & (stems(quoted) - stems(question)))
    return grounded / max(len(own), 1) if share else grounded


def best_grounded(replies: list[str], memories: str, question: str, share: bool = False) -> str:
    """Of n cleaned replies to one prompt, the best grounded (``grounding``); an empty or
    "don't know" reply only when every one is, and the earliest of equals. Reads the prompt's
    memories and question only, never an answer."""
    answering = [reply for reply in replies if reply and not DONT_KNOW.search(reply)]
    if not answering:
        return replies[0]
    return max(answering, key=lambda reply: grounding(reply, memories, question, share))


def steered(model: Any, name: str, question: str, blocks: list[Block],
            messages: list[dict[str, str]], memories: str, settings: dict[str, float]
            ) -> str | None:  # fmt: skip
    """The raw reply of a layout that steers the model past the chat call (a primed reply, a
    logit bias), or None for one that does not (nor a primer that finds no name to start)."""
    from membot.llm.bundled import STOP

    start = PRIMERS[name](question, blocks) if name in PRIMERS else ""
    if start:
        return primed(model, messages, start, settings)
    if name in BIASES:
        result = model.create_chat_completion(
            messages=messages, max_tokens=REPLY_TOKENS, stop=STOP,
            logit_bias=memory_bias(model, memories, BIASES[name]), **settings)  # fmt: skip
        return (result["choices"][0]["message"]["content"] or "").strip()
    return None


def fallback(reply: str, memories: str, question: str, line: Any) -> str:
    """The reply, or the focus line quoted when the reply names no content word of the
    memories that the question does not (an extractive fallback; measured, not shipped)."""
    if line is None or stems(reply) & (stems(memories) - stems(question)):
        return reply
    return f'{line.speaker or "HUMAN"} said: "{line.text}"'


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversation", default="conv-26", help="one or more, comma-separated")
    parser.add_argument("--limit", type=int, default=20)
    parser.add_argument(
        "--skip",
        type=int,
        default=0,
        help="leave out each conversation's first SKIP of the LIMIT questions",
    )
    parser.add_argument("--layouts", default=",".join(LAYOUTS))
    parser.add_argument("--show", action="store_true", help="print every reply")
    parser.add_argument(
        "--split",
        type=int,
        default=0,
        help="print the rows of each conversation's questions up to place SPLIT and of those "
        "after apart (e.g. --limit 30 --skip 10 --split 20: 11-20 and 21-30)",
    )
    args = parser.parse_args()  # fmt: skip
    announce()
    questions: list[tuple[Any, list[Block]]] = []
    places: list[int] = []  # each question's place in its conversation's list, from 1
    for conversation in args.conversation.split(","):
        found = recalled(conversation, args.limit)[args.skip :]
        questions += found
        places += range(args.skip + 1, args.skip + 1 + len(found))
    # Each question's seed: its place in the run, or with --split in the run of its slice
    # alone (so a slice's replies are those of --limit SPLIT, or of --skip SPLIT)
    parts = [bool(args.split) and spot > args.split for spot in places]
    seeds = [parts[:index].count(part) + 1 for index, part in enumerate(parts)]
    llm = BundledSmolLM2()
    model = llm._load()
    draws = Draws(llm)
    print(
        "| layout | n | F1 | contained | recalled | said | shown | said, of shown | "
        "raw artefacts | said with fallback | s | s per question |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name in args.layouts.split(","):
        started, reused, rows = time.perf_counter(), 0.0, []
        for place, (question, blocks) in enumerate(questions):
            messages, memories = LAYOUTS[name](question.text, blocks)
            settings = {**SAMPLING, **DECODING.get(name, {})}
            speakers = {line.speaker for block in blocks for line in block.lines if line.speaker}
            context = ReplyContext.of("AI", "HUMAN", speakers, question.text)
            model.set_seed(seeds[place])  # as Draws.reply does, for a steered reply
            raw = steered(model, name, question.text, blocks, messages, memories, settings)
            raws = [] if raw is None else [raw]
            if raw is None:  # not steered: n replies (one unless BEST_OF says so)
                penalty, runs = settings["repeat_penalty"], RUNS.get(name, 0)
                for offset, temperature in BEST_OF.get(name, ((0, settings["temperature"]),)):
                    seed = seeds[place] + SEED_STEP * offset
                    text, seconds = draws.reply(seed, messages, temperature, penalty, runs)
                    raws.append(text)
                    reused += seconds
            replies = [clean_reply(text, context).text for text in raws]
            reply = best_grounded(replies, memories, question.text, name in BY_SHARE)
            raw = raws[replies.index(reply)]
            top = sorted(blocks, key=lambda block: -block.score)[:2]
            recalled_text = "\n".join(line.text for block in top for line in block.lines)
            quoted = fallback(reply, memories, question.text, focus_line(top, question.text))
            answer, flagged = question.answer, bool(RAW_ARTEFACT.search(raw))
            rows.append({"f1": locomo_f1(reply, answer, 4), "said": contained(reply, answer, 4),
                         "recalled": contained(recalled_text, answer, 4),
                         "shown": contained(memories, answer, 4), "artefact": flagged,
                         "fallback": contained(quoted, answer, 4),
                         "place": places[place]})  # fmt: skip
            if args.show:
                print(json.dumps({"id": question.id, "layout": name, "raw": raw, "reply": reply,
                                  "samples": replies, **rows[-1]}))  # fmt: skip
        # a reply drawn for an earlier layout counts here too, as if drawn again
        seconds = time.perf_counter() - started + reused
        slices = {name: rows}
        if args.split:  # the rows of places up to SPLIT, and of those after, apart
            slices = {f"{name}, {first}-{last}": part for first, last, part in (
                (args.skip + 1, args.split, [row for row in rows if row["place"] <= args.split]),
                (args.split + 1, args.limit, [row for row in rows if row["place"] > args.split]),
            ) if part}  # fmt: skip
        for label, part in slices.items():
            print(f"| {label} | {len(part)} | {sum(row['f1'] for row in part) / len(part):.3f} | "
                  f"{total(part, 'said')} | {total(part, 'recalled')} | "
                  f"{total(part, 'said', 'recalled')} | {total(part, 'shown')} | "
                  f"{total(part, 'said', 'shown')} | {total(part, 'artefact')} | "
                  f"{total(part, 'fallback', 'recalled')} | {seconds:.0f} | "
                  f"{seconds / len(rows):.1f} |",
                  flush=True)  # fmt: skip


class Draws:
    """The bundled model's replies, each drawn once for a seed, prompt and sampling, and the
    seconds it took: a layout asking for a reply drawn already (pick-words' draw is the first
    of each best-of-n layout's) gets it back with its seconds, as if drawn again."""

    def __init__(self, llm: BundledSmolLM2) -> None:
        self.llm, self.model = llm, llm._load()
        self.drawn: dict[tuple[int, float, float, int, str], tuple[str, float]] = {}

    def reply(self, seed: int, messages: list[dict[str, str]], temperature: float,
              repeat_penalty: float, runs: int = 0) -> tuple[str, float]:  # fmt: skip
        """The raw reply, and the seconds it took if drawn before (0 if drawn now); ``runs``:
        the bundled model's ``no_repeat_tokens`` (0: off)."""
        key = (seed, temperature, repeat_penalty, runs, json.dumps(messages))
        if key in self.drawn:
            return self.drawn[key]
        began = time.perf_counter()
        # The same draw for a question under every layout: llama-cpp-python seeds each reply
        # from the last one's seed, so a question's draw would otherwise follow its place.
        self.model.set_seed(seed)
        self.llm.temperature, self.llm.repeat_penalty = temperature, repeat_penalty
        self.llm.no_repeat_tokens = runs or None
        self.drawn[key] = (self.llm.complete(messages, REPLY_TOKENS), time.perf_counter() - began)
        return self.drawn[key][0], 0.0


def total(rows: list[dict[str, Any]], key: str, among: str = "") -> int:
    """How many rows hold ``key`` true, of those holding ``among`` true (of all without)."""
    return sum(bool(row[key]) for row in rows if not among or row[among])


if __name__ == "__main__":
    main()
