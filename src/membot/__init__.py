"""membot: a memory for chatbots that does not end.

Every line of dialog is stored with its embedding; at each turn the new line is matched
against everything said before, the matches are expanded into the lines around them, and the
result is packed under a token budget into the prompt of any LLM.

    >>> from membot import Bot, Memory
    >>> memory = Memory("chat.db")                      # doctest: +SKIP
    >>> bot = Bot(memory, llm=resolve_llm("smollm2"))   # doctest: +SKIP
    >>> bot.turn("Where do I work?", user="alice", thread="t2").response  # doctest: +SKIP

Everything a front end (the command line, the server) uses is exported here; front ends
import nothing else of membot's (tests/test_public_api.py holds them to it).
"""

from membot.bot import Bot
from membot.config import (
    DEFAULT_BOT,
    DEFAULT_EMBEDDER,
    DEFAULT_LLM,
    DEFAULT_USER,
    BotSettings,
    config_path,
    data_dir,
    default_db_path,
    parse_settings,
)
from membot.conversations import Ending, end_conversation, end_idle_threads
from membot.embed import Embedder, resolve_embedder
from membot.errors import (
    AuthError,
    ConfigError,
    ConflictError,
    EmbedderMismatchError,
    ImportFormatError,
    MembotError,
    NotFoundError,
    ProviderError,
    StoreError,
    StoreFullError,
    TurnFailedError,
)
from membot.importers import FORMATS as IMPORT_FORMATS
from membot.importers import ImportPlan, read_file
from membot.keys import (
    ApiKey,
    NewKey,
    authenticate,
    create_key,
    create_signin_key,
    list_keys,
    redeem_signin_key,
    revoke_key,
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
from membot.memory import LineInput, Memory, Recall
from membot.model import (
    Block,
    Citation,
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
from membot.profiles import profile_from_toml, profile_to_toml
from membot.sms import (
    IncomingText,
    TextConversations,
    bot_for_sms_number,
    claim_sms,
    consent,
    is_phone_number,
    record_sms_answer,
    sms_sender_name,
    split_sms,
)
from membot.store.backup import BackupReport, backup_store, restore_store, restore_target
from membot.store.base import DocumentInfo, SmsRecord
from membot.store.transfer import CopyReport, migrate_store

__all__ = [
    "DEFAULT_BOT",
    "DEFAULT_EMBEDDER",
    "DEFAULT_LLM",
    "DEFAULT_USER",
    "IMPORT_FORMATS",
    "LLM",
    "MAX_LINE_CHARS",
    "MAX_NAME_CHARS",
    "TRY_OUT_NOTICE",
    "ApiKey",
    "AuthError",
    "BackupReport",
    "Block",
    "Bot",
    "BotSettings",
    "BundledSmolLM2",
    "Citation",
    "ConfigError",
    "ConflictError",
    "CopyReport",
    "DocumentInfo",
    "Embedder",
    "EmbedderMismatchError",
    "Ending",
    "ExpertiseChunk",
    "ImportFormatError",
    "ImportPlan",
    "IncomingText",
    "JsonSchema",
    "LLMPool",
    "Line",
    "LineInput",
    "Match",
    "MembotError",
    "Memory",
    "Message",
    "NewKey",
    "NotFoundError",
    "OpenAICompatibleLLM",
    "ProviderError",
    "Recall",
    "Role",
    "ScriptedLLM",
    "SmsRecord",
    "StoreError",
    "StoreFullError",
    "Summary",
    "TextConversations",
    "ThreadInfo",
    "ThreadState",
    "Turn",
    "TurnFailedError",
    "authenticate",
    "backup_store",
    "bot_for_sms_number",
    "claim_sms",
    "config_path",
    "consent",
    "create_key",
    "create_signin_key",
    "data_dir",
    "default_db_path",
    "end_conversation",
    "end_idle_threads",
    "is_phone_number",
    "iso",
    "list_keys",
    "migrate_store",
    "parse_settings",
    "profile_from_toml",
    "profile_to_toml",
    "read_file",
    "record_sms_answer",
    "redeem_signin_key",
    "resolve_embedder",
    "resolve_llm",
    "restore_store",
    "restore_target",
    "revoke_key",
    "sms_sender_name",
    "split_sms",
    "utc_now",
]
