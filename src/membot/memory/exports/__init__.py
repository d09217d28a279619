"""Chat exports people have (ChatGPT's and Claude's ``conversations.json``, or the
``.zip`` as downloaded) read as a stream of lines for :meth:`Memory.add_many`."""

from membot.memory.exports.conversation import Tally
from membot.memory.exports.reader import EXPORT_FORMATS, ChatExport, format_of, is_export

__all__ = ["EXPORT_FORMATS", "ChatExport", "Tally", "format_of", "is_export"]
