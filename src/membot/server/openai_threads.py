"""Which thread a conversation is when an OpenAI client names none.

OpenAI clients keep no thread: they resend the whole conversation each call, and only its last
message is new. membot already stores every line of a thread, the bot's replies included, so
it recognises the conversation by comparing the earlier messages the client resends with the
lines it holds: a thread whose answered lines are the resent history (or the end of it) is the
conversation's thread. No new table and no second copy of the conversation: the store's own
lines are the record. The bot's replies are what tells two conversations apart that open
alike ("hi"): a model rarely answers two conversations word for word the same, and once it
has, the next person line separates them (the first that continues takes one thread, the
other conversation finds the second, still matching one).

A conversation with no earlier message is new: it gets a new thread, dated as the web app
dates its threads (``chat-2026-03-14-093000``). The name holds nothing of what was said, so
no secret is needed to keep a forgotten line out of it.
"""

from __future__ import annotations

from collections.abc import Sequence

from membot import Line, Memory, Role, ThreadInfo

# The person's most recently active threads that are compared; each is read once, so a
# person with thousands of threads costs this many reads at most.
MAX_COMPARED_THREADS = 50
# A thread may hold a few person lines the model never answered (a failed turn the client
# did not keep in its history); a thread with more lines than that beyond the resent history
# cannot be its end and is not read.
MAX_UNANSWERED_LINES = 10

Said = tuple[Role, str]


def conversation_thread(memory: Memory, *, bot: str, user: str, earlier: Sequence[Said]) -> str:
    """The thread of ``user``'s conversation with ``bot`` whose earlier messages, the person's
    and the bot's in order, are ``earlier``: the thread whose answered lines are the longest
    end of them (ties to the most recently active), else a new thread. Only ``user``'s own
    threads are compared."""
    if earlier:
        found = _thread_holding(memory, bot, user, [_said(role, text) for role, text in earlier])
        if found is not None:
            return found
    return memory.new_thread_name(bot=bot, user=user)


def _thread_holding(memory: Memory, bot: str, user: str, earlier: list[Said]) -> str | None:
    best: tuple[int, str] | None = None
    # The person's own threads: those of an identity linked with them are listed too.
    own = [info for info in memory.threads(user=user, bot=bot) if info.person == user]
    for info in _candidates(own, len(earlier)):
        lines = memory.thread_lines(user=user, bot=bot, thread=info.name, limit=info.lines)
        held = answered(lines)
        if held and len(held) <= len(earlier) and earlier[-len(held) :] == held:
            if best is None or len(held) > best[0]:
                best = (len(held), info.name)
            if len(held) == len(earlier):
                break  # the whole conversation: none can match more
    return None if best is None else best[1]


def _candidates(threads: list[ThreadInfo], resent: int) -> list[ThreadInfo]:
    """The threads that could hold the end of ``resent`` messages, most recently active
    first."""
    fitting = [info for info in threads if 0 < info.lines <= resent + MAX_UNANSWERED_LINES]
    fitting.sort(key=lambda info: info.last_line_at or info.created_at, reverse=True)
    return fitting[:MAX_COMPARED_THREADS]


def answered(lines: Sequence[Line]) -> list[Said]:
    """A thread's person and bot lines as a client resends them: a person line the bot never
    answered (followed by another person line, or last) is left out, as are tool lines."""
    said = [_said(line.role, line.text) for line in lines if line.role in (Role.HUMAN, Role.BOT)]
    kept = []
    for place, (role, text) in enumerate(said):
        following = said[place + 1][0] if place + 1 < len(said) else None
        if role == Role.BOT or following == Role.BOT:
            kept.append((role, text))
    return kept


def _said(role: Role, text: str) -> Said:
    # Clients may trim or add a trailing newline to what they were sent.
    return (role, text.strip())
