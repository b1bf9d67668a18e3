"""Live previews on Discord (channels/preview.py): a message sent once, then edited.

discord.py keeps to Discord's rate limits itself (it waits out a 429 and the per-route
buckets), so an update may simply take longer; one a second per channel stays well within
the limit for edits (5 per 5 s). The reply's first part is an edit of this message
(channels/discord_channel.py, `OutboundMessage.replaces`). Previews are plain text with the
cursor at the end; Discord renders the Markdown of the reply itself.
"""

from __future__ import annotations

import contextlib

import discord

from channels.chunking import DISCORD_LIMIT
from channels.preview import DEFAULT_INTERVAL, preview_text


class DiscordEditPreview:
    def __init__(
        self,
        client: discord.Client,
        chat_id: int,
        *,
        message_id: str = "",
        interval: float = DEFAULT_INTERVAL,
    ) -> None:
        self._client = client
        self._chat_id = chat_id
        self.interval = interval
        self.message_id = message_id
        self._shown = ""

    async def show(self, text: str, progress: str = "") -> None:
        shown = preview_text(text, progress, limit=DISCORD_LIMIT - 10)
        if shown == self._shown:
            return
        target = self._client.get_partial_messageable(self._chat_id)
        if self.message_id:
            try:
                await target.get_partial_message(int(self.message_id)).edit(content=shown)
            except discord.NotFound:  # deleted by the person: a new one next time
                self.message_id = ""
                raise
        else:
            sent = await target.send(shown)
            self.message_id = str(sent.id)
        self._shown = shown

    async def delete(self) -> None:
        if not self.message_id:
            return
        target = self._client.get_partial_messageable(self._chat_id)
        # Deleted already (by the person, or by a try before a restart): no error.
        with contextlib.suppress(discord.NotFound):
            await target.get_partial_message(int(self.message_id)).delete()
        self.message_id, self._shown = "", ""
