"""Live previews: the reply shown in the chat while the model is still writing it.

A channel that can show one returns a `Preview` from `Channel.preview` (the default: none).
The gateway (gateway/pipeline/streaming.py) feeds it the text so far at the pace the
platform allows (`interval` seconds between two updates of one chat). A preview is best
effort and never the reply itself: the reply is the outbox message delivered afterwards
(gateway/pipeline/delivery.py). Two kinds:

- an ephemeral draft (Telegram's `sendMessageDraft` in private chats): nothing stays in the
  chat; the reply is sent as a new message, as without streaming;
- a real message that is edited as the text grows (Telegram groups, Discord). Its id is
  `message_id` once sent; the reply then *replaces* it: the first part of the reply is an
  edit of that message (`OutboundMessage.replaces`), the rest new messages. An edit is
  idempotent, so a reply sent again after a crash edits the same message again rather
  than adding a second copy. A reply that ends with nothing to send (only `HEARTBEAT_OK`)
  or none at all (a message given up on) *deletes* its preview (`delete`): a preview always
  ends as the reply or not at all.

While it is a preview, the shown text ends with `CURSOR` (or is a progress line in
italics-free brackets): a preview left behind by a crash can never be mistaken for, or be
identical to, a final reply.
"""

from __future__ import annotations

from typing import Protocol

CURSOR = " \u258d"  # a text cursor: what a preview's text ends with, and a reply's never does
# A preview is cut here (platform limits are larger): the reply, cut into parts, follows.
PREVIEW_MAX_CHARS = 3_500
DEFAULT_INTERVAL = 1.0  # seconds between updates of one chat: within every platform's limits


class PreviewRateLimited(Exception):
    """The platform asked for a pause (Telegram 429 `retry_after`, a Discord 429)."""

    def __init__(self, retry_after: float) -> None:
        super().__init__(f"rate limited for {retry_after:.1f} s")
        self.retry_after = retry_after


class Preview(Protocol):
    """One reply's live preview in one chat."""

    @property
    def interval(self) -> float:
        """Seconds to leave between two updates (the platform's limit for one chat)."""

    @property
    def message_id(self) -> str:
        """The platform message the reply will replace; "" for a draft or before the first
        update created it."""

    async def show(self, text: str, progress: str = "") -> None:
        """Show `text` (the reply so far), or `progress` (what the assistant is doing) when
        there is no text yet. Raises `PreviewRateLimited` or the platform's error."""

    async def delete(self) -> None:
        """Take the preview out of the chat (no reply will replace it); a message already
        gone is no error, a draft has nothing to take back. Raises the platform's error."""


def is_preview_text(text: str) -> bool:
    """Whether a message's text is a live preview rather than a reply: the cursor at its end,
    or a progress line in brackets ("(searching memory...)"). Readers of a chat's history
    (the fakes in tests, the crash harness) tell unfinished previews from replies by it."""
    return text.endswith(CURSOR) or (text.startswith("(") and text.endswith("...)"))


def preview_text(text: str, progress: str, limit: int = PREVIEW_MAX_CHARS) -> str:
    """What an editable preview shows: the text so far with the cursor, else the progress
    line in brackets. Cut to `limit` characters (the reply itself is cut into parts)."""
    if not text.strip():
        return f"({progress})" if progress else CURSOR.strip()
    if len(text) > limit:
        text = text[:limit].rstrip() + " …"
    return text.rstrip() + CURSOR
