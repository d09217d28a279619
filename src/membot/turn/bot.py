"""``Bot.turn()``: the one orchestration of a turn, shared by every front end.

store the human line → recall history (lines and summaries) and expertise → fill the bot's
templates under the budget → ask the LLM for JSON with citations → store the reply → fold
lines scrolled off the feed into the running summary → Turn, with the whole trace.
"""

from __future__ import annotations

import functools
import logging
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

import numpy as np

from membot.config import DEFAULT_BOT, DEFAULT_LLM, BotSettings
from membot.errors import (
    ConfigError,
    MembotError,
    NotFoundError,
    StoreError,
    TurnFailedError,
)
from membot.line_checks import check_bot_name, check_moment, storable
from membot.llm import LLM
from membot.llm.pool import SHARED, LLMPool
from membot.memory.facade import LineInput, Memory, Recall
from membot.model import Block, Citation, Line, Role, Turn, utc_now
from membot.turn.artefacts import LEFT_OUT_NOTE, ReplyContext, clean_reply
from membot.turn.changes import change_marks, changed_facts, marked_matches
from membot.turn.context import (
    LEFT_OUT,
    Hint,
    Prompt,
    Speakers,
    assemble,
    block_hint,
    chunk_hint,
    match_string,
    summary_hint,
    without_repeats,
)
from membot.turn.ending import Ending, end_conversation, end_idle_threads
from membot.turn.relevance import check_hints
from membot.turn.replies import (
    Reply,
    instruction_examples,
    read_reply,
    relay_reply,
    reply_schema,
)
from membot.turn.running_summary import fold, fold_own_words, grounded, lines_to_fold
from membot.turn.small_prompt import FEED_LINES as SMALL_FEED_LINES
from membot.turn.small_prompt import REPLY_TOKENS as SMALL_REPLY_TOKENS
from membot.turn.small_prompt import assemble_small, resolved_style
from membot.turn.templates import fill
from membot.turn.word_citations import FOUND_BY_WORDS_NOTE, cited_by_words

NO_CITATIONS = "citations off: "  # a note's start: the model cannot give the citations asked
NO_RESPONSE_NOTE = "answered with no_response"

log = logging.getLogger(__name__)


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


@dataclass(frozen=True)
class _Recalled:
    """What a turn recalled, and what it matched with: the makings of its prompt."""

    line: Line
    profile: BotSettings
    feed: list[Line]
    history_query: str
    expertise_query: str
    recall: Recall
    history: list[Hint]
    expertise: list[Hint]
    summary: str  # the thread's running summary, once lines have scrolled off the feed


@dataclass
class _Answer:
    """The model's reply and the bot's line that stores it (none on a dry run or a failure)."""

    reply: Reply = field(default_factory=lambda: Reply("", ()))
    line: Line | None = None
    error: str | None = None
    notes: list[str] = field(default_factory=list)


def _long_line_note(prompt: Prompt) -> list[str]:
    """Where the person's line did not fit the budget whole, a note saying what was kept."""
    left_out = prompt.cut.get("new_line_tokens")
    if not left_out:
        return []
    kept = prompt.messages[-1]["content"]
    parts = "its start and its end" if LEFT_OUT in kept else "its start"
    return [
        f"the line is too long for the prompt's budget: the model was given {parts}, "
        f"about {left_out:,} of its tokens left out"
    ]


class Bot:
    """A named bot over a :class:`Memory`, answering with an :class:`~membot.llm.LLM`."""

    def __init__(
        self,
        memory: Memory,
        llm: LLM | None = None,
        name: str = DEFAULT_BOT,
        *,
        llms: LLMPool | None = None,
    ) -> None:
        """``llm`` answers unless the bot's profile names its own model (``llm``), which
        ``llms`` makes once and shares; with neither, the bundled SmolLM2 answers."""
        self.name = check_bot_name(name)
        self.memory = memory
        self.llms = llms or SHARED
        self.llm = llm if llm is not None else self.llms.get(DEFAULT_LLM)  # loads on first use

    def model_for(self, settings: BotSettings) -> LLM:
        """The model that answers under ``settings``: the profile's own, else the bot's."""
        if settings.llm:
            return self.llms.get(settings.llm, settings.llm_key_env or None)
        return self.llm

    @property
    def speakers(self) -> Speakers:
        settings = self.memory.bot_settings(self.name)
        return Speakers(settings.human_name, settings.bot_name)

    def add_tool_result(self, text: str, *, user: str, thread: str, tool: str) -> Line:
        """Store a tool's or function's result in the thread (role ``tool``). It shows in
        the feed while recent, and is left out of recall unless the bot's ``recall_roles``
        include ``tool``: live data should be fetched again, not remembered. A turn of the
        thread under way, in any process, is answered first: the result follows the reply."""
        if (
            not isinstance(tool, str) or not tool.strip()
        ):  # "TOOL ": whose result, nobody could tell
            raise ConfigError("a tool result needs the tool's name: weather, for example")
        return self.memory.add(
            text, user=user, thread=thread, role=Role.TOOL, bot=self.name, speaker=f"TOOL {tool}"
        )

    def turn(
        self,
        text: str,
        *,
        user: str,
        thread: str,
        dry_run: bool = False,
        settings: dict[str, Any] | None = None,
        now: datetime | None = None,
        on_text: Callable[[str], None] | None = None,
        source_key: str | None = None,
        bot_id: int | None = None,
    ) -> Turn:
        """Store ``text`` as the person's line and answer it.

        ``settings`` overrides the bot's profile for this turn only (a value passed with
        the call beats the profile, which beats the defaults). The line is stored before
        the LLM is called, so it is kept even when the LLM fails; the failure is reported in
        ``Turn.error`` with an empty response. Any other failure once the line is stored
        (a busy store, a bug) raises :class:`TurnFailedError`, which names the stored line.

        ``now`` (default: the clock) is the moment of the turn: the prompt states it, time
        words in the line ("last week") are read from it, and both lines are stored with it
        (it must carry its time zone: ``datetime.now(UTC)``).

        ``on_text``, when given, is called with each piece of the reply's text as the model
        writes it (never the JSON around it); the stored reply is exactly what it was given.

        ``source_key`` says where the line came from (e.g. ``twilio:`` and a text's
        MessageSid); a thread holds each key once, and a turn on a key it holds already is
        refused with ``ConflictError`` before the model is called.

        ``bot_id`` is the bot's id when the request began (a server reads it before it waits
        for the thread; default: read now): a turn whose bot was deleted meanwhile, or
        deleted and made again, stores nothing (``NotFoundError``). A bot not made yet is
        made by the line, as ever.
        """
        known_bot = bot_id if bot_id is not None else self.memory.bot_id(self.name)
        clock = _Clock()
        started = time.perf_counter()
        profile, llm, notes = self._profile_and_model(settings)
        # Citations asked for that the model cannot give are found by the reply's words.
        cite_by_words = any(note.startswith(NO_CITATIONS) for note in notes)
        given = now is not None
        now = check_moment(now, "now") if now is not None else utc_now()
        item = self.memory.validate_line(
            LineInput(
                text, user, thread, Role.HUMAN, self.name, created_at=now, source_key=source_key
            )
        )
        with clock.step("embed"):  # the line and the forms of it recall will search
            vector, prepared = self.memory.embed_question(text, profile)
        # One turn of a thread at a time, in any process: its line, the reply, the reply
        # stored (two at once put a reply after the other turn's line).
        with self.memory.turn_lock(bot=self.name, user=item.user, thread=item.thread):
            if known_bot is not None and self.memory.bot_id(self.name) != known_bot:
                # Deleted while this turn waited: its line would make the bot again, with
                # a default profile, and keys revoked would have spoken through it.
                raise NotFoundError(f"no bot named {self.name!r}: it was deleted meanwhile")
            if not given:  # timed once its turn came: a thread's times follow its order
                now = utc_now()
                item = replace(item, created_at=now)
            with clock.step("store"):
                line, vector = self.memory.add_with_vector(item, vector)
            with _kept_on_failure(line, self.memory):
                with clock.step("search"):
                    recalled = self._recall(line, vector, prepared, profile, now)
                with clock.step("assemble"):
                    prompt = self._pack(recalled, recalled.history, recalled.expertise, now)
                if profile.relevance_check and not dry_run and (prompt.history or prompt.expertise):
                    prompt = self._keep_relevant(prompt, recalled, llm, now, clock, notes)
                notes += _long_line_note(prompt)
                answer = _Answer()
                if not dry_run:
                    answer = self._answer(
                        line, prompt, profile, llm, on_text, now if given else None, clock
                    )
                    notes += answer.notes
                reply = answer.reply
                if cite_by_words and answer.line is not None:
                    reply, found = self._cited_by_words(reply, prompt, profile, line.text)
                    notes += found
                return self._turn(line, answer.line, reply, answer.error, prompt,
                                  recalled.recall, profile, clock, started, notes)  # fmt: skip

    # -- the steps of a turn --------------------------------------------------------------

    def _profile_and_model(
        self, settings: dict[str, Any] | None
    ) -> tuple[BotSettings, LLM, list[str]]:
        """The turn's profile (the bot's, with ``settings`` over it), the model that answers,
        and a note where the profile had to bend to the model."""
        profile = self.memory.bot_settings(self.name, settings)
        llm = self.model_for(profile)
        notes = []
        if profile.citations and not getattr(llm, "writes_json", True):
            # A model that cannot keep to JSON answers in text: better a reply than citations.
            notes.append(f"{NO_CITATIONS}{llm.name} cannot write JSON reliably")
            profile = replace(profile, citations=False)
        style = resolved_style(profile, llm)
        if style == "small":
            # The small prompt has no ids to cite, and asks for a sentence or two.
            if profile.prompt_style == "auto":
                notes.append(f"small prompt: {llm.name} cannot read the full one")
            if profile.citations:
                notes.append(f"{NO_CITATIONS}the small prompt asks for a sentence, not ids")
            reply_tokens = min(profile.reply_tokens, SMALL_REPLY_TOKENS)
            profile = replace(profile, citations=False, reply_tokens=reply_tokens)
        return replace(profile, prompt_style=style), llm, notes

    def _recall(
        self,
        line: Line,
        vector: np.ndarray,
        prepared: Mapping[str, np.ndarray],
        profile: BotSettings,
        now: datetime,
    ) -> _Recalled:
        """What the turn recalls: the thread's recent lines (the feed), the history matched
        (lines, then kept summaries) and the expertise, each with the string it matched."""
        # The small prompt shows the thread's last SMALL_FEED_LINES lines: the lines before
        # them are searched like any other, or what was said a few lines ago in this thread
        # would be neither shown nor recalled.
        window = profile
        if profile.prompt_style == "small":
            window = replace(profile, window_size=min(profile.window_size, SMALL_FEED_LINES))
        feed = self.memory.recent(line, window.window_size)
        history_query = match_string(profile.history_match_fmt, profile, line.text, feed, now=now)
        recall = self.memory.recall(line, window, vector, history_query, now, prepared)
        # Facts a later recalled line changed: marked in the prompt and in the trace.
        changes = changed_facts(recall.matches, lambda texts: self.memory.embed(texts, keep=False))
        recall = replace(recall, matches=marked_matches(recall.matches, changes))
        history = self._history_hints(
            recall.blocks, feed, history_query, line, vector, profile, change_marks(changes)
        )
        expertise_query = match_string(
            profile.expertise_match_fmt, profile, line.text, feed, story=True, now=now
        )
        expertise = self._expertise_hints(expertise_query, history_query, vector, profile)
        summary = ""
        state = self.memory.thread_state(bot=self.name, user=line.person, thread=line.thread)
        if state and feed and feed[0].seq > 1:  # lines have scrolled off the feed
            summary = state.summary
        return _Recalled(
            line, profile, feed, history_query, expertise_query, recall, history, expertise, summary
        )

    def _pack(
        self, recalled: _Recalled, history: list[Hint], expertise: list[Hint], now: datetime
    ) -> Prompt:
        """The prompt, packed under the profile's budget from these hints."""
        if recalled.profile.prompt_style == "small":
            return assemble_small(
                recalled.profile, recalled.line.text, recalled.feed, history, expertise,
                self.memory.tokens, now=now,
                match_strings=(recalled.history_query, recalled.expertise_query),
            )  # fmt: skip
        return assemble(
            recalled.profile,
            recalled.line.text,
            recalled.feed,
            history,
            expertise,
            self.memory.tokens,
            summary=recalled.summary,
            now=now,
            match_strings=(recalled.history_query, recalled.expertise_query),
        )

    def _keep_relevant(
        self,
        prompt: Prompt,
        recalled: _Recalled,
        llm: LLM,
        now: datetime,
        clock: _Clock,
        notes: list[str],
    ) -> Prompt:
        """The prompt packed again from the hints the model judged relevant (the bot's
        ``relevance_check``). Only the hints that fit the budget are put to the model."""
        text = recalled.line.text
        with clock.step("relevance_check"):
            kept_history, dropped = check_hints(llm, text, list(prompt.history))
            kept_expertise, more = check_hints(llm, text, list(prompt.expertise))
            notes += dropped + more
        if len(kept_history) + len(kept_expertise) == len(prompt.history) + len(prompt.expertise):
            return prompt
        with clock.step("assemble"):
            repacked = self._pack(recalled, kept_history, kept_expertise, now)
        # The hints the budget cut from the first packing stay counted.
        over_budget = Counter(
            history_hints=len(recalled.history) - len(prompt.history),
            expertise_hints=len(recalled.expertise) - len(prompt.expertise),
        )
        return replace(repacked, cut=dict(Counter(repacked.cut) + over_budget))

    def _answer(
        self,
        line: Line,
        prompt: Prompt,
        profile: BotSettings,
        llm: LLM,
        on_text: Callable[[str], None] | None,
        at: datetime | None,
        clock: _Clock,
    ) -> _Answer:
        """Ask the model, store its reply as the bot's line (dated ``at``, or when stored),
        and fold the lines scrolled off the feed into the running summary. A model that
        fails is reported in the answer's ``error``, with no reply stored."""
        with clock.step("llm"):
            try:
                reply = self._reply(prompt, profile, on_text, llm)
            except MembotError as failure:  # down, timeout, bad or missing key
                return _Answer(error=str(failure))
        answer = _Answer(reply=reply, notes=[reply.note] if reply.note else [])
        with clock.step("store"):
            item = LineInput(
                storable(reply.response), line.person, line.thread, Role.BOT, self.name,
                created_at=at, answers=line.id,
            )  # fmt: skip
            try:
                answer.line, _ = self.memory.add_with_vector(item)
            except NotFoundError as gone:  # the person was forgotten meanwhile
                self.memory.discard_embedding(item)
                answer.notes.append(str(gone))
        if profile.thread_summary and answer.line is not None:
            with clock.step("summarize"):
                answer.notes += self._fold_scrolled_lines(answer.line, profile, llm)
        return answer

    # -- ending threads -------------------------------------------------------------------

    def end_thread(self, *, user: str, thread: str, remember: bool) -> Ending:
        """End one of the person's threads; with ``remember`` (the person said yes), keep its
        key points, written by the bot's model and held to its remember-policy."""
        llm = self.model_for(self.memory.bot_settings(self.name)) if remember else None
        return end_conversation(
            self.memory, llm, bot=self.name, user=user, thread=thread, remember=remember
        )

    def end_idle_threads(self, *, user: str | None = None, remember: bool = False) -> list[Ending]:
        """End the bot's threads (one person's, or everyone's) idle longer than its
        ``idle_timeout_minutes``; nothing is remembered unless ``remember``."""
        llm = self.model_for(self.memory.bot_settings(self.name)) if remember else None
        return end_idle_threads(self.memory, llm, bot=self.name, user=user, remember=remember)

    def _history_hints(
        self,
        blocks: Sequence[Block],
        feed: Sequence[Line],
        query: str,
        line: Line,
        line_vector: np.ndarray,
        profile: BotSettings,
        marks: dict[int, str],
    ) -> list[Hint]:
        speakers = Speakers(profile.human_name, profile.bot_name)
        hints = [block_hint(block, speakers, marks) for block in without_repeats(blocks, feed)]
        if profile.recall_summaries and profile.max_matches > 0:
            vector = (
                line_vector if query == line.text else self.memory.embed([query], keep=False)[0]
            )
            owner = None if profile.share_across_people else line.person
            found = self.memory.search_summaries(
                vector, bot=self.name, user=owner, k=profile.max_matches,
                min_score=profile.threshold,
            )  # fmt: skip
            hints += [summary_hint(summary, score) for summary, score in found]
        return hints

    def _expertise_hints(
        self, query: str, history_query: str, line_vector: np.ndarray, profile: BotSettings
    ) -> list[Hint]:
        if profile.expertise_max_matches == 0:
            return []
        vector = (
            line_vector if query == history_query else self.memory.embed([query], keep=False)[0]
        )
        found = self.memory.search_expertise(vector, bot=self.name,
                                             k=profile.expertise_max_matches,
                                             min_score=profile.expertise_min_score)  # fmt: skip
        return [chunk_hint(chunk, score) for chunk, score in found]

    def _reply(
        self,
        prompt: Prompt,
        profile: BotSettings,
        on_text: Callable[[str], None] | None,
        llm: LLM,
    ) -> Reply:
        """The model's reply, read; streamed to ``on_text`` when given."""
        hint_ids = [hint.id for hint in (*prompt.history, *prompt.expertise)]
        schema = reply_schema(hint_ids) if profile.citations else None
        messages, limit = list(prompt.messages), profile.reply_tokens
        if on_text is None:
            return self._read(llm.complete(messages, limit, schema=schema), prompt, profile)
        examples = instruction_examples(profile.bot_name) if profile.citations else ()
        return relay_reply(
            llm.stream(messages, limit, schema=schema),
            on_text,
            lambda raw: self._read(raw, prompt, profile),
            json_wanted=profile.citations,
            examples=examples,
            artefacts=_reply_context(prompt, profile),
        )

    def _read(self, raw: str, prompt: Prompt, profile: BotSettings) -> Reply:
        known = {hint.id for hint in (*prompt.history, *prompt.expertise)}
        if profile.citations:
            reply = read_reply(raw, known, instruction_examples(profile.bot_name))
        else:
            reply = Reply(raw.strip(), ())
        context = _reply_context(prompt, profile)
        # llama.cpp stops at the cap without saying so; the reply's count tells (within one)
        at_cap = context.whole_sentences and (
            self.memory.tokens.count(storable(raw)) >= profile.reply_tokens - 1
        )
        cleaned = clean_reply(reply.response, context, at_cap=at_cap)
        if cleaned.found:
            left_out = f"{LEFT_OUT_NOTE}{', '.join(cleaned.found)}"
            note = f"{reply.note}; {left_out}" if reply.note else left_out
            reply = replace(reply, response=cleaned.text, note=note)
        if not reply.response:
            why = reply.note or "the model gave no response"
            return Reply(fill(profile.no_response, prompt.values), (), f"{why}; {NO_RESPONSE_NOTE}")
        return reply

    def _fold_scrolled_lines(self, newest: Line, profile: BotSettings, llm: LLM) -> list[str]:
        state = self.memory.thread_state(bot=self.name, user=newest.person, thread=newest.thread)
        if state is None:
            return []
        seqs = lines_to_fold(profile, state.summary_through, newest.seq)
        if not seqs:
            return []
        lines = self.memory.thread_lines(
            user=newest.person,
            bot=self.name,
            thread=newest.thread,
            after_seq=seqs.start - 1,
            limit=len(seqs),
        )
        folded = f"folded lines {seqs.start}-{seqs.stop - 1} into the running summary"
        summary: str | None
        if not getattr(llm, "writes_summaries", True):
            # The person's own statements (membot.turn.own_words): nothing a model wrote to check,
            # and lines without any move the summary on all the same.
            summary = fold_own_words(profile, state.summary, lines)
            self.memory.save_thread_summary(state, summary, seqs.stop - 1)
            return [folded]
        try:
            summary = fold(llm, profile, state.summary, lines)
            notes: list[str] = []
            if summary is not None:  # held to the lines, like a remembered point
                # Checked, not stored: the sentences' vectors stay out of the embedding cache.
                embed = functools.partial(self.memory.embed, keep=False)
                summary, notes = grounded(summary, state.summary, lines, profile, embed)
        except MembotError as failure:
            return [f"running summary not updated: {failure}"]
        if not summary:
            why = "nothing it wrote is supported by the lines" if notes else "it wrote nothing"
            return [*notes, f"running summary not updated: {why}"]
        self.memory.save_thread_summary(state, summary, seqs.stop - 1)
        return [*notes, folded]

    @staticmethod
    def _cited_by_words(
        reply: Reply, prompt: Prompt, profile: BotSettings, question: str
    ) -> tuple[Reply, list[str]]:
        """``reply`` citing the hints it drew words from, and a note saying so (none for the
        bot's ``no_response``, which drew on nothing)."""
        if NO_RESPONSE_NOTE in (reply.note or ""):
            return reply, []
        hints = [*prompt.history, *prompt.expertise]
        names = (profile.bot_name, profile.human_name)
        small = profile.prompt_style == "small"
        ids = cited_by_words(reply.response, question, hints, names, small=small)
        return replace(reply, citation_ids=tuple(ids), cited_by_words=True), (
            [FOUND_BY_WORDS_NOTE] if ids else []
        )

    def _turn(
        self,
        line: Line,
        reply_line: Line | None,
        reply: Reply,
        error: str | None,
        prompt: Prompt,
        recall: Recall,
        profile: BotSettings,
        clock: _Clock,
        started: float,
        notes: list[str],
    ) -> Turn:
        total = (time.perf_counter() - started) * 1000
        timings = {name: clock.ms.get(name, 0.0) for name in ("embed", "search", "assemble")}
        timings["store"] = clock.ms.get("store", 0.0)
        for slow in ("llm", "relevance_check", "summarize"):
            timings[slow] = clock.ms.get(slow, 0.0)
        timings["memory_total"] = total - timings["llm"] - timings["relevance_check"]
        timings["memory_total"] -= timings["summarize"]
        hints = {hint.id: hint for hint in (*prompt.history, *prompt.expertise)}
        found_by = "words" if reply.cited_by_words else "model"
        citations = tuple(
            Citation(i, hints[i].text, hints[i].source, hints[i].score, found_by)
            for i in reply.citation_ids
            if i in hints
        )
        scores = [c.score for c in citations] or [hint.score for hint in hints.values()]
        tokens = {
            "prompt": prompt.tokens,
            "budget": profile.prompt_budget,
            "context_size": profile.context_size,
            "reply_limit": profile.reply_tokens,
            "line": line.tokens,
            "recalled": sum(each.tokens for block in prompt.blocks for each in block.lines),
            "response": reply_line.tokens if reply_line else 0,
        }
        values = prompt.values
        return Turn(
            response=reply_line.text if reply_line else "",
            bot=self.name,
            person=line.person,
            thread=line.thread,
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
            score=max(scores) if scores else None,
            citations=citations,
            feed=values["FEED"],
            story=values["STORY"],
            history_match_string=values["HISTORY_MATCH_STRING"],
            history_matches=tuple(hint.to_json() for hint in prompt.history),
            history_hints=values["HISTORY_HINTS"],
            expertise_match_string=values["EXPERTISE_MATCH_STRING"],
            expertise_matches=tuple(hint.to_json() for hint in prompt.expertise),
            expertise_hints=values["EXPERTISE_HINTS"],
            notes=tuple(notes),
        )


def _reply_context(prompt: Prompt, profile: BotSettings) -> ReplyContext:
    """What the reply's artefacts are recognised by: the bot's and the person's names, the
    speakers of the lines the prompt showed, the person's line, and with the small prompt
    the bot's previous reply and whole sentences."""
    speakers = Speakers(profile.human_name, profile.bot_name)
    lines = [*prompt.feed, *(line for block in prompt.blocks for line in block.lines)]
    # The small model copies the chat's last message, its own reply, into the next one.
    replies = [line.text for line in prompt.feed if line.role == Role.BOT]
    small = profile.prompt_style == "small"
    previous = replies[-1] if replies and small else ""
    return ReplyContext.of(
        profile.bot_name,
        profile.human_name,
        {speakers.label(line) for line in lines},
        prompt.values["QUERY"],
        previous,
        whole_sentences=small,  # its replies are capped at a sentence or two
    )


@contextmanager
def _kept_on_failure(line: Line, memory: Memory) -> Iterator[None]:
    """A failure after ``line`` was stored is raised as a TurnFailedError naming it: a
    client told only "try again" would store the line a second time. If the line is gone
    (its thread forgotten meanwhile), NotFoundError says so instead."""
    try:
        yield
    except TurnFailedError:
        raise
    except Exception as failure:
        # A store that failed is not asked again (a pool waits its whole timeout); a bug is
        # logged whatever else is true.
        if not isinstance(failure, MembotError):  # a bug: its message says only "failed"
            log.error("a turn failed after its line was stored", exc_info=failure)
        if not isinstance(failure, StoreError) and _forgotten(line, memory):
            raise NotFoundError(
                f"thread {line.thread!r} of {line.person!r} was forgotten while this turn ran: "
                "the line is not kept"
            ) from failure
        raise TurnFailedError(line.thread, line.seq, failure) from failure


def _forgotten(line: Line, memory: Memory) -> bool:
    """Whether ``line`` is gone from the store; False when the store cannot tell now."""
    try:
        return not memory.is_stored(line)
    except MembotError:
        return False
