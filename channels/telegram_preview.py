"""Live previews on Telegram (channels/preview.py): a draft in private chats, else an edited
message.

- `TelegramDraft`: the Bot API's `sendMessageDraft` (python-telegram-bot 22.6+): an
  ephemeral "being written" bubble in a private chat, animated between updates of the same
  `draft_id`. Nothing stays in the chat; the reply is then sent as an ordinary message (the
  outbox), exactly as without streaming. A Bot API that refuses the method (an older
  self-hosted server) turns the preview into an edited message for the rest of the reply.
- `TelegramEditPreview`: `sendMessage` once, then `editMessageText`; the reply's first part
  is an edit of this message (channels/telegram.py, `OutboundMessage.replaces`). Groups
  allow about 20 messages a minute, so a group's preview is updated every 3 s, a private
  chat's every second (Telegram's per-chat pace).

Previews are sent as plain text: half-written Markdown does not render reliably (an open
`**` would fail the whole HTML update). "message is not modified" is no failure; 429 is
`PreviewRateLimited` with Telegram's `retry_after`.
"""

from __future__ import annotations

import hashlib
import logging
import warnings
from typing import Any

from telegram import Bot
from telegram.error import BadRequest, RetryAfter

from channels.preview import PREVIEW_MAX_CHARS, PreviewRateLimited, preview_text

log = logging.getLogger(__name__)

PRIVATE_INTERVAL = 1.0
GROUP_INTERVAL = 3.0


def retry_after(exc: RetryAfter) -> float:
    with warnings.catch_warnings():  # PTB 22 warns that the type becomes timedelta: both work
        warnings.simplefilter("ignore")
        value: Any = exc.retry_after
    return float(value.total_seconds() if hasattr(value, "total_seconds") else value)


def draft_id_for(key: str) -> int:
    """A non-zero 31-bit id, the same for the same reply on every try (also after a restart:
    the client keeps animating one bubble)."""
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:4], "big") % (2**31 - 1) + 1


def not_modified(exc: BadRequest) -> bool:
    return "not modified" in str(exc).lower()


def edit_target_gone(exc: BadRequest) -> bool:
    text = str(exc).lower()
    return "message to edit not found" in text or "message can't be edited" in text


def already_deleted(exc: BadRequest) -> bool:
    return "message to delete not found" in str(exc).lower()


class TelegramEditPreview:
    """A preview message, sent once and then edited."""

    def __init__(
        self, bot: Bot, chat_id: int | str, *, interval: float, message_id: str = ""
    ) -> None:
        self._bot = bot
        self._chat_id = chat_id
        self.interval = interval
        self.message_id = message_id
        self._shown = ""

    async def show(self, text: str, progress: str = "") -> None:
        shown = preview_text(text, progress)
        if shown == self._shown:
            return
        try:
            if self.message_id:
                await self._edit(shown)
            else:
                sent = await self._bot.send_message(self._chat_id, shown)
                self.message_id = str(sent.message_id)
        except RetryAfter as exc:
            raise PreviewRateLimited(retry_after(exc)) from None
        self._shown = shown

    async def delete(self) -> None:
        if not self.message_id:
            return
        try:
            await self._bot.delete_message(self._chat_id, int(self.message_id))
        except BadRequest as exc:
            if not already_deleted(exc):
                raise
        self.message_id, self._shown = "", ""

    async def _edit(self, shown: str) -> None:
        try:
            await self._bot.edit_message_text(
                shown, chat_id=self._chat_id, message_id=int(self.message_id)
            )
        except BadRequest as exc:
            if not_modified(exc):
                return
            if edit_target_gone(exc):  # deleted by the person: start a new one next time
                self.message_id = ""
            raise


class TelegramDraft:
    """A draft bubble in a private chat; an edited message if the Bot API has no drafts."""

    def __init__(
        self, bot: Bot, chat_id: int | str, key: str, *, interval: float = PRIVATE_INTERVAL
    ) -> None:
        self._bot = bot
        self._chat_id = chat_id
        self._draft_id = draft_id_for(key)
        self.interval = interval
        self._fallback: TelegramEditPreview | None = None
        self._shown = ""

    @property
    def message_id(self) -> str:
        return self._fallback.message_id if self._fallback is not None else ""

    async def show(self, text: str, progress: str = "") -> None:
        if self._fallback is not None:
            await self._fallback.show(text, progress)
            return
        shown = _draft_text(text, progress)
        if shown == self._shown:
            return
        try:
            await self._bot.send_message_draft(int(self._chat_id), self._draft_id, shown)
        except RetryAfter as exc:
            raise PreviewRateLimited(retry_after(exc)) from None
        except BadRequest as exc:
            if not_modified(exc):
                return
            log.info("telegram: drafts refused (%s); the preview is an edited message", exc)
            self._fallback = TelegramEditPreview(self._bot, self._chat_id, interval=self.interval)
            await self._fallback.show(text, progress)
            return
        self._shown = shown

    async def delete(self) -> None:
        """A draft bubble is ephemeral (nothing stays in the chat); the edited message it
        may have fallen back to is deleted."""
        if self._fallback is not None:
            await self._fallback.delete()


def _draft_text(text: str, progress: str) -> str:
    """A draft is visibly a draft: no cursor needed. Empty text shows Telegram's own
    "thinking" placeholder; a progress line stands in brackets."""
    if not text.strip():
        return f"({progress})" if progress else ""
    if len(text) > PREVIEW_MAX_CHARS:
        return text[:PREVIEW_MAX_CHARS].rstrip() + " …"
    return text
