"""What serving many people needs beyond the library: API keys and sign-in links, and what a
text message means. ``membot serve`` and the command line use it; a library user needs none of
it (:mod:`membot` is the library's API)."""

from membot.service.keys import (
    ApiKey,
    NewKey,
    authenticate,
    create_key,
    create_signin_key,
    list_keys,
    redeem_signin_key,
    revoke_key,
)
from membot.service.text_links import kept_replies
from membot.service.text_messages import (
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
from membot.store.base import SmsRecord

__all__ = [
    "ApiKey",
    "IncomingText",
    "NewKey",
    "SmsRecord",
    "TextConversations",
    "authenticate",
    "bot_for_sms_number",
    "claim_sms",
    "consent",
    "create_key",
    "create_signin_key",
    "is_phone_number",
    "kept_replies",
    "list_keys",
    "record_sms_answer",
    "redeem_signin_key",
    "revoke_key",
    "sms_sender_name",
    "split_sms",
]
