"""Live previews of replies: the text shown while the model writes it.

A turn whose channel offers a preview (`Channel.preview`, channels/preview.py) gets a
`LivePreview`: the agent loop hands it the model's text as it comes (and a progress line while
tools run); a pump task pushes the newest state to the platform, at once for the first words
and then at most once per `Preview.interval` (one second on Telegram and Discord), so a
fast model never floods a chat and a slow chat never slows the model. The pace is kept per
chat across replies (`ChatPace`): a reply that starts right after the last one waits out
the rest of the interval before its first update. A 429 pauses the
pump for its `retry_after`; other failures are logged, and after a few the preview gives up
(the reply still comes: previews are best effort).

The reply itself is not the preview. It is queued in the outbox as without streaming
(gateway/pipeline/delivery.py), once the pump has stopped (an update still on its way is
awaited, so it cannot land after the reply). Where the preview is a real message, the reply
*replaces* it (its first part is an edit of that message), and the preview's message id is
recorded in the state database (`previews`) as soon as it exists, so that:

- killed while streaming: the restarted turn goes on in the same preview message, and its
  reply replaces it;
- killed after the reply was queued (or even sent): the outbox sends it again as the same
  edit, which changes nothing; no second copy;
- killed in the instant between the platform creating the preview and our recording its id:
  that preview stays behind, ending with the cursor (an unfinished preview, never a copy of
  the reply), and the reply comes as a new message.

A Telegram draft (private chats) is ephemeral: nothing to replace, nothing left behind.

A preview always ends as the reply or not at all: a reply with nothing left to send once
`HEARTBEAT_OK` is taken out (gateway/pipeline/delivery.py, `nothing_to_send`), or a message
given up on, deletes its preview (`discard`) instead of leaving "HEARTBEA ▍" in the chat. A
kill before the deletion leaves the preview recorded, and the turn taken up again deletes it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable

from channels.base import Channel
from channels.preview import Preview, PreviewRateLimited
from gateway.stores.previews import PreviewStore

log = logging.getLogger(__name__)

# Failed updates (other than rate limits) after which a preview stops trying.
MAX_FAILURES = 3
# How long the end of a turn waits for an update on its way before giving up on it.
FINISH_WAIT_SECONDS = 10.0
Sleep = Callable[[float], Awaitable[object]]
OnMessage = Callable[[str], Awaitable[None]]


class ChatPace:
    """When each chat's preview was last updated, so the pace holds across its replies."""

    KEEP = 1_000  # chats remembered; older entries are long past any interval

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._last: dict[str, float] = {}

    def wait_for(self, chat: str, interval: float) -> float:
        """Seconds until `chat` may be updated again."""
        last = self._last.get(chat)
        return 0.0 if last is None else max(0.0, last + interval - self._clock())

    def mark(self, chat: str) -> None:
        self._last.pop(chat, None)
        self._last[chat] = self._clock()
        if len(self._last) > self.KEEP:
            del self._last[next(iter(self._last))]


class LivePreview:
    """The model's text so far, pushed to a `Preview` at the platform's pace (TurnStream)."""

    def __init__(
        self,
        preview: Preview,
        *,
        on_message: OnMessage | None = None,
        sleep: Sleep = asyncio.sleep,
        pace: ChatPace | None = None,
        chat: str = "",
    ) -> None:
        self.preview = preview
        self._pace = pace or ChatPace()
        self._chat = chat
        self._on_message = on_message
        self._sleep = sleep
        self._text = ""
        self._progress = ""
        self._changed = asyncio.Event()
        self._closing = False
        self._showing = False  # an update is on its way to the platform
        self._recorded = preview.message_id
        self._pump: asyncio.Task[None] | None = None
        self.updates = 0  # updates the platform accepted (for tests and the benchmark)
        self.failures = 0

    # -- TurnStream: called synchronously from the provider's stream ---------------------------

    def delta(self, text: str) -> None:
        self._text += text
        self._progress = ""
        self._changed.set()

    def restart(self) -> None:
        if self._text:
            self._text = ""
            self._changed.set()

    def progress(self, line: str) -> None:
        self._text, self._progress = "", line
        self._changed.set()

    # -- the pump ------------------------------------------------------------------------------

    def start(self) -> None:
        self._pump = asyncio.create_task(self._run(), name="live-preview")

    async def finish(self) -> str:
        """Stop updating; returns the preview message the reply replaces ("" if none).

        An update on its way is awaited (bounded): sent after the reply, it would overwrite
        it. A pause between updates is simply cut short."""
        self._closing = True
        task, self._pump = self._pump, None
        if task is not None:
            if not self._showing:
                task.cancel()
            else:
                self._changed.set()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait({task}, timeout=FINISH_WAIT_SECONDS)
                task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        return self.preview.message_id

    async def discard(self) -> None:
        """Stop, and take the preview out of the chat (best effort: logged if it fails)."""
        await self.finish()
        try:
            await self.preview.delete()
        except Exception as exc:
            log.warning("could not delete a live preview (%s: %s)", type(exc).__name__, exc)

    async def _run(self) -> None:
        while not self._closing:
            await self._changed.wait()
            self._changed.clear()
            if self._closing:
                return
            pause = self.preview.interval
            if (wait := self._pace.wait_for(self._chat, pause)) > 0:
                await self._sleep(wait)  # this chat's last reply was updated just now
            self._showing = True
            try:
                await self.preview.show(self._text, self._progress)
                self.updates += 1
            except PreviewRateLimited as exc:
                pause = max(pause, exc.retry_after)
                self._changed.set()  # show the newest text once the pause is over
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self.failures += 1
                log.info("live preview update failed (%s: %s)", type(exc).__name__, exc)
                if self.failures >= MAX_FAILURES:
                    log.warning(
                        "live preview given up after %d failures; the reply still comes",
                        self.failures,
                    )
                    return
            finally:
                self._showing = False
                self._pace.mark(self._chat)
            await self._note_message()
            if self._closing:
                return
            await self._sleep(pause)

    async def _note_message(self) -> None:
        message_id = self.preview.message_id
        if message_id and message_id != self._recorded and self._on_message is not None:
            self._recorded = message_id
            try:
                await self._on_message(message_id)
            except Exception:  # bookkeeping: at worst a crash leaves this preview behind
                log.exception("could not record the preview message")


async def open_preview(
    channel: Channel,
    previews: PreviewStore,
    *,
    chat_id: str,
    direct: bool,
    key: str,
    pace: ChatPace | None = None,
    look_up: bool = True,
) -> LivePreview | None:
    """The live preview of the reply named `key`, going on in a preview message an earlier
    run left (recorded in the state database; `look_up` False: there can be none), or None
    when the channel shows none."""
    earlier = await previews.preview_for(key) if look_up else ""
    preview = channel.preview(chat_id, direct=direct, key=key, message_id=earlier)
    if preview is None:
        return None

    async def record(message_id: str) -> None:
        await previews.record_preview(key, channel.name, chat_id, message_id)

    live = LivePreview(preview, on_message=record, pace=pace, chat=f"{channel.name}:{chat_id}")
    live.start()
    return live
