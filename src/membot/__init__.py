"""membot: a memory for chatbots that does not end.

Every line of dialog is stored with its embedding; at each turn the new line is matched
against everything said before, the matches are expanded into the lines around them, and the
result is packed under a token budget into the prompt of any LLM.

    >>> from membot import Bot, Memory
    >>> memory = Memory("chat.db")                      # doctest: +SKIP
    >>> bot = Bot(memory, llm=resolve_llm("smollm2"))   # doctest: +SKIP
    >>> bot.turn("Where do I work?", user="alice", thread="t2").response  # doctest: +SKIP

This module exports what a library user needs. What only serving many people needs (API
keys, sign-in links, what a text message means) is exported by :mod:`membot.service`; front
ends import these two and nothing else of membot's (tests/test_public_api.py holds them to it).
Names and modules that moved in the re-layout of 0.2 still import, with a DeprecationWarning
naming their new place (:mod:`membot._moved`).
"""

from membot._moved import install_moved_module_finder, moved_name
from membot.config import (
    DEFAULT_BOT,
    DEFAULT_EMBEDDER,
    DEFAULT_LLM,
    DEFAULT_USER,
    BotSettings,
    config_path,
    data_dir,
    default_db_path,
    parse_numbers,
    parse_settings,
)
from membot.embed import Embedder, resolve_embedder
from membot.errors import (
    AuthError,
    ConfigError,
    ConflictError,
    EmbedderMismatchError,
    ImportFormatError,
    LinkCodeError,
    MembotError,
    NotFoundError,
    ProviderError,
    StoreError,
    StoreFullError,
    TooManyAttemptsError,
    TurnFailedError,
)
from membot.line_checks import MAX_LINE_CHARS, MAX_NAME_CHARS
from membot.llm import (
    LLM,
    TRY_OUT_NOTICE,
    BundledSmolLM2,
    JsonSchema,
    Message,
    OpenAICompatibleLLM,
    ScriptedLLM,
    resolve_llm,
)
from membot.llm.pool import LLMPool
from membot.memory.exports import EXPORT_FORMATS, ChatExport, is_export
from membot.memory.facade import LineInput, Memory, Recall
from membot.memory.importers import FORMATS as IMPORT_FORMATS
from membot.memory.importers import ImportPlan, read_file
from membot.memory.person_links import LinkCode, Linked
from membot.memory.person_view import KeyPoint, PersonMemory, ThreadLines
from membot.memory.profile_files import profile_from_toml, profile_to_toml
from membot.model import (
    Block,
    Citation,
    Correction,
    ExpertiseChunk,
    Line,
    Match,
    Role,
    Summary,
    ThreadInfo,
    ThreadState,
    Turn,
    iso,
    utc_now,
)
from membot.recall.chat import strategy_options
from membot.recall.source import RecallSource
from membot.recall.strategies import Choice, Question, Strategy, register_strategy
from membot.store.backup import BackupReport, backup_store, restore_store, restore_target
from membot.store.base import DocumentInfo
from membot.store.transfer import CopyReport, migrate_store
from membot.turn.bot import Bot
from membot.turn.ending import Ending, end_conversation, end_idle_threads

install_moved_module_finder()


def __getattr__(name: str) -> object:
    return moved_name(name)


__all__ = [
    "DEFAULT_BOT",
    "DEFAULT_EMBEDDER",
    "DEFAULT_LLM",
    "DEFAULT_USER",
    "EXPORT_FORMATS",
    "IMPORT_FORMATS",
    "LLM",
    "MAX_LINE_CHARS",
    "MAX_NAME_CHARS",
    "TRY_OUT_NOTICE",
    "AuthError",
    "BackupReport",
    "Block",
    "Bot",
    "BotSettings",
    "BundledSmolLM2",
    "ChatExport",
    "Choice",
    "Citation",
    "ConfigError",
    "ConflictError",
    "CopyReport",
    "Correction",
    "DocumentInfo",
    "Embedder",
    "EmbedderMismatchError",
    "Ending",
    "ExpertiseChunk",
    "ImportFormatError",
    "ImportPlan",
    "JsonSchema",
    "KeyPoint",
    "LLMPool",
    "Line",
    "LineInput",
    "LinkCode",
    "LinkCodeError",
    "Linked",
    "Match",
    "MembotError",
    "Memory",
    "Message",
    "NotFoundError",
    "OpenAICompatibleLLM",
    "PersonMemory",
    "ProviderError",
    "Question",
    "Recall",
    "RecallSource",
    "Role",
    "ScriptedLLM",
    "StoreError",
    "StoreFullError",
    "Strategy",
    "Summary",
    "ThreadInfo",
    "ThreadLines",
    "ThreadState",
    "TooManyAttemptsError",
    "Turn",
    "TurnFailedError",
    "backup_store",
    "config_path",
    "data_dir",
    "default_db_path",
    "end_conversation",
    "end_idle_threads",
    "is_export",
    "iso",
    "migrate_store",
    "parse_numbers",
    "parse_settings",
    "profile_from_toml",
    "profile_to_toml",
    "read_file",
    "register_strategy",
    "resolve_embedder",
    "resolve_llm",
    "restore_store",
    "restore_target",
    "strategy_options",
    "utc_now",
]
