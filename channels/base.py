"""The one small interface every platform adapter implements.

Keeping it this small (start, stop, send) is what lets the gateway treat a terminal, Telegram
and Discord alike, and lets tests swap in a recording fake. Optional features (a typing
indicator, readiness for /readyz, whether messages are durable platform messages) are declared
on `Channel` and given defaults by `ChannelBase`, which adapters subclass and override: the
gateway asks, it never probes with getattr. Retry delays come from `retrypolicy.Backoff`, shared
with the model providers and the gateway's delivery path.

Media: an adapter describes what a message carries (`Attachment`: the platform's handle, the
declared size, duration, dimensions) and fetches it later, when the gateway asks
(`download`), inside the turn rather than in the receive loop: a slow 20 MB download must not
hold up the next update's acknowledgement, and a message recorded before a restart can be
fetched again from its handle. Files go out through `send` with `OutboundMessage.file`.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager, nullcontext
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal, Protocol, TypeVar

from channels.preview import Preview

ChatType = Literal["direct", "group"]
Part = TypeVar("Part")
# What an attachment is, as far as the gateway cares: audio (voice notes, audio files, video
# notes: heard), image (seen), document (read), video and other (politely declined).
AttachmentKind = Literal["audio", "image", "document", "video", "other"]


@dataclass(frozen=True, slots=True)
class Attachment:
    """A file a person sent, not fetched yet: `ref` is what the adapter needs to fetch it
    (a Telegram file id, a Discord attachment URL). Sizes and durations are the platform's
    declarations (0: not declared); the download enforces its own cap regardless."""

    kind: AttachmentKind
    ref: str
    filename: str = ""
    mime: str = ""
    size: int = 0
    duration: float = 0.0
    width: int = 0
    height: int = 0
    # What the platform called it ("voice message", "photo", ...), for replies and the log.
    label: str = ""


_SURROGATE = re.compile("[\ud800-\udfff]")


@dataclass(frozen=True, slots=True)
class InboundMessage:
    """A platform-neutral message from a person, as the gateway sees it."""

    channel: str
    chat_id: str
    sender_id: str
    text: str
    chat_type: ChatType = "direct"
    message_id: str = ""
    sender_name: str = ""
    received_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    # In a group: the bot was mentioned or replied to (channels set it; DMs leave it False).
    addressed: bool = False
    # A non-text attachment ("photo", "voice", ...); a caption, if any, is in `text`.
    attachment: str = ""
    # The files that came with it (voice notes, photos, documents), fetched by the gateway.
    attachments: tuple[Attachment, ...] = ()
    # A button press, not a message: the data of the button pressed (`Choice.data`), the
    # platform's handle to answer the press with (`answer_press`), and the message whose
    # button it was. A press is never recorded as a message nor shown to the model.
    press: str = ""
    press_id: str = ""
    press_message: str = ""

    def __post_init__(self) -> None:
        # Lone surrogates (from broken UTF-16 on a platform) cannot be written as UTF-8: one
        # would make the transcript append fail. Replace them here, once, for every channel.
        if _SURROGATE.search(self.text):
            object.__setattr__(self, "text", _SURROGATE.sub("\ufffd", self.text))


# Awaited by a channel after the platform accepted a part of a message: (parts accepted so far,
# parts in all). The delivery path records the progress before the next part goes out.
PartAccepted = Callable[[int, int], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class Choice:
    """A button under a message: its label, and the data a press brings back (at most 64
    bytes: Telegram's limit for callback data; Discord's custom id takes 100)."""

    label: str
    data: str


@dataclass(frozen=True, slots=True)
class OutboundMessage:
    """A reply to deliver. Chunking for the platform's limits is the channel's job.

    A channel that cuts a message into parts sends only the parts from `first_part` on (the
    earlier ones were accepted by an earlier try) and awaits `on_part` after each accepted
    part (`send_parts` does both). A channel that sends one message ignores both.

    `key` names the message the same way on every try, also after a restart (the delivery
    path's outbox row): a platform that recognises a repeated send by a client-chosen id
    (Discord's message nonce) gets one derived from it, so a repeat creates nothing.

    `replaces`: the platform message of this reply's live preview (channels/preview.py).
    The first part is written into it (an edit, idempotent) instead of being sent anew; if
    that message is gone, the part is sent as a new message.
    """

    channel: str
    chat_id: str
    text: str
    key: str = ""
    first_part: int = 0
    # A file to send (an absolute path), with `text` as its caption; a voice note when its
    # name says so (channels/voice.py).
    file: str = ""
    on_part: PartAccepted | None = field(default=None, compare=False, repr=False)
    replaces: str = ""


async def send_parts(
    message: OutboundMessage,
    parts: Sequence[Part],
    send: Callable[[int, Part], Awaitable[object]],
) -> None:
    """Send `parts` (`send(index, part)`) from `message.first_part` on, reporting each
    accepted one.

    The parts must be cut the same way on every try (a pure function of the text), so that
    the count of accepted parts means the same thing after a restart.
    """
    total = len(parts)
    for index in range(min(message.first_part, total), total):
        await send(index, parts[index])
        if message.on_part is not None:
            await message.on_part(index + 1, total)


MessageHandler = Callable[[InboundMessage], Awaitable[None]]


class ChannelError(Exception):
    """A channel cannot run (rejected token, API unreachable at start); `str()` says why."""


class DownloadError(Exception):
    """An attachment could not be fetched (too large, gone, unsupported); `str()` says why in
    words that can be shown to the person."""


class DeliveryRefused(Exception):
    """The platform refused a send for good (blocked by the person, chat gone, bad request):
    retrying cannot help, so the delivery path records it as failed instead of retrying."""


class Channel(Protocol):
    """A platform adapter. `start` returns once the adapter is receiving.

    `durable`: the gateway records the messages in its inbox and outbox, so one that was not
    answered (a restart, a crash) is answered at the next start and a redelivered one is not
    answered twice (the terminal is durable too, with ids unique across runs).
    `ready` / `ready_detail`: for /readyz. `typing(chat_id)`: "typing..." while open.
    `preview(...)`: a live preview of a reply being written (channels/preview.py), or None
    when the channel shows none (streaming off, or not supported).
    `download(attachment, dest, max_bytes)`: stream an attachment to `dest`, at most
    `max_bytes` (DownloadError otherwise); returns the bytes written.
    `max_upload_bytes`: the largest file `send` can deliver (0: this channel sends no files).
    `voice_notes`: `send` delivers a voice note (`OutboundMessage.file` named by
    channels/voice.py) as the platform's own voice message, with the text beside it.
    `buttons`: the channel can put choices under a message (`send_choices`, returning the
    message's id) and hands a press to the handler as an `InboundMessage` with `press` set;
    `answer_press` acknowledges it (a short note to the presser) and rewrites the message to
    `shown` without its buttons; `settle_choices` rewrites a message with choices later (an
    expiry). Channels without buttons keep the defaults: no buttons, nothing to answer.
    """

    name: str

    @property
    def durable(self) -> bool: ...

    @property
    def ready(self) -> bool: ...

    @property
    def ready_detail(self) -> str: ...

    async def start(self, handler: MessageHandler) -> None: ...

    async def stop(self) -> None: ...

    async def send(self, message: OutboundMessage) -> None: ...

    def typing(self, chat_id: str) -> AbstractAsyncContextManager[None]: ...

    def preview(
        self, chat_id: str, *, direct: bool, key: str, message_id: str = ""
    ) -> Preview | None:
        """A preview for the reply named `key` (stable across restarts) in `chat_id`;
        `message_id`: the preview message an earlier run of this reply left, to go on in."""
        ...

    @property
    def max_upload_bytes(self) -> int: ...

    @property
    def voice_notes(self) -> bool: ...

    async def download(self, attachment: Attachment, dest: Path, max_bytes: int) -> int: ...

    @property
    def buttons(self) -> bool: ...

    async def send_choices(self, chat_id: str, text: str, choices: Sequence[Choice]) -> str: ...

    async def answer_press(self, press: InboundMessage, answer: str, shown: str) -> None: ...

    async def settle_choices(self, chat_id: str, message_id: str, shown: str) -> None: ...


class ChannelBase:
    """Defaults for the optional features of `Channel`; adapters override what they support."""

    name: str = "channel"
    durable: bool = True
    _ready: bool = True
    _ready_detail: str = "started"

    @property
    def ready(self) -> bool:
        return self._ready

    @property
    def ready_detail(self) -> str:
        return self._ready_detail

    def set_ready(self, ready: bool, detail: str) -> None:
        """Report readiness for /readyz (adapters that can compute it override the properties)."""
        self._ready, self._ready_detail = ready, detail

    max_upload_bytes: int = 0
    voice_notes: bool = False

    def typing(self, chat_id: str) -> AbstractAsyncContextManager[None]:
        return nullcontext()

    def preview(
        self, chat_id: str, *, direct: bool, key: str, message_id: str = ""
    ) -> Preview | None:
        return None

    async def download(self, attachment: Attachment, dest: Path, max_bytes: int) -> int:
        raise DownloadError(f"the {self.name} channel cannot fetch files")

    buttons: bool = False

    async def send_choices(self, chat_id: str, text: str, choices: Sequence[Choice]) -> str:
        raise NotImplementedError(f"the {self.name} channel has no buttons")

    async def answer_press(self, press: InboundMessage, answer: str, shown: str) -> None:
        return None

    async def settle_choices(self, chat_id: str, message_id: str, shown: str) -> None:
        return None


async def cancel_until_done(task: asyncio.Task[object], every: float = 0.5) -> None:
    """Cancel `task` and wait for its end, cancelling again if it carries on.

    A loop that catches its step's errors can lose one cancel: on Python 3.11 `wait_for`
    returns (or raises) the inner outcome when the cancel lands just as that inner call ends,
    and the loop goes round again. A stop must not wait for such a task forever."""
    while not task.done():
        task.cancel()
        await asyncio.wait({task}, timeout=every)
    if not task.cancelled():
        task.exception()  # retrieved: an error at the end is the task's own log's business


class OffsetStore(Protocol):
    """Where a polling channel keeps its platform offset (the gateway state database), and
    where it records an update it could not read (logged by id, skipped, never retried)."""

    async def load_offset(self, channel: str) -> int | None: ...

    async def save_offset(self, channel: str, value: int) -> None: ...

    async def record_failed(self, channel: str, ref: str, error: str) -> None: ...
