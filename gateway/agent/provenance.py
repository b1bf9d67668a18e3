"""Outside text in a context window: whether anything the model now reads came from neither
the owner's own messages nor the owner's own files.

Why it matters: a web page read in the owner's DM once told the model to copy MEMORY.md into a
group's NOTES.md, and it did. The access rule (memory/layout.py) lets a private context write
what a group reads only while no outside text is in its context window. Taint is tracked
structurally, from records, never guessed from the text:

- each message that carries outside text says so (`Message.untrusted`, kept in the transcript
  entry): a result of a tool that declares its output outside (`ToolSpec.untrusted_output`:
  web_fetch, web_search, every MCP tool), a result that read a file a group wrote or a received
  file (`OutsideText`), a person's message with a document or an image in it;
- a compaction summary made from tainted records is tainted too (its marker carries the
  source), so summarising the page away does not clean the context; a compaction that drops
  them without a summary does, and so does `/new` (a fresh session has no records);
- the context's taint is the newest such record still in the window (`outside_text`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from gateway.agent.conversation import Message

__all__ = ["outside_text", "received_source", "result_source", "summarised_source"]

# What a person's message carries that its sender did not write: documents (their text) and
# images (text in a picture reads as instructions to a model that sees it). A voice note is
# the person's own words.
_OUTSIDE_MEDIA = {"document": "a document the person sent", "image": "an image the person sent"}


def outside_text(history: Sequence[Message]) -> str:
    """What outside text the window holds (the newest record's source), "" when none."""
    for message in reversed(history):
        if message.untrusted:
            return message.untrusted
    return ""


def summarised_source(messages: Iterable[Message]) -> str:
    """The taint a summary of `messages` inherits: the newest outside source among them."""
    return outside_text(list(messages))


def received_source(media: Sequence[dict[str, Any]]) -> str:
    """The outside source among a message's received files (the media step's records), ""
    when it carried none that was read or shown (a failed download adds no text)."""
    for record in media:
        source = _OUTSIDE_MEDIA.get(str(record.get("kind", "")))
        if source and record.get("usable"):
            return source
    return ""


def result_source(tool_name: str) -> str:
    """How a result of a tool that declares outside output is named in a refusal."""
    return f"a {tool_name} result"
