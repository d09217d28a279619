"""The worlds the isolation properties (test_isolation.py) run in, drawn by Hypothesis: bots
that share memory across their people or not, people, threads, lines, kept summaries, a
document per bot, API keys of every scope and state, and people linked as one person of a
bot by a link code.

Every text a person said to a bot carries a marker word of its own, one per bot and person
(``zqx07zqx``), and every bot's document one per bot (``zqxd1zqx``); the words around the
markers come from one small shared vocabulary, so without its scope a search or a recall
would match other people's lines. A leak is then a marker found in an answer that may not
carry it: acting as one person of a bot, an answer may carry that person's markers, the
bot's document's, those of the people linked with them by that bot, and, when the bot shares
memory across people, those of the bot's other people; nothing else.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any, Literal

from hypothesis import strategies as st

from membot import Memory, utc_now
from membot.service import create_key, revoke_key
from membot.store.base import StoredKey

# Shared by everyone's lines: any two lines likely have a word in common.
VOCABULARY = ("coffee", "garden", "train", "piano", "river", "bread")
QUERY = "coffee garden train piano river bread"
# Short names from a few letters, so names differing only in case ("a", "A") or as prefixes
# ("a", "a1") come up often; no '.', '/' or space, which a URL path would not keep as they are.
NAMES = st.text(alphabet="abAB1-_", min_size=1, max_size=3)
THREADS = ("t1", "T1", "t2")
ROLES = ("human", "human", "bot", "tool")
STRATEGIES = ("blend", "hybrid", "lines", "bm25", "prune", "pairs", "windows")
KeyState = Literal["active", "revoked", "expired"]
Outcome = Literal["ok", "unauthorized", "other bot", "other person", "not a builder"]


@dataclass(frozen=True)
class Said:
    """One line (or a kept summary) of a person in a thread with a bot."""

    bot: str
    user: str
    thread: str
    role: str
    words: tuple[str, ...]


@dataclass(frozen=True)
class KeyPlan:
    """An API key to make: ``bot`` None is an admin key, ``user`` None a bot key."""

    bot: str | None
    user: str | None
    state: KeyState

    @property
    def scope(self) -> str:
        if self.bot is None:
            return "admin"
        return "bot" if self.user is None else "person"


@dataclass(frozen=True)
class World:
    bots: tuple[str, ...]
    people: tuple[str, ...]
    sharing: dict[str, bool]  # bot → shares memory across its people
    strategies: dict[str, str]  # bot → its recall strategy
    lines: tuple[Said, ...]
    summaries: tuple[Said, ...]
    keys: tuple[KeyPlan, ...]
    # (bot, person, scope of the key reading as them): whose memory is read, or tried.
    viewpoints: tuple[tuple[str, str, str], ...]
    later_sharing: dict[str, bool]  # each bot's sharing after it is changed mid-way
    # (bot, maker, enterer): the maker's link code entered by the enterer, in order; the two
    # are then one person of that bot (membot.memory.person_links).
    links: tuple[tuple[str, str, str], ...] = ()

    def group(self, bot: str, user: str) -> set[str]:
        """``user`` and every person linked with them by ``bot``."""
        groups = {person: {person} for person in self.people}
        for linked_by, maker, enterer in self.links:
            if linked_by == bot:
                merged = groups[maker] | groups[enterer]
                for person in merged:
                    groups[person] = merged
        return groups.get(user, {user})

    @property
    def owners(self) -> list[tuple[str, str]]:
        return [(bot, user) for bot in self.bots for user in self.people]

    def marker(self, bot: str, user: str) -> str:
        return f"zqx{self.owners.index((bot, user)):02d}zqx"

    def document_marker(self, bot: str) -> str:
        return f"zqxd{self.bots.index(bot)}zqx"

    @property
    def markers(self) -> dict[str, str]:
        """Every marker → whose it is, for the messages of failed checks."""
        found = {self.marker(bot, user): f"{user!r} of bot {bot!r}" for bot, user in self.owners}
        found.update({self.document_marker(bot): f"bot {bot!r}'s document" for bot in self.bots})
        return found

    def text(self, said: Said) -> str:
        return " ".join((*said.words, self.marker(said.bot, said.user)))

    def visible(self, bot: str, user: str | None, sharing: dict[str, bool]) -> set[str]:
        """The markers an answer acting as ``user`` of ``bot`` may carry (``user`` None: a
        bot or admin key looking at every person of the bot)."""
        if bot not in self.bots:
            return set()
        people = self.people if user is None or sharing[bot] else tuple(self.group(bot, user))
        return {self.document_marker(bot)} | {
            self.marker(bot, person) for person in people if person in self.people
        }

    def threads_with_lines(self) -> list[tuple[str, str, str]]:
        return sorted({(said.bot, said.user, said.thread) for said in self.lines})


def key_plans(bots: list[str], people: list[str]) -> st.SearchStrategy[KeyPlan]:
    states = st.sampled_from(("active", "active", "revoked", "expired"))
    return st.one_of(
        st.builds(KeyPlan, bot=st.none(), user=st.none(), state=states),
        st.builds(KeyPlan, bot=st.sampled_from(bots), user=st.none(), state=states),
        st.builds(KeyPlan, bot=st.sampled_from(bots), user=st.sampled_from(people), state=states),
    )


@st.composite
def worlds(draw: st.DrawFn, max_lines: int = 14, max_keys: int = 4) -> World:
    bots = draw(st.lists(NAMES, min_size=1, max_size=3, unique=True))
    people = draw(st.lists(NAMES, min_size=2, max_size=3, unique=True))
    words = st.lists(st.sampled_from(VOCABULARY), min_size=1, max_size=4).map(tuple)
    said = st.builds(
        Said,
        bot=st.sampled_from(bots),
        user=st.sampled_from(people),
        thread=st.sampled_from(THREADS),
        role=st.sampled_from(ROLES),
        words=words,
    )
    lines = draw(st.lists(said, min_size=2, max_size=max_lines))
    threads = sorted({(line.bot, line.user, line.thread) for line in lines})
    kept = draw(st.lists(st.sampled_from(threads), max_size=3, unique=True))
    summaries = [Said(bot, user, thread, "summary", draw(words)) for bot, user, thread in kept]
    speakers = sorted({(line.bot, line.user) for line in lines})  # may ask for a link code
    link = st.tuples(st.sampled_from(speakers), st.sampled_from(people)).filter(
        lambda pair: pair[0][1] != pair[1]
    )
    links = [(bot, maker, enterer) for (bot, maker), enterer in draw(st.lists(link, max_size=2))]
    scopes = st.sampled_from(("admin", "bot", "person"))
    viewpoints = st.tuples(st.sampled_from(bots), st.sampled_from(people), scopes)
    return World(
        bots=tuple(bots),
        people=tuple(people),
        sharing={bot: draw(st.booleans()) for bot in bots},
        strategies={bot: draw(st.sampled_from(STRATEGIES)) for bot in bots},
        lines=tuple(lines),
        summaries=tuple(summaries),
        keys=tuple(draw(st.lists(key_plans(bots, people), min_size=1, max_size=max_keys))),
        viewpoints=tuple(
            draw(st.lists(viewpoints, min_size=1, max_size=3, unique_by=lambda v: v[:2]))
        ),
        later_sharing={bot: draw(st.booleans()) for bot in bots},
        links=tuple(links),
    )


# -- building a world in a store -----------------------------------------------------------


@dataclass
class Built:
    """A world in a store: the secrets of its keys (by plan, in order)."""

    world: World
    memory: Memory
    secrets: list[tuple[KeyPlan, str]] = field(default_factory=list)


def build(world: World, memory: Memory) -> Built:
    for bot in world.bots:
        # A low threshold: recall keeps nearly every line sharing a word with the query, so
        # a scope left out would show at once.
        memory.create_bot(
            bot,
            share_across_people=world.sharing[bot],
            strategy=world.strategies[bot],
            threshold=0.05,
        )
    for said in world.lines:
        memory.add(
            world.text(said), user=said.user, thread=said.thread, role=said.role, bot=said.bot
        )
    for said in world.summaries:
        memory.add_summary(bot=said.bot, user=said.user, thread=said.thread, text=world.text(said))
    for bot, maker, enterer in world.links:
        code = memory.link_code(user=maker, bot=bot)
        memory.link_with_code(code.code, user=enterer, bot=bot)
    with tempfile.TemporaryDirectory(prefix="membot-isolation-") as folder:
        for bot in world.bots:
            path = Path(folder) / f"guide-{world.bots.index(bot)}.txt"
            path.write_text(f"{QUERY} {world.document_marker(bot)}\n")
            memory.add_documents([path], bot=bot)
    built = Built(world, memory)
    built.secrets = [(plan, make_key(memory, plan)) for plan in world.keys]
    return built


def make_key(memory: Memory, plan: KeyPlan) -> str:
    if plan.state == "expired":
        return expired_key(memory, plan)
    new = create_key(memory, admin=plan.bot is None, bot=plan.bot, user=plan.user)
    if plan.state == "revoked":
        revoke_key(memory, new.key.id)
    return new.secret


def expired_key(memory: Memory, plan: KeyPlan) -> str:
    """A key that expired yesterday. ``create_key`` makes only keys that expire in a day or
    more, so this one is written to the store as ``create_key`` would have written it then."""
    made = utc_now() - timedelta(days=2)
    key_id = secrets.token_hex(6)
    secret = f"mb_{key_id}_{secrets.token_urlsafe(32)}"
    stored = StoredKey(
        id=key_id,
        bot=plan.bot,
        person=plan.user,
        label="expired in the test",
        created_at=made,
        expires_at=made + timedelta(days=1),
        revoked_at=None,
        last_used_at=None,
    )
    memory.store.add_key(stored, hashlib.sha256(secret.encode("ascii")).hexdigest())
    return secret


def expected(plan: KeyPlan, bot: str, user: str | None, *, builder: bool = False) -> Outcome:
    """What a request with the key acting as ``user`` of ``bot`` must meet (``user`` None: a
    request on the bot as a whole); ``builder``: one that changes the bot, which a person's
    key may not."""
    if plan.state != "active":
        return "unauthorized"
    if plan.bot is not None and plan.bot != bot:
        return "other bot"
    if builder and plan.user is not None:
        return "not a builder"
    if user is not None and plan.user is not None and plan.user != user:
        return "other person"
    return "ok"


def citing_everything(memory: Memory, response: str) -> str:
    """A scripted model's reply citing every id a hint could have (lines, summaries and
    chunks of the whole store): whatever is not among this turn's hints must be dropped."""
    count = memory.count_lines() + 8
    ids = [f"{kind}{number}" for kind in "hse" for number in range(1, count)]
    return json.dumps({"response": response, "citation_ids": ids})


def fingerprint(world: World, memory: Memory) -> Any:
    """Everything a request could change, read through the Python API."""
    per_owner = [
        (
            [line.text for line in memory.history(user=user, bot=bot)],
            [summary.text for summary in memory.summaries(user=user, bot=bot)],
            [(thread.name, thread.ended_at) for thread in memory.threads(user=user, bot=bot)],
        )
        for bot, user in world.owners
    ]
    settings = [memory.bot_settings(bot).to_json() for bot in world.bots]
    documents = [[doc.name for doc in memory.documents(bot)] for bot in world.bots]
    return memory.count_lines(), per_owner, settings, documents


def assert_no_leak(world: World, answer: Any, allowed: Iterable[str], where: str) -> None:
    """``answer`` (any JSON-able value, or text) carries no marker outside ``allowed``."""
    text = answer if isinstance(answer, str) else json.dumps(answer, default=str)
    leaked = {marker: whose for marker, whose in world.markers.items() if marker in text}
    for marker in allowed:
        leaked.pop(marker, None)
    assert not leaked, f"{where} carries text of {sorted(leaked.values())}: {text[:3000]}"
