"""``Bot.turn()``: the one orchestration of a turn, shared by every front end.

store the human line → recall → assemble the prompt → ask the LLM → store the reply → Turn.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

from membot.config import DEFAULT_BOT
from membot.context import Speakers, assemble
from membot.errors import MembotError
from membot.llm import LLM, BundledSmolLM2
from membot.memory import LineInput, Memory
from membot.model import Role, Turn


class _Clock:
    """Milliseconds spent per named step."""

    def __init__(self) -> None:
        self.ms: dict[str, float] = {}

    @contextmanager
    def step(self, name: str) -> Iterator[None]:
        started = time.perf_counter()
        try:
            yield
        finally:
            self.ms[name] = self.ms.get(name, 0.0) + (time.perf_counter() - started) * 1000


class Bot:
    """A named bot over a :class:`Memory`, answering with an :class:`~membot.llm.LLM`."""

    def __init__(self, memory: Memory, llm: LLM | None = None, name: str = DEFAULT_BOT) -> None:
        self.memory = memory
        self.llm = llm if llm is not None else BundledSmolLM2()  # loads on first reply
        self.name = name
        self.speakers = Speakers()

    def turn(self, text: str, *, user: str, thread: str, dry_run: bool = False) -> Turn:
        """Store ``text`` as the person's line and answer it.

        The line is stored before the LLM is called, so it is kept even when the LLM fails;
        the failure is reported in ``Turn.error`` with an empty response.
        """
        clock = _Clock()
        started = time.perf_counter()
        settings = self.memory.bot_settings(self.name)
        item = self.memory.validate_line(LineInput(text, user, thread, Role.HUMAN, self.name))
        with clock.step("embed"):
            vector = self.memory.embed([text])[0]
        with clock.step("store"):
            line, vector = self.memory.add_with_vector(item, vector)
        with clock.step("search"):
            recall = self.memory.recall(line, settings, vector)
        with clock.step("assemble"):
            recent = self.memory.recent(line, settings.recent_window - 1)
            budget = settings.prompt_budget
            prompt = assemble(
                recent, line, recall.blocks, self.memory.tokens, budget, self.speakers
            )
        response, error, reply_line = "", None, None
        if not dry_run:
            with clock.step("llm"):
                try:
                    response = self.llm.complete(list(prompt.messages), settings.reply_tokens)
                except MembotError as failure:  # down, timeout, bad or missing key
                    error = str(failure)
            if response:
                with clock.step("store"):
                    reply = LineInput(response, user, thread, Role.BOT, self.name)
                    reply_line, _ = self.memory.add_with_vector(reply)
        total = (time.perf_counter() - started) * 1000
        timings = {name: clock.ms.get(name, 0.0) for name in ("embed", "search", "assemble")}
        timings["store"] = clock.ms.get("store", 0.0)
        timings["llm"] = clock.ms.get("llm", 0.0)
        timings["memory_total"] = total - timings["llm"]
        tokens = {
            "prompt": prompt.tokens,
            "budget": budget,
            "reply_limit": settings.reply_tokens,
            "line": line.tokens,
            "recalled": sum(each.tokens for block in prompt.blocks for each in block.lines),
            "response": reply_line.tokens if reply_line else 0,
        }
        return Turn(
            response=response,
            bot=self.name,
            person=user,
            thread=thread,
            human_line=line,
            bot_line=reply_line,
            recalled=prompt.blocks,
            matches=recall.matches,
            prompt=prompt.text,
            messages=prompt.messages,
            tokens=tokens,
            timings_ms=timings,
            cut=prompt.cut,
            error=error,
        )
