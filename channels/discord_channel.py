"""Discord direct messages (and, when enabled, server channels on mention) with discord.py 2.

discord.py owns the connection: gateway heartbeats, resume and reconnect with backoff, and
REST rate limits (429 and its buckets) are handled inside the library. This adapter turns
`on_message` into an InboundMessage and replies in chunks of at most 2000 characters; Discord
renders Markdown itself, so replies are sent as written.

Replies can be streamed (`streaming`): a preview message edited about once a second as the
text grows (channels/discord_preview.py); the reply's first part is then an edit of it
(idempotent: sent again after a crash, it edits the same message again).

Its own messages and other bots are ignored. Edits are ignored (no `on_message_edit`).
The message-content intent must be enabled for the bot in the developer portal.

At start, a token Discord rejects is a `ChannelError`. Discord being unreachable is not (no
network at boot is no configuration mistake, and failing would make a restart policy a crash
loop): `start` says so in one log line and returns, and a background task logs in with
backoff (1 s doubling to 30 s), then connects; readiness says "not connected" meanwhile. A
gateway connection that is not ready within `ready_timeout` is left to discord.py's own
reconnecting, with one log line, rather than failing the start.

Attachments (voice messages, audio, images, documents) arrive as `attachments` carrying
their CDN URL; `download` streams one to disk later, and `send` uploads a file with the text
as its message.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import aiohttp
import discord

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
    OutboundMessage,
    send_parts,
)
from channels.chunking import DISCORD_LIMIT, split_text
from channels.discord_preview import DiscordEditPreview
from channels.discord_voice import send_voice_message
from channels.files import CHUNK_BYTES, check_declared, save_stream
from channels.preview import Preview
from channels.voice import is_voice, read_clip
from retrypolicy import Backoff

log = logging.getLogger(__name__)

CHANNEL_NAME = "discord"
READY_TIMEOUT_SECONDS = 60.0
CATCH_UP_LIMIT = 200  # messages per DM read back after a restart
NONCE_MAX = 25  # characters Discord accepts in a message nonce
# What a login attempt raises when Discord cannot be reached (OSError covers DNS, refused
# connections and timeouts; aiohttp's own errors a dropped connection; HTTPException a 5xx).
_UNREACHABLE = (discord.HTTPException, OSError, aiohttp.ClientError)
# Where to catch up from: {DM channel id: newest message id recorded before the restart}.
CatchUpSource = Callable[[], Awaitable[Mapping[str, str]]]
# A bot's uploads are capped at 10 MB per file on servers without boosts (and in DMs).
UPLOAD_LIMIT = 10 * 1000 * 1000


class _Client(discord.Client):
    def __init__(self, adapter: DiscordChannel, **options: Any) -> None:
        super().__init__(**options)
        self._adapter = adapter

    async def on_message(self, message: discord.Message) -> None:
        await self._adapter._on_message(message)

    async def on_interaction(self, interaction: discord.Interaction) -> None:
        await self._adapter._on_interaction(interaction)


class DiscordChannel(ChannelBase):
    def __init__(
        self,
        token: str,
        *,
        groups_enabled: bool = False,
        guild_ready_timeout: float = 2.0,
        ready_timeout: float = READY_TIMEOUT_SECONDS,
        name: str = CHANNEL_NAME,
        catch_up: CatchUpSource | None = None,
        streaming: bool = False,
    ) -> None:
        self.name = name
        self.streaming = streaming
        self._token = token
        self.groups_enabled = groups_enabled
        self._guild_ready_timeout = guild_ready_timeout
        self._ready_timeout = ready_timeout
        self._client: _Client | None = None
        self._runner: asyncio.Task[None] | None = None
        self._handler: MessageHandler | None = None
        # Discord does not replay DMs sent while we were down: after connecting, each known DM
        # is read back from its history, after the newest message we recorded. Messages seen
        # both ways are deduplicated by the gateway's inbox.
        self._catch_up = catch_up
        self._catching_up: asyncio.Task[None] | None = None
        # discord.py runs each on_message in a task of its own: two quick messages of one
        # person could reach the gateway in either order. They are queued here in the order
        # Discord delivered them and handed over one at a time.
        self._intake: asyncio.Queue[discord.Message] = asyncio.Queue()
        self._intake_task: asyncio.Task[None] | None = None
        self._downloads: aiohttp.ClientSession | None = None  # one session for attachments
        # Button presses being decided: interaction id -> the interaction, to answer it
        # (Discord waits 3 s for the answer; the press is decided well within that).
        self._presses: dict[str, discord.Interaction] = {}

    @property
    def client(self) -> discord.Client:
        if self._client is None:
            raise RuntimeError("discord channel not started")
        return self._client

    def _intents(self) -> discord.Intents:
        intents = discord.Intents.none()
        intents.dm_messages = True
        intents.message_content = True  # privileged: enable it in the developer portal
        intents.guilds = self.groups_enabled
        intents.guild_messages = self.groups_enabled
        return intents

    async def start(self, handler: MessageHandler) -> None:
        self._handler = handler
        self._intake_task = asyncio.create_task(self._hand_over(), name="discord-intake")
        try:
            await self._login()
        except _UNREACHABLE as exc:  # no network, DNS, a 5xx
            log.warning(
                "discord: cannot reach Discord (%s); the gateway runs and keeps "
                "trying with backoff",
                exc,
            )
            self._runner = asyncio.create_task(self._keep_connecting(), name="discord-gateway")
            return
        except BaseException:
            await self.stop()
            raise
        self._catching_up = asyncio.create_task(self._when_ready(), name="discord-catch-up")
        self._runner = asyncio.create_task(self._run(), name="discord-gateway")
        try:  # start returns once receiving, as long as that comes within the timeout
            await asyncio.wait_for(self.client.wait_until_ready(), self._ready_timeout)
        except TimeoutError:
            log.warning(
                "discord: not connected to the Discord gateway after %.0f s; the "
                "gateway runs and discord.py keeps trying",
                self._ready_timeout,
            )

    async def _login(self) -> None:
        """A fresh client, logged in (REST: checks the token); ChannelError if rejected."""
        self._client = _Client(
            self, intents=self._intents(), guild_ready_timeout=self._guild_ready_timeout
        )
        try:
            await self._client.login(self._token)
        except discord.LoginFailure as exc:
            await self._client.close()
            raise ChannelError(
                "Discord rejected the bot token: check CLAWGATE_DISCORD__TOKEN (developer "
                "portal, Bot tab, Reset Token)"
            ) from exc
        except BaseException:
            await self._client.close()
            self._client = None
            raise

    async def _keep_connecting(self) -> None:
        """Log in with backoff until it works, then run the connection as a start would."""
        backoff = Backoff()
        while True:
            await asyncio.sleep(backoff.next())
            try:
                await self._login()
            except ChannelError as exc:
                log.error("discord: %s; stopped trying", exc)
                return
            except _UNREACHABLE:
                continue
            break
        self._catching_up = asyncio.create_task(self._when_ready(), name="discord-catch-up")
        await self._run()

    async def _when_ready(self) -> None:
        """Once connected: say so, and read back the DMs missed while down."""
        await self.client.wait_until_ready()
        log.info("discord: connected as %s", self.client.user)
        if self._catch_up is not None:
            await self._catch_up_missed(self._catch_up)

    async def _catch_up_missed(self, source: CatchUpSource) -> None:
        try:
            latest = await source()
        except Exception:
            log.exception("discord: could not read where to catch up from")
            return
        for chat_id, last_id in latest.items():
            try:
                channel = await self.client.fetch_channel(int(chat_id))
                if not isinstance(channel, discord.DMChannel):
                    continue
                async for message in channel.history(
                    after=discord.Object(id=int(last_id)),
                    oldest_first=True,
                    limit=CATCH_UP_LIMIT,
                ):
                    await self._on_message(message)
            except (discord.HTTPException, ValueError) as exc:
                log.warning(
                    "discord: could not catch up on DM %s (%s)", chat_id, type(exc).__name__
                )

    async def _run(self) -> None:
        try:
            await self.client.connect(reconnect=True)
        except discord.PrivilegedIntentsRequired:
            log.error(
                "discord: the Message Content intent is not enabled for this bot; "
                "enable it in the developer portal (Bot tab, Privileged Gateway Intents)"
            )
        except Exception:
            log.exception("discord: the gateway connection ended")

    @property
    def ready(self) -> bool:
        """For /readyz: connected to the Discord gateway right now."""
        client = self._client
        return client is not None and client.is_ready() and not client.is_closed()

    @property
    def ready_detail(self) -> str:
        if self.ready:
            return "connected"
        if self._client is None:
            return "connecting: cannot reach Discord"
        return "not connected to the Discord gateway"

    async def stop(self) -> None:
        if self._intake_task is not None:
            self._intake_task.cancel()
            await asyncio.gather(self._intake_task, return_exceptions=True)
            self._intake_task = None
        if self._catching_up is not None:
            self._catching_up.cancel()
            await asyncio.gather(self._catching_up, return_exceptions=True)
            self._catching_up = None
        if self._client is not None:
            with contextlib.suppress(Exception):
                await self._client.close()
        if self._runner is not None:
            self._runner.cancel()
            await asyncio.gather(self._runner, return_exceptions=True)
            self._runner = None
        if self._downloads is not None:
            await self._downloads.close()
            self._downloads = None

    # -- receiving ---------------------------------------------------------------------------

    async def _on_message(self, message: discord.Message) -> None:
        self._intake.put_nowait(message)  # no await before this: arrival order is kept

    async def _hand_over(self) -> None:
        while True:
            message = await self._intake.get()
            try:
                msg = self.to_inbound(message)
                if msg is not None and self._handler is not None:
                    await self._handler(msg)
            except Exception:
                log.exception("discord: could not take message %s", message.id)

    def to_inbound(self, message: discord.Message) -> InboundMessage | None:
        me = self.client.user
        if me is None or message.author.id == me.id or message.author.bot:
            return None
        text = message.content or ""
        chat_type: ChatType
        if isinstance(message.channel, discord.DMChannel):
            chat_type = "direct"
            addressed = False
        elif self.groups_enabled:
            chat_type = "group"
            addressed = self._addressed(message, me.id)
            if not addressed:
                return None
            text = re.sub(rf"<@!?{me.id}>", "", text).strip()
        else:
            return None
        attachment = ""
        attachments = tuple(_attachment(item) for item in message.attachments)
        if attachments:
            attachment = attachments[0].label
        elif message.stickers:
            attachment = "sticker"
        if not text and not attachment:
            return None
        return InboundMessage(
            channel=self.name,
            chat_id=str(message.channel.id),
            sender_id=str(message.author.id),
            text=text,
            chat_type=chat_type,
            message_id=str(message.id),
            sender_name=message.author.display_name,
            received_at=message.created_at,
            addressed=addressed,
            attachment=attachment,
            attachments=attachments,
        )

    async def _on_interaction(self, interaction: discord.Interaction) -> None:
        """A press on one of our message components (INTERACTION_CREATE, type 3): handed
        over as a press, answered by `answer_press`; one nobody answered is acknowledged
        without a change, so Discord does not show the presser an error."""
        if interaction.type is not discord.InteractionType.component:
            return
        data: Mapping[str, Any] = interaction.data or {}
        custom_id = str(data.get("custom_id") or "")
        user = interaction.user
        if not custom_id or user is None or user.bot or self._handler is None:
            return
        press_id = str(interaction.id)
        self._presses[press_id] = interaction
        try:
            await self._handler(
                InboundMessage(
                    channel=self.name,
                    chat_id=str(interaction.channel_id or ""),
                    sender_id=str(user.id),
                    text="",
                    sender_name=user.display_name,
                    press=custom_id,
                    press_id=press_id,
                    press_message=str(interaction.message.id) if interaction.message else "",
                )
            )
        except Exception:
            log.exception("discord: could not take a button press")
        finally:
            self._presses.pop(press_id, None)
            if not interaction.response.is_done():
                with contextlib.suppress(discord.HTTPException):
                    await interaction.response.defer()

    # -- buttons ------------------------------------------------------------------------------

    buttons = True

    async def send_choices(self, chat_id: str, text: str, choices: Sequence[Choice]) -> str:
        """`text` with a row of buttons (message components); the message id. The view is
        stopped at once: presses come to `on_interaction`, also after a restart, never to
        discord.py's view store."""
        if self._client is None:
            raise ConnectionError("not connected to Discord yet")
        view = discord.ui.View(timeout=None)
        for choice in choices:
            view.add_item(discord.ui.Button(label=choice.label[:80], custom_id=choice.data[:100]))
        target = self.client.get_partial_messageable(int(chat_id))
        sent = await target.send(text[:DISCORD_LIMIT], view=view)
        view.stop()
        return str(sent.id)

    async def answer_press(self, press: InboundMessage, answer: str, shown: str) -> None:
        """The interaction's callback: the question rewritten to `shown` without its buttons
        (UPDATE_MESSAGE), or, when it stays as it is (a refused press), `answer` to the
        presser alone (an ephemeral message)."""
        interaction = self._presses.get(press.press_id)
        if interaction is None or interaction.response.is_done():
            return
        try:
            if shown:
                await interaction.response.edit_message(content=shown[:DISCORD_LIMIT], view=None)
            else:
                await interaction.response.send_message(answer[:DISCORD_LIMIT], ephemeral=True)
        except discord.HTTPException as exc:
            log.info("discord: could not answer a button press (%s)", exc)

    async def settle_choices(self, chat_id: str, message_id: str, shown: str) -> None:
        if self._client is None:
            return
        target = self.client.get_partial_messageable(int(chat_id))
        try:
            await target.get_partial_message(int(message_id)).edit(
                content=shown[:DISCORD_LIMIT], view=None
            )
        except (discord.HTTPException, ValueError) as exc:
            log.info("discord: could not edit an answered question (%s)", exc)

    @staticmethod
    def _addressed(message: discord.Message, my_id: int) -> bool:
        if any(user.id == my_id for user in message.mentions):
            return True
        ref = message.reference
        resolved = ref.resolved if ref is not None else None
        return isinstance(resolved, discord.Message) and resolved.author.id == my_id

    # -- files -------------------------------------------------------------------------------

    max_upload_bytes = UPLOAD_LIMIT
    voice_notes = True

    async def download(self, attachment: Attachment, dest: Path, max_bytes: int) -> int:
        """Stream the attachment's CDN URL to `dest` (the URL is signed and expires after a
        day or so: a message left pending longer than that can no longer be fetched)."""
        check_declared(attachment.size, max_bytes)
        if self._downloads is None:
            self._downloads = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=None, connect=30, sock_read=60)
            )
        try:
            async with self._downloads.get(attachment.ref) as response:
                if response.status in (403, 404, 410):
                    raise DownloadError("Discord no longer has this file (its link expired)")
                if response.status != 200:
                    raise DownloadError(f"Discord's file server answered {response.status}")
                return await save_stream(
                    response.content.iter_chunked(CHUNK_BYTES), dest, max_bytes
                )
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise DownloadError(f"the download failed ({type(exc).__name__})") from None

    # -- sending -----------------------------------------------------------------------------

    def preview(
        self, chat_id: str, *, direct: bool, key: str, message_id: str = ""
    ) -> Preview | None:
        if not self.streaming or self._client is None or not self.ready:
            return None
        return DiscordEditPreview(self.client, int(chat_id), message_id=message_id)

    async def send(self, message: OutboundMessage) -> None:
        """Each part of a long reply is one message; parts an earlier try got accepted are
        skipped (`send_parts`), so a retry never repeats them. Each part carries a nonce
        from the message's key with `enforce_nonce` (discord.py sets it with a nonce): a part
        Discord accepted before a crash is returned again, not posted twice (Discord keeps
        nonces for a few minutes)."""
        if self._client is None:  # still connecting: the outbox retries with backoff
            raise ConnectionError("not connected to Discord yet")
        target = self.client.get_partial_messageable(int(message.chat_id))
        chunks = split_text(message.text, DISCORD_LIMIT)
        parts: list[tuple[str, Path | None]] = [(chunk, None) for chunk in chunks]
        voice = read_clip(Path(message.file)) if is_voice(message.file) else None
        if voice is not None:  # the voice message, then the text in its own messages
            parts = [("", voice.path), *((chunk, None) for chunk in chunks if chunk.strip())]
        elif message.file:  # the file with the first part as its message, the rest after it
            texts = [chunk for chunk in chunks if chunk.strip()]
            parts = [(texts[0] if texts else "", Path(message.file))]
            parts += [(chunk, None) for chunk in texts[1:]]

        async def send_part(index: int, part: tuple[str, Path | None]) -> None:
            chunk, path = part
            if path is None and not chunk.strip():
                return
            if (
                index == 0
                and path is None
                and message.replaces
                and await self._write_into(target, message.replaces, chunk)
            ):
                return
            nonce = f"cg{message.key}.{index}"[:NONCE_MAX] if message.key else None
            try:
                if path is None:
                    await (target.send(chunk) if nonce is None else target.send(chunk, nonce=nonce))
                    return
                if not path.is_file():
                    raise DeliveryRefused(f"the file to send is gone: {path.name}")
                if voice is not None:  # a voice message carries no text: it follows
                    await send_voice_message(self.client, int(message.chat_id), voice, nonce)
                    return
                file = discord.File(path, filename=path.name)
                await (
                    target.send(chunk or None, file=file)
                    if nonce is None
                    else target.send(chunk or None, file=file, nonce=nonce)
                )
            except (discord.Forbidden, discord.NotFound) as exc:
                raise DeliveryRefused(f"discord refused the message: {exc}") from exc
            except discord.HTTPException as exc:
                if exc.status == 413:
                    raise DeliveryRefused("discord refused the file: too large") from exc
                raise

        await send_parts(message, parts, send_part)

    @staticmethod
    async def _write_into(target: discord.PartialMessageable, preview: str, chunk: str) -> bool:
        """Edit the preview message into the reply's first part (editing twice to the same
        text changes nothing). False when it is gone: the part is sent as a new message."""
        try:
            message = target.get_partial_message(int(preview))
            await message.edit(content=chunk)
        except ValueError:
            return False
        except discord.NotFound:
            log.info("discord: the preview message is gone; sending the reply anew")
            return False
        except discord.Forbidden as exc:
            raise DeliveryRefused(f"discord refused the message: {exc}") from exc
        return True

    @contextlib.asynccontextmanager
    async def typing(self, chat_id: str) -> AsyncIterator[None]:
        if self._client is None:  # still connecting
            yield
            return
        target = self.client.get_partial_messageable(int(chat_id))
        try:
            indicator = target.typing()
            await indicator.__aenter__()
        except discord.HTTPException as exc:
            log.debug("discord: typing indicator failed: %s", exc)
            yield
            return
        try:
            yield
        finally:
            await indicator.__aexit__(None, None, None)


def _attachment(item: discord.Attachment) -> Attachment:
    """What kind of file a Discord attachment is, from its content type and name."""
    mime = (item.content_type or "").split(";")[0].strip().lower()
    name = item.filename or "file"
    kind: AttachmentKind
    if mime.startswith("audio/") or item.is_voice_message():
        kind, label = "audio", "voice message" if item.is_voice_message() else "audio file"
    elif mime.startswith("image/"):
        kind, label = "image", "image"
    elif mime.startswith("video/"):
        kind, label = "video", "video"
    else:  # the gateway decides from the type and name whether it can read it
        kind, label = "document", "file"
    return Attachment(
        kind,
        item.url,
        name,
        mime,
        item.size or 0,
        float(item.duration or 0),
        item.width or 0,
        item.height or 0,
        label=label,
    )
