"""membot: a memory for chatbots that does not end.

Every line of dialog is stored with its embedding; at each turn the new line is matched
against everything said before, the matches are expanded into the lines around them, and the
result is packed under a token budget into the prompt of any LLM.

    >>> from membot import Bot, Memory
    >>> memory = Memory("chat.db")                      # doctest: +SKIP
    >>> bot = Bot(memory, llm=resolve_llm("smollm2"))   # doctest: +SKIP
    >>> bot.turn("Where do I work?", user="alice", thread="t2").response  # doctest: +SKIP
"""

from membot.bot import Bot
from membot.config import BotSettings
from membot.embed import Embedder, resolve_embedder
from membot.errors import (
    ConfigError,
    EmbedderMismatchError,
    ImportFormatError,
    MembotError,
    ProviderError,
    StoreError,
)
from membot.llm import LLM, OpenAICompatibleLLM, ScriptedLLM, resolve_llm
from membot.memory import LineInput, Memory, Recall
from membot.model import Block, Citation, ExpertiseChunk, Line, Match, Role, Summary, Turn

__all__ = [
    "LLM",
    "Block",
    "Bot",
    "BotSettings",
    "Citation",
    "ConfigError",
    "Embedder",
    "EmbedderMismatchError",
    "ExpertiseChunk",
    "ImportFormatError",
    "Line",
    "LineInput",
    "Match",
    "MembotError",
    "Memory",
    "OpenAICompatibleLLM",
    "ProviderError",
    "Recall",
    "Role",
    "ScriptedLLM",
    "StoreError",
    "Summary",
    "Turn",
    "resolve_embedder",
    "resolve_llm",
]
