"""Chats with the bundled SmolLM2 as a newcomer has them: what the small prompt's replies say.

LoCoMo's questions (``membot eval --answers``) are each asked in a thread of their own, of a
conversation between two people imported into the store. A newcomer's first chat differs:
the bot replied to every line itself (its memories hold its own chatty replies), and the
questions come one after another, often in the thread where the facts were said. Eighteen chats
made up for this script (no benchmark data): a person says four facts about themselves, the
bot replying live; then the person asks four questions about them, either in the same thread
or (the default) in a new thread after the first was ended and remembered, opened by "Hello
again!". Each reply is scored by whether it holds the answer's word.

Prints per run: answers said, replies that loop (a sentence of three words or more written
twice, or a run of six words written twice), replies that copy the bot's previous reply
in the thread (the same first 40 characters), and replies that end in the middle of a
sentence at the token cap (no mark ends them, 60 tokens or more).

    .venv/bin/python benchmarks/small_chats.py [--same-thread] [--again] [--feed N]
        [--penalty P] [--runs N] [--seed N] [--name-person] [--show]

``--feed``, ``--penalty`` and ``--runs`` try the small prompt's shown feed lines, the model's
repeat penalty and its ``no_repeat_tokens`` at other values than the shipped ones
(docs/answers.md, "A newcomer's chat", "Runs of tokens not written twice").
``--seed`` sets the model's first seed: the draws alone move a run by 3 to 5 answers of 72,
so a change is judged over several seeds (docs/answers.md, "Two more rules for the chat").
``--name-person`` sets each chat's bot's ``human_name`` to the person's name ("Sam" for
``sam``) instead of the default "HUMAN" (docs/answers.md, "The person called by name").
"""

from __future__ import annotations

import argparse
import os
import re
import tempfile
from collections import Counter
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from machine import announce

import membot.turn.bot as bot_module
import membot.turn.small_prompt as small_prompt
from membot import Bot, Memory
from membot.llm import BundledSmolLM2
from membot.turn.ending import end_conversation

# (person, what they say, (question, a word of the answer))
CHATS = [
    ("sam", ["Hi! I'm Sam. I just adopted a grey cat called Miso.",
             "She loves tuna and sleeps on my keyboard.",
             "I also started learning the cello last month.",
             "My exam is on 12 December, by the way."],
     [("What is my cat called?", "miso"), ("What instrument am I learning?", "cello"),
      ("What does Miso like to eat?", "tuna"), ("When is my exam?", "12 december")]),
    ("ana", ["Hello, I'm Ana and I work as a nurse in Porto.",
             "My brother Luis is getting married in June.",
             "I'm training for a half marathon, I run every morning.",
             "My favourite food is grilled sardines."],
     [("Where do I work?", "porto"), ("Who is getting married?", "luis"),
      ("What am I training for?", "marathon"), ("What is my favourite food?", "sardines")]),
    ("kofi", ["Hey there. I'm Kofi, I teach chemistry at a high school.",
              "We just got back from a trip to Iceland, it was freezing.",
              "My daughter Ama turned seven yesterday.",
              "I've been reading a book about the history of tea."],
     [("What subject do I teach?", "chemistry"), ("Where did we travel?", "iceland"),
      ("How old is Ama?", "seven"), ("What book am I reading?", "tea")]),
    ("mei", ["Hi, Mei here. I finally bought a red bicycle last weekend.",
             "I'm allergic to peanuts, so I have to be careful.",
             "My partner and I are moving to Lisbon in March.",
             "I play the drums in a small jazz band."],
     [("What colour is my bicycle?", "red"), ("What am I allergic to?", "peanut"),
      ("Where are we moving?", "lisbon"), ("What instrument do I play?", "drums")]),
    ("olga", ["Good evening! I'm Olga. I grow tomatoes and basil on my balcony.",
              "My dog Bruno is a golden retriever.",
              "I work night shifts at a bakery.",
              "Next month I'm flying to Tokyo for a conference."],
     [("What do I grow on my balcony?", "tomato"), ("What breed is Bruno?", "retriever"),
      ("Where do I work?", "bakery"), ("Where am I flying next month?", "tokyo")]),
    ("raj", ["Hi, I'm Raj. I just started a new job as a pilot.",
             "My wife Priya makes the best dosa.",
             "We have twin boys who love football.",
             "I'm saving up to buy a sailboat."],
     [("What is my new job?", "pilot"), ("What does Priya make?", "dosa"),
      ("What do my boys love?", "football"), ("What am I saving up for?", "sailboat")]),
    ("lena", ["Hi, I'm Lena. I work as a vet in Munich.",
              "My horse is called Pepper.",
              "I'm learning Japanese for a trip next spring.",
              "My favourite dessert is cheesecake."],
     [("What is my job?", "vet"), ("What is my horse called?", "pepper"),
      ("What language am I learning?", "japanese"),
      ("What is my favourite dessert?", "cheesecake")]),
    ("tom", ["Hello! Tom here. I just moved to Glasgow for work.",
             "I drive an old blue Volvo.",
             "My sister Clara is a dentist.",
             "I collect vinyl records, mostly jazz."],
     [("Where did I move to?", "glasgow"), ("What car do I drive?", "volvo"),
      ("What does Clara do?", "dentist"), ("What do I collect?", "vinyl")]),
    ("amara", ["Hey, I'm Amara and I design video games.",
               "My grandmother lives in Lagos.",
               "I broke my wrist playing volleyball last month.",
               "My son Femi is starting school in September."],
     [("What do I design?", "games"), ("Where does my grandmother live?", "lagos"),
      ("How did I break my wrist?", "volleyball"), ("When is Femi starting school?", "september")]),
    ("jonas", ["Hi! I'm Jonas. I brew my own beer at home.",
               "My cat Pixel is black with white paws.",
               "I work as an electrician.",
               "I'm running the Berlin marathon in October."],
     [("What do I brew at home?", "beer"), ("What colour is Pixel?", "black"),
      ("What is my job?", "electrician"), ("Which marathon am I running?", "berlin")]),
    ("sofia", ["Hello, I'm Sofia. I teach piano to children.",
               "My husband Marco is from Naples.",
               "We are planting apple trees in our garden.",
               "I'm reading a novel about lighthouses."],
     [("What do I teach?", "piano"), ("Where is Marco from?", "naples"),
      ("What are we planting?", "apple"), ("What is my novel about?", "lighthouse")]),
    ("dev", ["Hey there, I'm Dev. I'm a software tester in Pune.",
             "My parrot Kiwi can say hello.",
             "I'm allergic to cats, sadly.",
             "I'm saving up for a trip to Peru."],
     [("Where do I work as a tester?", "pune"), ("What is my parrot called?", "kiwi"),
      ("What am I allergic to?", "cat"), ("Where am I saving up to go?", "peru")]),
    ("nora", ["Hi! I'm Nora. I volunteer at an animal shelter on Sundays.",
              "My brother Erik just bought a motorbike.",
              "I'm knitting a green scarf for my mum.",
              "My favourite band is Radiohead."],
     [("Where do I volunteer?", "shelter"), ("What did Erik buy?", "motorbike"),
      ("What colour is the scarf I'm knitting?", "green"),
      ("What is my favourite band?", "radiohead")]),
    ("luca", ["Hello! I'm Luca, a chef at a small restaurant in Turin.",
              "I have two rabbits, Bella and Nino.",
              "I'm learning to sail on Lake Garda.",
              "My daughter plays the violin."],
     [("Where is my restaurant?", "turin"), ("What pets do I have?", "rabbit"),
      ("Where am I learning to sail?", "garda"), ("What does my daughter play?", "violin")]),
    ("hana", ["Hi, I'm Hana. I study marine biology in Busan.",
              "I went scuba diving in Jeju last summer.",
              "My roommate Yuna bakes bread every weekend.",
              "I want to adopt a beagle."],
     [("What do I study?", "marine"), ("Where did I go scuba diving?", "jeju"),
      ("What does Yuna bake?", "bread"), ("What dog do I want to adopt?", "beagle")]),
    ("owen", ["Hey, Owen here. I repair bicycles for a living.",
              "My partner Sam is a firefighter.",
              "We're getting married in August.",
              "I grew up on a farm in Wales."],
     [("What do I repair?", "bicycle"), ("What does Sam do?", "firefighter"),
      ("When are we getting married?", "august"), ("Where did I grow up?", "wales")]),
    ("ines", ["Hello, I'm Ines. I translate books from French.",
              "My tortoise Lola is forty years old.",
              "I swim in the sea every morning.",
              "My next holiday is in Crete."],
     [("What language do I translate from?", "french"), ("What is my tortoise called?", "lola"),
      ("Where do I swim every morning?", "sea"), ("Where is my next holiday?", "crete")]),
    ("ben", ["Hi! I'm Ben. I drive a tram in Melbourne.",
             "My daughter Zoe loves dinosaurs.",
             "I'm building a treehouse this summer.",
             "My favourite sport is cricket."],
     [("What do I drive?", "tram"), ("What does Zoe love?", "dinosaur"),
      ("What am I building this summer?", "treehouse"),
      ("What is my favourite sport?", "cricket")]),
]  # fmt: skip


def loops(reply: str) -> bool:
    """A sentence of three words or more written twice, or a run of six words written twice."""
    sentences = Counter(part.strip().lower() for part in re.split(r"[.!?]", reply)
                        if len(part.split()) >= 3)  # fmt: skip
    words = reply.lower().split()
    runs = Counter(tuple(words[start : start + 6]) for start in range(len(words) - 5))
    return max(sentences.values(), default=0) >= 2 or max(runs.values(), default=0) >= 2


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--same-thread",
        action="store_true",
        help="ask the questions in the thread where the facts were said",
    )
    parser.add_argument(
        "--feed",
        type=int,
        default=small_prompt.FEED_LINES,
        help="the thread's last lines the small prompt shows",
    )
    parser.add_argument("--penalty", type=float, default=BundledSmolLM2.repeat_penalty)
    parser.add_argument(
        "--runs",
        type=int,
        default=BundledSmolLM2.no_repeat_tokens or 0,
        help="the model's no_repeat_tokens: a run of RUNS tokens of a reply not written again "
        "(0: off)",
    )
    parser.add_argument(
        "--again",
        action="store_true",
        help="then ask the questions again in another new thread (what a person who did not "
        "like the first answers does); counted apart",
    )
    parser.add_argument(
        "--name-person",
        action="store_true",
        help="the bot's human_name is each chat's person's name, not the default HUMAN",
    )
    parser.add_argument("--show", action="store_true", help="print every question and reply")
    parser.add_argument(
        "--seed",
        type=int,
        help="the model's first seed (each reply's seed follows the one before): another seed "
        "draws every reply anew, so a change is judged over several",
    )
    args = parser.parse_args()  # fmt: skip
    announce()
    small_prompt.FEED_LINES = bot_module.SMALL_FEED_LINES = args.feed  # type: ignore[attr-defined]
    llm = BundledSmolLM2()
    llm.repeat_penalty, llm.seed = args.penalty, args.seed
    llm.no_repeat_tokens = args.runs or None
    said = asked = looped = replies = copies = said_again = unfinished = 0
    for person, facts, questions in CHATS:
        memory = Memory(Path(tempfile.mkdtemp()) / "memory.db", embedder="minilm")
        bot = Bot(memory, llm)
        if args.name_person:
            memory.configure_bot(bot.name, human_name=person.capitalize())
        for text in facts:
            reply = bot.turn(text, user=person, thread="first").response
            looped, unfinished = looped + loops(reply), unfinished + cut_short(reply, memory)
            replies += 1
        thread, last = "first", ""
        if not args.same_thread:
            end_conversation(memory, llm, bot=bot.name, user=person, thread="first",
                             remember=True)  # fmt: skip
            thread = "later"
            last = bot.turn("Hello again!", user=person, thread=thread).response
        for question, answer in questions:
            reply = bot.turn(question, user=person, thread=thread).response
            holds = answer in reply.lower()
            said, asked, replies = said + holds, asked + 1, replies + 1
            looped, unfinished = looped + loops(reply), unfinished + cut_short(reply, memory)
            copies += bool(last) and reply[:40] == last[:40]
            last = reply
            if args.show:
                print(f"{'+' if holds else '-'} {question} | {reply}")
        if args.again:
            bot.turn("Hello again!", user=person, thread="again")
            for question, answer in questions:
                reply = bot.turn(question, user=person, thread="again").response
                said_again += answer in reply.lower()
                if args.show:
                    print(f"{'+' if answer in reply.lower() else '-'} again: {question} | {reply}")
        memory.close()
    where = "same thread" if args.same_thread else "new thread"
    where += ", the person by name" if args.name_person else ""
    again = f", asked again in a new thread: said {said_again} of {asked}" if args.again else ""
    print(
        f"{where}, feed {args.feed}, repeat penalty {args.penalty}, runs {args.runs}, "
        f"seed {args.seed}: "
        f"said {said} of {asked}, "
        f"replies looping {looped} of {replies}, copies of the previous reply {copies}, "
        f"ending mid-sentence at the cap {unfinished}{again}"
    )


def cut_short(reply: str, memory: Memory) -> bool:
    """Whether the token cap stopped ``reply`` in the middle of a sentence."""
    ended = re.search(r"[.!?…][\"')\]”’]*$", reply.strip())
    return not ended and memory.tokens.count(reply) >= 60


if __name__ == "__main__":
    main()
