"""Telegram over the Bot API with python-telegram-bot 22, by long polling.

The polling loop is ours rather than PTB's `Updater`, for one reason: the Updater moves the
offset (which acknowledges updates to Telegram) as soon as it fetched them, and we must only
acknowledge an update after the gateway recorded it durably. Here each update goes to the
handler (which records it, then queues it) before the offset moves past it; the offset is
kept in the state database as well, and the gateway ignores any update it already recorded.

Failure handling in the loop: 409 Conflict (another process polls with this token) is logged
in one clear line and retried with backoff; 429 waits `retry_after`; network errors back off
(1 s doubling to 30 s); a poll that hangs past its long-poll timeout plus a grace period is
abandoned and restarted; a rejected token stops the channel with an error line.

At start, a token Telegram rejects is a `ChannelError` (the gateway cannot run with it). A
Bot API that cannot be reached is not: no network at boot is the machine's state, not the
person's mistake, and failing would make a restart policy a crash loop. `start` then returns
at once, says so in one log line, and the poller keeps connecting with the same backoff
(readiness says "connecting" until it is through; replies wait in the outbox meanwhile).

Replies can be streamed (`streaming`): a draft that grows in private chats, an edited preview
message in groups, at Telegram's pace (channels/telegram_preview.py). A reply that had a
preview message is written into it: its first part is an `editMessageText` of the preview
(idempotent: a reply sent again after a crash edits the same message again).

Only `message` updates are requested: edits are ignored (an edit after the answer would need
a second answer, which surprises more than it helps). Captions count as text. Voice notes,
audio, video notes, photos and documents arrive as `attachments` (file ids), fetched later
with `download` (getFile, then the file URL streamed to disk: the Bot API serves at most
20 MB); stickers, locations and the like only as a label the gateway answers politely.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import warnings
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import httpx
from telegram import Bot, CallbackQuery, InlineKeyboardButton, InlineKeyboardMarkup, Message, Update
from telegram.constants import ChatAction
from telegram.error import (
    BadRequest,
    Conflict,
    Forbidden,
    InvalidToken,
    NetworkError,
    RetryAfter,
    TelegramError,
)
from telegram.request import HTTPXRequest

from channels.base import (
    Attachment,
    AttachmentKind,
    ChannelBase,
    ChannelError,
    ChatType,
    Choice,
    DeliveryRefused,
    DownloadError,
    InboundMessage,
    MessageHandler,
    OffsetStore,
    OutboundMessage,
    cancel_until_done,
    send_parts,
)
from channels.chunking import TELEGRAM_LIMIT, split_chunks, utf16_len
from channels.files import check_declared, file_chunks, save_stream
from channels.preview import Preview
from channels.telegram_html import markdown_to_html
from channels.telegram_preview import (
    GROUP_INTERVAL,
    PRIVATE_INTERVAL,
    TelegramDraft,
    TelegramEditPreview,
    edit_target_gone,
    not_modified,
    retry_after,
)
from channels.voice import VoiceClip, is_voice, read_clip
from retrypolicy import Backoff

log = logging.getLogger(__name__)

CHANNEL_NAME = "telegram"
DEFAULT_BASE_URL = "https://api.telegram.org/bot"
TYPING_REFRESH_SECONDS = 4.0  # Telegram shows "typing" for about 5 s per action
MAX_SEND_ATTEMPTS = 4
# Bot API limits: getFile serves files up to 20 MB; bots upload up to 50 MB (photos 10 MB);
# captions up to 1024 characters.
DOWNLOAD_LIMIT = 20 * 1024 * 1024
UPLOAD_LIMIT = 50 * 1000 * 1000
PHOTO_UPLOAD_LIMIT = 10 * 1000 * 1000
CAPTION_LIMIT = 1024
_PHOTO_SUFFIXES = (".jpg", ".jpeg", ".png", ".webp")

_MEDIA_KINDS = (
    ("photo", "photo"),
    ("voice", "voice message"),
    ("video_note", "video message"),
    ("sticker", "sticker"),
    ("animation", "GIF"),
    ("video", "video"),
    ("audio", "audio file"),
    ("document", "document"),
    ("location", "location"),
    ("contact", "contact"),
    ("poll", "poll"),
)


class _NoRawUpdateDumps(logging.Filter):
    """python-telegram-bot logs a whole unparsable batch, message bodies included, at
    CRITICAL; we report the skipped update ids ourselves instead."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("Error while parsing updates")


logging.getLogger("telegram.Bot").addFilter(_NoRawUpdateDumps())

retry_seconds = retry_after


class TelegramChannel(ChannelBase):
    def __init__(
        self,
        token: str,
        *,
        base_url: str = "",
        offsets: OffsetStore | None = None,
        poll_timeout: int = 25,
        groups_enabled: bool = False,
        backoff: Backoff | None = None,
        stall_grace: float = 15.0,
        name: str = CHANNEL_NAME,
        streaming: bool = False,
        drafts: bool = True,
    ) -> None:
        self.name = name
        self.streaming = streaming  # live previews of replies (see the module doc)
        self.drafts = drafts  # in private chats: sendMessageDraft, else an edited message
        self._token = token
        url = (base_url or DEFAULT_BASE_URL).rstrip("/")
        self._base_url = url if url.endswith("/bot") else url + "/bot"  # PTB appends the token
        # Files are served beside the API: <server>/file/bot<token>/<file_path>.
        self._file_url = self._base_url.removesuffix("/bot") + "/file/bot"
        self._offsets = offsets
        self.poll_timeout = poll_timeout
        self.groups_enabled = groups_enabled
        self._backoff = backoff or Backoff()
        self._stall_grace = stall_grace
        self._bot: Bot | None = None
        self._poller: asyncio.Task[None] | None = None
        self._offset: int | None = None
        self.stalls = 0  # polls abandoned as stalled (for tests and operators)
        self.set_ready(False, "not polling yet")  # for /readyz: the last poll succeeded
        self.conflicts = 0
        self.skipped = 0  # updates that could not be read, skipped (logged by id)
        self._downloads: httpx.AsyncClient | None = None  # one client for file downloads
        self._tls: Any = None  # the TLS context of the Bot API clients, reused for downloads

    @property
    def bot(self) -> Bot:
        if self._bot is None:
            raise RuntimeError("telegram channel not started")
        return self._bot

    async def start(self, handler: MessageHandler) -> None:
        read = float(self.poll_timeout) + 10.0
        # One TLS context for both connection pools (and file downloads): loading the CA
        # bundle is most of the CPU time a start spends here, and it was done once per client.
        self._tls = httpx.create_ssl_context()
        tls = {"verify": self._tls}
        self._bot = Bot(
            self._token,
            base_url=self._base_url,
            base_file_url=self._file_url,
            request=HTTPXRequest(connection_pool_size=64, read_timeout=15.0, httpx_kwargs=tls),
            get_updates_request=HTTPXRequest(
                connection_pool_size=2, read_timeout=read, httpx_kwargs=tls
            ),
        )
        connected = False
        try:
            await self._connect()
            connected = True
        except InvalidToken as exc:
            raise ChannelError(
                "Telegram rejected the bot token: check CLAWGATE_TELEGRAM__TOKEN (from @BotFather)"
            ) from exc
        except TelegramError as exc:  # no network, DNS, a 5xx: keep trying in the background
            self._down(f"connecting: cannot reach the Telegram Bot API ({type(exc).__name__})")
            log.warning(
                "telegram: cannot reach the Telegram Bot API (%s); the gateway runs "
                "and keeps trying with backoff",
                exc,
            )
        if self._offsets is not None:
            self._offset = await self._offsets.load_offset(self.name)
        if connected:
            log.info("telegram: polling as @%s", self._bot.username)
        self._poller = asyncio.create_task(self._poll(handler, connected), name="telegram-poll")

    async def _connect(self) -> None:
        await self.bot.initialize()  # getMe: checks the token, learns our username
        await self.bot.delete_webhook()  # polling and a webhook exclude each other

    async def _keep_connecting(self) -> bool:
        """Connect with backoff until it works (True) or the token is rejected (False)."""
        while True:
            await asyncio.sleep(self._backoff.next())
            try:
                await self._connect()
            except InvalidToken:
                self._down("the bot token was rejected")
                log.error(
                    "telegram: the bot token was rejected; polling stopped. "
                    "Fix CLAWGATE_TELEGRAM__TOKEN and restart."
                )
                return False
            except TelegramError as exc:
                self._down(f"connecting: cannot reach the Telegram Bot API ({type(exc).__name__})")
                continue
            self._backoff.reset()
            log.info("telegram: connected; polling as @%s", self.bot.username)
            return True

    async def stop(self) -> None:
        if self._poller is not None:
            await cancel_until_done(self._poller)
            self._poller = None
        if self._bot is not None:
            with contextlib.suppress(Exception):
                await self._bot.shutdown()
        if self._downloads is not None:
            await self._downloads.aclose()
            self._downloads = None

    # -- receiving ---------------------------------------------------------------------------

    async def _poll(self, handler: MessageHandler, connected: bool = True) -> None:
        if not connected and not await self._keep_connecting():
            return
        conflict_reported = False
        while True:
            try:
                # asyncio.timeout, not wait_for: on Python 3.11 wait_for returns (or raises)
                # the poll's own outcome when a stop's cancel lands just as the poll ends,
                # and this loop would then poll on forever with the stop waiting for it.
                async with asyncio.timeout(self.poll_timeout + self._stall_grace):
                    updates = await self.bot.get_updates(
                        offset=self._offset,
                        timeout=self.poll_timeout,
                        allowed_updates=ALLOWED_UPDATES,
                    )
            except TimeoutError:
                self._down("a poll hung")
                self.stalls += 1
                log.warning(
                    "telegram: a poll hung for %.0f s; restarting it",
                    self.poll_timeout + self._stall_grace,
                )
                continue
            except Conflict:
                self._down("another process is polling with this token (409)")
                self.conflicts += 1
                if not conflict_reported:
                    log.error(
                        "telegram: another process is polling with this bot token "
                        "(HTTP 409 Conflict); stop it. Retrying with backoff."
                    )
                    conflict_reported = True
                await asyncio.sleep(self._backoff.next())
                continue
            except RetryAfter as exc:
                log.warning("telegram: rate limited, waiting %.0f s", retry_seconds(exc))
                await asyncio.sleep(retry_seconds(exc))
                continue
            except InvalidToken:
                log.error(
                    "telegram: the bot token was rejected; polling stopped. "
                    "Fix CLAWGATE_TELEGRAM__TOKEN and restart."
                )
                return
            except TelegramError as exc:  # NetworkError, TimedOut, BadRequest, ...
                self._down(f"polling failed: {type(exc).__name__}")
                delay = self._backoff.next()
                log.warning("telegram: polling failed (%s); retrying in %.0f s", exc, delay)
                await asyncio.sleep(delay)
                continue
            except (KeyError, TypeError, ValueError, AttributeError):
                # One malformed update makes python-telegram-bot reject the whole batch, and
                # the same batch would come back forever: take it apart one update at a time.
                updates = await self._salvage_batch()
            self.set_ready(True, "polling")
            if conflict_reported:
                log.info("telegram: polling again, the conflict is over")
                conflict_reported = False
            self._backoff.reset()
            if updates:
                await self._dispatch(updates, handler)

    def _down(self, why: str) -> None:
        """Readiness for /readyz: down until the next poll succeeds."""
        self.set_ready(False, why)

    async def _salvage_batch(self) -> tuple[Update, ...]:
        """Fetch the pending batch raw and parse each update alone, skipping broken ones."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # PTB would rather we called get_updates
            raw = await self.bot.do_api_request(
                "getUpdates",
                api_kwargs={
                    "offset": self._offset,
                    "timeout": 0,
                    "allowed_updates": ALLOWED_UPDATES,
                },
            )
        good: list[Update] = []
        for item in raw if isinstance(raw, list) else []:
            update_id = item.get("update_id") if isinstance(item, dict) else None
            error: Exception = ValueError("not an update")
            try:
                update = Update.de_json(item, self.bot)
            except Exception as exc:
                update, error = None, exc
            if update is not None:
                good.append(update)
            elif isinstance(update_id, int):
                await self._skip(update_id, error)
                self._offset = max(self._offset or 0, update_id + 1)
        return tuple(good)

    async def _dispatch(self, updates: tuple[Update, ...], handler: MessageHandler) -> None:
        """Hand each update over in order; the offset moves past an update once it is recorded.

        Each update is converted alone: one that cannot be read (a mention entity splitting a
        surrogate pair, say) is recorded as failed, logged by id and skipped, so it never makes
        the batch come back forever. A failure to *record* is different: nothing moves, the
        same updates come back after a backoff.
        """
        try:
            for update in updates:
                try:
                    msg = self.to_inbound(update)
                except Exception as exc:
                    await self._skip(update.update_id, exc)
                    msg = None
                if msg is not None:
                    await handler(msg)  # returns once recorded durably: now we may ack
                self._offset = update.update_id + 1
        except Exception:
            delay = self._backoff.next()
            log.exception("telegram: could not record an update; retrying in %.0f s", delay)
            await asyncio.sleep(delay)
        finally:
            if self._offsets is not None and self._offset is not None:
                await self._offsets.save_offset(self.name, self._offset)

    async def _skip(self, update_id: int, exc: Exception) -> None:
        self.skipped += 1
        log.warning(
            "telegram: skipped update %d that could not be read (%s)", update_id, type(exc).__name__
        )
        if self._offsets is not None:
            await self._offsets.record_failed(self.name, f"update-{update_id}", type(exc).__name__)

    def to_inbound(self, update: Update) -> InboundMessage | None:
        if update.callback_query is not None:
            return self._press(update.callback_query)
        message = update.message
        if message is None or message.from_user is None or message.from_user.is_bot:
            return None
        chat = message.chat
        chat_type: ChatType
        if chat.type == "private":
            chat_type = "direct"
        elif chat.type in ("group", "supergroup") and self.groups_enabled:
            chat_type = "group"
        else:
            return None
        text = message.text or message.caption or ""
        attachment = next((label for attr, label in _MEDIA_KINDS if getattr(message, attr)), "")
        attachments = _attachments(message)
        if not text and not attachment:
            return None  # service messages: someone joined, a title changed, ...
        addressed = False
        if chat_type == "group":
            addressed, text = self._addressed(message, text)
            if not addressed:
                return None
        user = message.from_user
        return InboundMessage(
            channel=self.name,
            chat_id=str(chat.id),
            sender_id=str(user.id),
            text=text,
            chat_type=chat_type,
            message_id=str(message.message_id),
            sender_name=user.full_name,
            received_at=message.date,
            addressed=addressed,
            attachment=attachment,
            attachments=attachments,
        )

    def _press(self, query: CallbackQuery) -> InboundMessage | None:
        """A press on one of our inline keyboards (a callback query): its data and who
        pressed, in the chat of the message it was under (the presser's DM for ours)."""
        if query.from_user is None or query.from_user.is_bot or not query.data:
            return None
        message = query.message
        chat_id = str(message.chat.id) if message is not None else str(query.from_user.id)
        return InboundMessage(
            channel=self.name,
            chat_id=chat_id,
            sender_id=str(query.from_user.id),
            text="",
            sender_name=query.from_user.full_name,
            press=query.data,
            press_id=str(query.id),
            press_message=str(message.message_id) if message is not None else "",
        )

    # -- buttons ------------------------------------------------------------------------------

    buttons = True

    async def send_choices(self, chat_id: str, text: str, choices: Sequence[Choice]) -> str:
        """`text` with an inline keyboard, one row; the message id (for the edit later)."""
        markup = InlineKeyboardMarkup(
            [[InlineKeyboardButton(c.label, callback_data=c.data) for c in choices]]
        )
        sent = await self._call(
            self.bot.send_message, _chat(chat_id), text[:TELEGRAM_LIMIT], reply_markup=markup
        )
        return str(sent.message_id)

    async def answer_press(self, press: InboundMessage, answer: str, shown: str) -> None:
        """answerCallbackQuery (the presser sees `answer` as a toast; Telegram keeps a
        button spinning until it is answered), then the question edited to `shown`, its
        keyboard gone."""
        try:
            await self._call(self.bot.answer_callback_query, press.press_id, text=answer[:200])
        except TelegramError as exc:
            log.info("telegram: could not answer a button press (%s)", exc)
        if shown and press.press_message:
            await self.settle_choices(press.chat_id, press.press_message, shown)

    async def settle_choices(self, chat_id: str, message_id: str, shown: str) -> None:
        try:
            await self._call(
                self.bot.edit_message_text,
                shown[:TELEGRAM_LIMIT],
                chat_id=_chat(chat_id),
                message_id=int(message_id),
                reply_markup=None,
            )
        except (TelegramError, ValueError) as exc:
            log.info("telegram: could not edit an answered question (%s)", exc)

    def _addressed(self, message: Message, text: str) -> tuple[bool, str]:
        """Was the bot mentioned or replied to? Returns the text without the mention."""
        me = self.bot.bot
        handle = f"@{me.username}".lower() if me.username else None
        replied = message.reply_to_message
        addressed = bool(replied and replied.from_user and replied.from_user.id == me.id)
        for entity in message.entities or message.caption_entities or ():
            if entity.type == "text_mention" and entity.user and entity.user.id == me.id:
                addressed = True
            if entity.type in ("mention", "bot_command") and handle:
                fragment = (
                    message.parse_entity(entity)
                    if message.text
                    else message.parse_caption_entity(entity)
                )
                if fragment.lower().endswith(handle):
                    addressed = True
        if handle:  # "/help@bot" becomes "/help", "@bot hi" becomes "hi"
            text = re.sub(re.escape(handle) + r"\b", "", text, flags=re.IGNORECASE).strip()
        return addressed, text

    # -- files -------------------------------------------------------------------------------

    max_upload_bytes = UPLOAD_LIMIT
    voice_notes = True

    async def download(self, attachment: Attachment, dest: Path, max_bytes: int) -> int:
        """getFile, then stream the file to `dest`. The file URL carries the bot token, so
        no error raised from here names it."""
        limit = min(max_bytes, DOWNLOAD_LIMIT)
        check_declared(attachment.size, limit)
        try:
            file = await self._call(self.bot.get_file, attachment.ref)
        except BadRequest as exc:  # "file is too big", "wrong file_id"
            if "too big" in str(exc).lower():
                raise DownloadError(
                    "the file is larger than the 20 MB Telegram lets bots fetch"
                ) from None
            raise DownloadError("Telegram no longer has this file") from None
        except TelegramError as exc:
            raise DownloadError(
                f"Telegram did not hand out the file ({type(exc).__name__})"
            ) from None
        check_declared(file.file_size or 0, limit)
        location = file.file_path or ""
        if location and not location.startswith(("http://", "https://")):
            local = Path(location)  # a self-hosted Bot API server in local mode
            if not local.is_file():
                raise DownloadError("the Bot API server named a file that is not there")
            return await save_stream(file_chunks(local), dest, limit)
        if self._downloads is None:  # kept: a client per file costs more than a small file
            self._downloads = httpx.AsyncClient(
                timeout=httpx.Timeout(30.0, read=60.0), verify=self._tls or True
            )
        return await _fetch(self._downloads, location, dest, limit)

    # -- sending -----------------------------------------------------------------------------

    def preview(
        self, chat_id: str, *, direct: bool, key: str, message_id: str = ""
    ) -> Preview | None:
        if not self.streaming or self._bot is None:
            return None
        chat = _chat(chat_id)
        if direct and self.drafts and not message_id:
            return TelegramDraft(self.bot, chat, key, interval=PRIVATE_INTERVAL)
        return TelegramEditPreview(
            self.bot,
            chat,
            message_id=message_id,
            interval=PRIVATE_INTERVAL if direct else GROUP_INTERVAL,
        )

    async def send(self, message: OutboundMessage) -> None:
        """Each part of a long reply is one sendMessage; parts an earlier try got accepted
        are skipped (`send_parts`), so a retry never repeats them. (The Bot API has no
        idempotency key: a part accepted just before a crash is sent again.) The first part
        of a reply that `replaces` a preview is an edit of it (idempotent).

        A file is the first part (with the text as its caption), or, when the text is
        longer than a caption may be, the file followed by the text's own parts."""
        chat_id = _chat(message.chat_id)
        if message.file and is_voice(message.file):
            await self._send_voice_reply(chat_id, message)
            return
        if not message.file:

            async def send_text(index: int, part: tuple[str, str]) -> None:
                if (
                    index == 0
                    and message.replaces
                    and part[1].strip()
                    and await self._write_into(chat_id, message.replaces, *part)
                ):
                    return
                await self._send_text(chat_id, part)

            await send_parts(message, render(message.text), send_text)
            return
        caption = message.text if len(message.text) <= CAPTION_LIMIT else ""
        parts: list[tuple[str, str] | None] = [None]
        if message.text and not caption:
            parts += render(message.text)

        async def send_part(_index: int, part: tuple[str, str] | None) -> None:
            if part is None:
                await self._send_file(chat_id, Path(message.file), caption)
            else:
                await self._send_text(chat_id, part)

        await send_parts(message, parts, send_part)

    async def _send_voice_reply(self, chat_id: int | str, message: OutboundMessage) -> None:
        """A voice note (sendVoice, Ogg Opus) with the reply's text as its caption where the
        text fits in one (1024 characters), else followed by the text's own parts."""
        path = Path(message.file)
        rendered = render(message.text) if message.text.strip() else []
        caption = (
            rendered[0]
            if len(rendered) == 1 and utf16_len(rendered[0][1]) <= CAPTION_LIMIT
            else None
        )
        parts: list[tuple[str, str] | None] = [None]
        if caption is None:
            parts += rendered

        async def send_part(_index: int, part: tuple[str, str] | None) -> None:
            if part is not None:
                await self._send_text(chat_id, part)
            elif (
                not await self._send_voice(chat_id, path, read_clip(path), caption)
                and caption is not None
            ):
                await self._send_text(chat_id, caption)  # the person takes no voice notes

        await send_parts(message, parts, send_part)

    async def _send_voice(
        self,
        chat_id: int | str,
        path: Path,
        clip: VoiceClip | None,
        caption: tuple[str, str] | None,
    ) -> bool:
        """One sendVoice; the caption as HTML, or as plain text when Telegram rejects it.
        False when the person does not take voice notes (a privacy setting of theirs)."""
        if not path.is_file():
            raise DeliveryRefused(f"the voice note to send is gone: {path.name}")
        duration = clip.whole_seconds if clip is not None else None
        html, plain = caption if caption is not None else ("", "")
        try:
            try:  # a Path, not an open file: a retried send reads the file again
                await self._call(
                    self.bot.send_voice,
                    chat_id,
                    path,
                    duration=duration,
                    caption=html or None,
                    parse_mode="HTML" if html else None,
                    filename=path.name,
                )
            except BadRequest as exc:
                if not html or "entit" not in str(exc).lower():  # "can't parse entities"
                    raise
                log.info("telegram: caption HTML rejected (%s); sending it as plain text", exc)
                await self._call(
                    self.bot.send_voice,
                    chat_id,
                    path,
                    duration=duration,
                    caption=plain or None,
                    filename=path.name,
                )
        except BadRequest as exc:
            if "voice_messages_forbidden" in str(exc).lower():
                log.info("telegram: chat %s takes no voice notes; sending the text alone", chat_id)
                return False
            raise DeliveryRefused(f"telegram refused the voice note: {exc}") from exc
        except (Forbidden, InvalidToken) as exc:
            raise DeliveryRefused(f"telegram refused the voice note: {exc}") from exc
        return True

    async def _send_text(self, chat_id: int | str, part: tuple[str, str]) -> None:
        """One part as HTML, or as plain text when Telegram rejects the HTML."""
        html, plain = part
        if not plain.strip():
            return
        try:
            try:
                await self._call(self.bot.send_message, chat_id, html, parse_mode="HTML")
            except BadRequest as exc:
                log.info("telegram: HTML rejected (%s); sending as plain text", exc)
                await self._call(self.bot.send_message, chat_id, plain)
        except (BadRequest, Forbidden, InvalidToken) as exc:
            raise DeliveryRefused(f"telegram refused the message: {exc}") from exc

    async def _send_file(self, chat_id: int | str, path: Path, caption: str) -> None:
        """A photo as a photo (Telegram shows it inline), anything else as a document."""
        try:
            size = path.stat().st_size
        except OSError as exc:
            raise DeliveryRefused(f"the file to send is gone: {path.name}") from exc
        as_photo = path.suffix.lower() in _PHOTO_SUFFIXES and size <= PHOTO_UPLOAD_LIMIT
        method = self.bot.send_photo if as_photo else self.bot.send_document
        try:  # a Path, not an open file: a retried send reads the file again
            await self._call(method, chat_id, path, caption=caption or None, filename=path.name)
        except (BadRequest, Forbidden, InvalidToken) as exc:
            raise DeliveryRefused(f"telegram refused the file: {exc}") from exc

    async def _write_into(self, chat_id: int | str, preview: str, html: str, plain: str) -> bool:
        """Edit the preview message into the reply's first part. False when it cannot be
        (gone, not ours to edit): the part is then sent as a new message. "Not modified"
        means an earlier try did it already."""
        try:
            message_id = int(preview)
        except ValueError:
            return False
        try:
            try:
                await self._call(
                    self.bot.edit_message_text,
                    html,
                    chat_id=chat_id,
                    message_id=message_id,
                    parse_mode="HTML",
                )
            except BadRequest as exc:
                if not_modified(exc) or edit_target_gone(exc):
                    raise
                log.info("telegram: HTML rejected in an edit (%s); editing as plain text", exc)
                await self._call(
                    self.bot.edit_message_text, plain, chat_id=chat_id, message_id=message_id
                )
        except BadRequest as exc:
            if not_modified(exc):
                return True
            log.info(
                "telegram: could not write the reply into its preview (%s); sending "
                "it as a new message",
                exc,
            )
            return False
        except (Forbidden, InvalidToken) as exc:
            raise DeliveryRefused(f"telegram refused the message: {exc}") from exc
        return True

    async def _call(self, method: Any, *args: Any, **kwargs: Any) -> Any:
        """One Bot API call with 429 and network-error retries (BadRequest is the caller's)."""
        backoff = Backoff(0.5, 8.0)
        for attempt in range(1, MAX_SEND_ATTEMPTS + 1):
            try:
                return await method(*args, **kwargs)
            except RetryAfter as exc:
                if attempt == MAX_SEND_ATTEMPTS:
                    raise
                log.warning("telegram: rate limited on send, waiting %.0f s", retry_seconds(exc))
                await asyncio.sleep(retry_seconds(exc))
            except (BadRequest, Forbidden, InvalidToken):
                raise
            except NetworkError:
                if attempt == MAX_SEND_ATTEMPTS:
                    raise
                await asyncio.sleep(backoff.next())
        raise AssertionError("unreachable")

    @contextlib.asynccontextmanager
    async def typing(self, chat_id: str) -> AsyncIterator[None]:
        task = asyncio.create_task(self._keep_typing(_chat(chat_id)), name="telegram-typing")
        try:
            yield
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def _keep_typing(self, chat_id: int | str) -> None:
        while True:
            try:
                await self.bot.send_chat_action(chat_id, ChatAction.TYPING)
            except TelegramError as exc:
                log.debug("telegram: typing indicator failed: %s", exc)
            await asyncio.sleep(TYPING_REFRESH_SECONDS)


def _attachments(message: Message) -> tuple[Attachment, ...]:
    """The files of a message that the gateway can fetch: voice notes, audio and video notes
    (heard), photos and image documents (seen), other documents (read), videos (declined)."""
    found: list[Attachment] = []
    if message.voice:
        voice = message.voice
        found.append(
            Attachment(
                "audio",
                voice.file_id,
                "voice.ogg",
                voice.mime_type or "audio/ogg",
                voice.file_size or 0,
                _seconds(voice),
                label="voice message",
            )
        )
    if message.audio:
        audio = message.audio
        found.append(
            Attachment(
                "audio",
                audio.file_id,
                audio.file_name or "audio",
                audio.mime_type or "",
                audio.file_size or 0,
                _seconds(audio),
                label="audio file",
            )
        )
    if message.video_note:
        note = message.video_note
        found.append(
            Attachment(
                "audio",
                note.file_id,
                "video-note.mp4",
                "video/mp4",
                note.file_size or 0,
                _seconds(note),
                label="video message",
            )
        )
    if message.photo:
        best = max(message.photo, key=lambda size: size.width * size.height)
        found.append(
            Attachment(
                "image",
                best.file_id,
                "photo.jpg",
                "image/jpeg",
                best.file_size or 0,
                width=best.width,
                height=best.height,
                label="photo",
            )
        )
    if message.document:
        doc = message.document
        mime = doc.mime_type or ""
        kind: AttachmentKind = "image" if mime.startswith("image/") else "document"
        found.append(
            Attachment(
                kind,
                doc.file_id,
                doc.file_name or "document",
                mime,
                doc.file_size or 0,
                label="image" if kind == "image" else "document",
            )
        )
    if message.video or message.animation:
        video = message.video or message.animation
        assert video is not None
        found.append(
            Attachment(
                "video",
                video.file_id,
                video.file_name or "video.mp4",
                video.mime_type or "video/mp4",
                video.file_size or 0,
                _seconds(video),
                label="video" if message.video else "GIF",
            )
        )
    return tuple(found)


def _seconds(media: Any) -> float:
    with warnings.catch_warnings():  # PTB 22 warns that durations become timedelta: both work
        warnings.simplefilter("ignore")
        value: Any = getattr(media, "duration", 0) or 0
    return float(value.total_seconds() if hasattr(value, "total_seconds") else value)


async def _fetch(client: httpx.AsyncClient, url: str, dest: Path, limit: int) -> int:
    """Stream `url` to `dest`. Errors say what happened, never the URL (it holds the token)."""
    try:
        async with client.stream("GET", url) as response:
            if response.status_code != 200:
                raise DownloadError(f"the file server answered {response.status_code}")
            return await save_stream(response.aiter_bytes(), dest, limit)
    except httpx.HTTPError as exc:
        raise DownloadError(f"the download failed ({type(exc).__name__})") from None


def render(text: str) -> list[tuple[str, str]]:
    """(HTML, plain Markdown) pairs, each within Telegram's 4096 UTF-16 units.

    Chunks are cut on the Markdown; when escaping makes an HTML chunk too long, the whole
    reply is cut again with a smaller limit. The plain version always fits.
    """
    limit = TELEGRAM_LIMIT
    while True:
        chunks = [c.text for c in split_chunks(text, limit, "utf16")]
        pairs = [(markdown_to_html(chunk), chunk) for chunk in chunks]
        if all(utf16_len(h) <= TELEGRAM_LIMIT for h, _ in pairs) or limit <= 512:
            return pairs
        limit = int(limit * 0.75)


ALLOWED_UPDATES = ["message", "callback_query"]


def _chat(chat_id: str) -> int | str:
    try:
        return int(chat_id)
    except ValueError:
        return chat_id
