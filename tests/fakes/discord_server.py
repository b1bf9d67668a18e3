"""A loopback Discord: the REST API and the gateway websocket, for the real discord.py client.

Point discord.py at it with `patch_discord(monkeypatch, server)` (Route.BASE and the default
gateway URL). The gateway speaks JSON in text frames: HELLO, IDENTIFY -> READY, heartbeats,
and MESSAGE_CREATE dispatches that tests trigger with `dm()` / `guild_message()`.

Buttons: a message created with `components` keeps them (`SentMessage.components`; an edit
that sends `components` replaces them). `press(user_id, sent, custom_id)` dispatches an
INTERACTION_CREATE (type 3, a button of that message only), and the interaction callback
endpoint (`POST /interactions/{id}/{token}/callback`) takes the one answer Discord allows:
UPDATE_MESSAGE (7) rewrites the message, CHANNEL_MESSAGE_WITH_SOURCE (4) is a reply
(ephemeral with flag 64), DEFERRED_UPDATE_MESSAGE (6) acknowledges; a second answer is
refused with code 40060, as Discord does (`responses` has each interaction's answer).

Edits (streamed replies): `PATCH /channels/{c}/messages/{id}` changes a message the bot sent
(`SentMessage.content` is its current text, `edits` how often it changed, `at` when it was
sent and `edit_times` when it changed), 404 with code 10008 "Unknown Message" for one that
does not exist or was deleted (`DELETE` the same route), as Discord answers.
Attachments: `attachment(filename, data, content_type)` stores a file and returns the
attachment object a message carries, whose URL this server serves (`expire` makes it 404,
as a CDN link past its expiry). Files the bot uploads are in `files`.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import yarl
from aiohttp import WSMsgType, web

from channels.preview import is_preview_text

BOT = {
    "id": "900000000000000001",
    "username": "clawbot",
    "discriminator": "0",
    "avatar": None,
    "bot": True,
    "global_name": None,
}
_ids = itertools.count(1_100_000_000_000_000_000)


VOICE_MESSAGE = 1 << 13  # the message flag IS_VOICE_MESSAGE

# Shaped like a real token: the settings refuse one that cannot be.
TEST_TOKEN = "MTIzNDU2Nzg5MDEyMzQ1Njc4.Gtest1.discord-test-token-0123456789abcdef"


@dataclass
class SentMessage:
    channel_id: str
    content: str
    message_id: str = ""
    edits: int = 0
    deleted: bool = False
    at: float = field(default_factory=time.monotonic)  # when it was sent (monotonic)
    edit_times: list[float] = field(default_factory=list)
    components: list[dict[str, Any]] = field(default_factory=list)  # action rows

    def custom_ids(self) -> list[str]:
        return [
            str(c.get("custom_id", ""))
            for row in self.components
            for c in row.get("components", [])
        ]


@dataclass
class UploadedFile:
    channel_id: str
    filename: str
    data: bytes
    content: str
    flags: int = 0  # the message's flags (1 << 13: a voice message)
    # What the payload said about this attachment (`duration_secs`, `waveform`, ...).
    meta: dict[str, Any] = field(default_factory=dict)


def _user(user_id: int | str, name: str = "ann", bot: bool = False) -> dict[str, Any]:
    return {
        "id": str(user_id),
        "username": name,
        "discriminator": "0",
        "avatar": None,
        "global_name": name,
        "bot": bot,
    }


class FakeDiscordServer:
    def __init__(self, token: str = TEST_TOKEN) -> None:
        self.token = token
        self.sent: list[SentMessage] = []
        self.by_id: dict[str, SentMessage] = {}
        self.typing: list[str] = []
        self.history: dict[str, list[dict[str, Any]]] = {}  # channel id -> messages, oldest first
        self.history_reads = 0
        # (channel, nonce) -> the message created with it: Discord's `enforce_nonce` returns
        # that message again instead of creating another (for a few minutes; here, always).
        self.nonces: dict[tuple[str, str], dict[str, Any]] = {}
        self.stored: dict[str, bytes] = {}  # attachment id -> bytes
        self.downloads: list[str] = []
        self.files: list[UploadedFile] = []
        # False: voice messages are refused, as a server that disallows them does.
        self.voice_messages = True
        self.identified = asyncio.Event()
        self.interactions: dict[str, str] = {}  # interaction id -> its token
        self.pressed_on: dict[str, str] = {}  # interaction id -> the message pressed
        self.responses: dict[str, dict[str, Any]] = {}  # interaction id -> its callback body
        self.with_components: list[SentMessage] = []  # created with buttons, in order
        self._sockets: list[web.WebSocketResponse] = []
        self._seq = itertools.count(1)
        self._changed = asyncio.Condition()
        self._runner: web.AppRunner | None = None
        self.port = 0

    async def start(self) -> FakeDiscordServer:
        app = web.Application()
        app.router.add_get("/api/v10/users/@me", self._me)
        app.router.add_get("/api/v10/oauth2/applications/@me", self._application)
        app.router.add_post("/api/v10/channels/{channel}/messages", self._create_message)
        app.router.add_post("/api/v10/channels/{channel}/typing", self._typing)
        app.router.add_patch("/api/v10/channels/{channel}/messages/{message}", self._edit)
        app.router.add_delete("/api/v10/channels/{channel}/messages/{message}", self._delete)
        app.router.add_get("/api/v10/channels/{channel}", self._channel)
        app.router.add_get("/api/v10/channels/{channel}/messages", self._history)
        app.router.add_get("/gateway", self._gateway)
        app.router.add_post("/api/v10/interactions/{id}/{token}/callback", self._callback)
        app.router.add_get("/attachments/{id}/{name}", self._attachment)
        self._runner = web.AppRunner(app, shutdown_timeout=0.5)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", self.port)  # 0: any free port
        await site.start()
        self.port = self._runner.addresses[0][1]
        return self

    async def stop(self) -> None:
        for socket in list(self._sockets):
            await socket.close()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> FakeDiscordServer:
        return await self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    @property
    def api_base(self) -> str:
        return f"http://127.0.0.1:{self.port}/api/v10"

    @property
    def gateway_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/gateway"

    # -- test helpers ------------------------------------------------------------------------

    async def dispatch(self, event: str, data: dict[str, Any]) -> None:
        payload = json.dumps({"op": 0, "t": event, "s": next(self._seq), "d": data})
        for socket in list(self._sockets):
            await socket.send_str(payload)

    def message(
        self, author: dict[str, Any], channel_id: int | str, content: str, **extra: Any
    ) -> dict[str, Any]:
        return {
            "id": str(next(_ids)),
            "channel_id": str(channel_id),
            "author": author,
            "content": content,
            "timestamp": datetime.now(UTC).isoformat(),
            "edited_timestamp": None,
            "tts": False,
            "mention_everyone": False,
            "mentions": [],
            "mention_roles": [],
            "attachments": [],
            "embeds": [],
            "pinned": False,
            "type": 0,
            **extra,
        }

    async def dm(
        self, user_id: int, content: str, *, bot: bool = False, **extra: Any
    ) -> dict[str, Any]:
        """A direct message; the DM channel id is the user id + 1 (stable per user)."""
        data = self.missed_dm(user_id, content, bot=bot, **extra)
        await self.dispatch("MESSAGE_CREATE", data)
        return data

    def missed_dm(
        self, user_id: int, content: str, *, bot: bool = False, **extra: Any
    ) -> dict[str, Any]:
        """A DM that lands in the channel's history only (the bot was not connected)."""
        data = self.message(_user(user_id, bot=bot), user_id + 1, content, **extra)
        self.history.setdefault(str(user_id + 1), []).append(data)
        return data

    async def guild_message(
        self, user_id: int, channel_id: int, content: str, *, mention_bot: bool = False
    ) -> dict[str, Any]:
        mentions = [BOT] if mention_bot else []
        data = self.message(
            _user(user_id), channel_id, content, guild_id="5550001", mentions=mentions
        )
        await self.dispatch("MESSAGE_CREATE", data)
        return data

    async def press(
        self, user_id: int, sent: SentMessage, custom_id: str, *, name: str = "ann"
    ) -> str:
        """`user_id` presses the button `custom_id` of the bot's message `sent` in their DM:
        an INTERACTION_CREATE as Discord sends it; the interaction's id."""
        if custom_id not in sent.custom_ids():
            raise AssertionError(f"no button {custom_id!r} under message {sent.message_id}")
        interaction_id, token = str(next(_ids)), f"itoken-{next(_ids)}"
        self.interactions[interaction_id] = token
        self.pressed_on[interaction_id] = sent.message_id
        user = _user(user_id, name)
        message = self.message(BOT, sent.channel_id, sent.content, components=sent.components)
        message["id"] = sent.message_id
        await self.dispatch(
            "INTERACTION_CREATE",
            {
                "id": interaction_id,
                "application_id": BOT["id"],
                "type": 3,
                "token": token,
                "version": 1,
                "data": {"custom_id": custom_id, "component_type": 2},
                "channel_id": sent.channel_id,
                "channel": {"id": sent.channel_id, "type": 1, "recipients": [user]},
                "user": user,
                "message": message,
                "locale": "en-US",
                "app_permissions": "0",
                "entitlements": [],
                "authorizing_integration_owners": {"1": str(user_id)},
                "context": 1,
                "attachment_size_limit": 10 * 1024 * 1024,
            },
        )
        return interaction_id

    async def wait_response(self, interaction_id: str, timeout: float = 10.0) -> dict[str, Any]:
        async with self._changed:
            await asyncio.wait_for(
                self._changed.wait_for(lambda: interaction_id in self.responses), timeout
            )
        return self.responses[interaction_id]

    async def _callback(self, request: web.Request) -> web.Response:
        interaction_id = request.match_info["id"]
        if self.interactions.get(interaction_id) != request.match_info["token"]:
            return _json({"message": "Unknown interaction", "code": 10062}, 404)
        if interaction_id in self.responses:
            return _json(
                {"message": "Interaction has already been acknowledged.", "code": 40060}, 400
            )
        body = await request.json()
        kind, data = int(body.get("type", 0)), body.get("data") or {}
        if kind not in (4, 6, 7):
            return _json({"message": "Invalid Form Body", "code": 50035}, 400)
        async with self._changed:
            self.responses[interaction_id] = body
            self._changed.notify_all()
        interaction = {"id": interaction_id, "type": 3}
        if kind == 6:
            return _json({"interaction": interaction})
        if kind == 7:  # the message whose button was pressed, rewritten
            sent = self.by_id[self.pressed_on[interaction_id]]
            if not _valid_components(data.get("components") or []):
                return _json({"message": "Invalid Form Body", "code": 50035}, 400)
            async with self._changed:
                if "content" in data:
                    sent.content = str(data["content"] or "")
                if "components" in data:
                    sent.components = list(data["components"] or [])
                sent.edits += 1
                self._changed.notify_all()
        return _json(
            {
                "interaction": interaction,
                "resource": {"type": kind, "message": self._answered(kind, data)},
            }
        )

    def _answered(self, kind: int, data: dict[str, Any]) -> dict[str, Any]:
        return self.message(
            BOT,
            "0",
            str(data.get("content") or ""),
            components=data.get("components", []),
            flags=int(data.get("flags") or 0),
        )

    def attachment(
        self,
        filename: str,
        data: bytes,
        content_type: str,
        *,
        voice_seconds: float | None = None,
        width: int | None = None,
        height: int | None = None,
    ) -> dict[str, Any]:
        """Store `data`; the attachment object for a message (`attachments=[...]`)."""
        attachment_id = str(next(_ids))
        self.stored[attachment_id] = data
        url = f"http://127.0.0.1:{self.port}/attachments/{attachment_id}/{filename}"
        item: dict[str, Any] = {
            "id": attachment_id,
            "filename": filename,
            "size": len(data),
            "url": url,
            "proxy_url": url,
            "content_type": content_type,
        }
        if voice_seconds is not None:  # a voice message: flag IS_VOICE_MESSAGE (1 << 13)
            item.update(duration_secs=voice_seconds, waveform="AAAA", flags=1 << 13)
        if width is not None and height is not None:
            item.update(width=width, height=height)
        return item

    def expire(self, attachment: dict[str, Any]) -> None:
        self.stored.pop(str(attachment["id"]), None)

    async def wait_files(self, count: int, timeout: float = 10.0) -> list[UploadedFile]:
        async with self._changed:
            await asyncio.wait_for(
                self._changed.wait_for(lambda: len(self.files) >= count), timeout
            )
        return list(self.files)

    def texts(self, channel_id: int | str | None = None) -> list[str]:
        return [
            m.content for m in self.sent if channel_id is None or m.channel_id == str(channel_id)
        ]

    def finished(self) -> list[SentMessage]:
        """Sent messages, less the live previews of a streaming gateway still being written
        (their text ends with its cursor; the reply then replaces it by an edit)."""
        return [m for m in self.sent if not is_preview_text(m.content)]

    async def wait_sent(self, count: int, timeout: float = 10.0) -> list[SentMessage]:
        """Until `count` messages were sent (previews count once they became replies)."""
        async with self._changed:
            await asyncio.wait_for(
                self._changed.wait_for(lambda: len(self.finished()) >= count), timeout
            )
        return self.finished()

    # -- REST --------------------------------------------------------------------------------

    def _authorized(self, request: web.Request) -> bool:
        return request.headers.get("Authorization") == f"Bot {self.token}"

    async def _me(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            return _json({"message": "401: Unauthorized", "code": 0}, 401)
        return _json(BOT)

    async def _application(self, request: web.Request) -> web.Response:
        return _json(
            {
                "id": BOT["id"],
                "name": "clawbot",
                "icon": None,
                "description": "",
                "bot_public": True,
                "bot_require_code_grant": False,
                "owner": _user(1, "owner"),
                "verify_key": "00",
                "flags": 0,
                "summary": "",
            }
        )

    async def _create_message(self, request: web.Request) -> web.Response:
        channel = request.match_info["channel"]
        content_type = request.headers.get("Content-Type", "")
        uploads: list[tuple[str, bytes]] = []
        if content_type.startswith("multipart"):
            form = await request.post()
            body = json.loads(str(form["payload_json"]))
            uploads = [
                (value.filename, value.file.read())
                for value in form.values()
                if isinstance(value, web.FileField)
            ]
        else:
            body = await request.json()
        content = str(body.get("content") or "")
        if len(content) > 2000:
            return _json({"message": "Invalid Form Body", "code": 50035}, 400)
        components = body.get("components") or []
        if not _valid_components(components):
            return _json({"message": "Invalid Form Body", "code": 50035}, 400)
        flags = int(body.get("flags") or 0)
        metas = [dict(item) for item in body.get("attachments") or []]
        if flags & VOICE_MESSAGE and (
            content
            or len(uploads) != 1
            or len(metas) != 1
            or "duration_secs" not in metas[0]
            or "waveform" not in metas[0]
        ):
            # Discord's rule: one audio attachment with its length and waveform, no text.
            return _json({"message": "Invalid Form Body", "code": 50035}, 400)
        if flags & VOICE_MESSAGE and not self.voice_messages:
            return _json(
                {"message": "Cannot send voice messages in this channel", "code": 50173}, 400
            )
        nonce = str(body.get("nonce") or "")
        if nonce and body.get("enforce_nonce") and (channel, nonce) in self.nonces:
            return _json(self.nonces[(channel, nonce)])
        return _json(await self.accept(channel, content, nonce, uploads, flags, metas, components))

    async def accept(
        self,
        channel: str,
        content: str,
        nonce: str = "",
        uploads: Sequence[tuple[str, bytes]] = (),
        flags: int = 0,
        metas: Sequence[dict[str, Any]] = (),
        components: list[dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        """Create a message from the bot (what a send that reached Discord does)."""
        extra: dict[str, Any] = {"nonce": nonce} if nonce else {}
        if components:
            extra["components"] = components
        data = self.message(BOT, channel, content, **extra)
        if nonce:
            self.nonces[(channel, nonce)] = data
        async with self._changed:
            for index, (filename, body) in enumerate(uploads):
                meta = metas[index] if index < len(metas) else {}
                self.files.append(UploadedFile(channel, filename, body, content, flags, meta))
            if content or not uploads:
                sent = SentMessage(channel, content, data["id"], components=list(components or []))
                self.sent.append(sent)
                self.by_id[data["id"]] = sent
                if components:
                    self.with_components.append(sent)
            self._changed.notify_all()
        return data

    def current_texts(self, channel_id: int | str | None = None) -> list[str]:
        """What the channel shows now: each message's latest text, deleted ones left out."""
        return [
            m.content
            for m in self.sent
            if not m.deleted and (channel_id is None or m.channel_id == str(channel_id))
        ]

    async def _edit(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            return _json({"message": "401: Unauthorized", "code": 0}, 401)
        sent = self.by_id.get(request.match_info["message"])
        if sent is None or sent.deleted or sent.channel_id != request.match_info["channel"]:
            return _json({"message": "Unknown Message", "code": 10008}, 404)
        body = await request.json()
        content = str(body.get("content", sent.content) or "")
        if len(content) > 2000 or not _valid_components(body.get("components") or []):
            return _json({"message": "Invalid Form Body", "code": 50035}, 400)
        async with self._changed:
            sent.content = content
            if "components" in body:
                sent.components = list(body["components"] or [])
            sent.edits += 1
            sent.edit_times.append(time.monotonic())
            self._changed.notify_all()
        data = self.message(BOT, sent.channel_id, content)
        data["id"] = sent.message_id
        data["edited_timestamp"] = data["timestamp"]
        return _json(data)

    async def _delete(self, request: web.Request) -> web.Response:
        sent = self.by_id.get(request.match_info["message"])
        if sent is None or sent.deleted:
            return _json({"message": "Unknown Message", "code": 10008}, 404)
        sent.deleted = True
        return web.Response(status=204)

    async def _channel(self, request: web.Request) -> web.Response:
        channel = request.match_info["channel"]
        if channel not in self.history:
            return _json({"message": "Unknown Channel", "code": 10003}, 404)
        recipient = self.history[channel][0]["author"]
        return _json(
            {
                "id": channel,
                "type": 1,
                "recipients": [recipient],
                "last_message_id": self.history[channel][-1]["id"],
            }
        )

    async def _history(self, request: web.Request) -> web.Response:
        """The `limit` messages right after `after`, newest first, as the real endpoint does."""
        after = int(request.query.get("after", "0"))
        limit = int(request.query.get("limit", "50"))
        found = [
            m for m in self.history.get(request.match_info["channel"], []) if int(m["id"]) > after
        ]
        self.history_reads += 1
        return _json(list(reversed(found[:limit])))

    async def _attachment(self, request: web.Request) -> web.StreamResponse:
        data = self.stored.get(request.match_info["id"])
        if data is None:
            return web.Response(status=404, text="This content is no longer available.")
        self.downloads.append(request.match_info["name"])
        response = web.StreamResponse(headers={"Content-Type": "application/octet-stream"})
        response.content_length = len(data)
        await response.prepare(request)
        for start in range(0, len(data), 256 * 1024):
            await response.write(data[start : start + 256 * 1024])
        await response.write_eof()
        return response

    async def _typing(self, request: web.Request) -> web.Response:
        self.typing.append(request.match_info["channel"])
        return web.Response(status=204)

    # -- gateway -----------------------------------------------------------------------------

    async def _gateway(self, request: web.Request) -> web.WebSocketResponse:
        socket = web.WebSocketResponse()
        await socket.prepare(request)
        self._sockets.append(socket)
        await socket.send_str(json.dumps({"op": 10, "d": {"heartbeat_interval": 45000}}))
        try:
            async for frame in socket:
                if frame.type != WSMsgType.TEXT:
                    continue
                payload = json.loads(frame.data)
                if payload["op"] == 1:
                    await socket.send_str(json.dumps({"op": 11}))
                elif payload["op"] == 2:
                    await socket.send_str(
                        json.dumps(
                            {
                                "op": 0,
                                "t": "READY",
                                "s": next(self._seq),
                                "d": {
                                    "v": 10,
                                    "user": BOT,
                                    "guilds": [],
                                    "session_id": "fake-session",
                                    "resume_gateway_url": self.gateway_url,
                                    "application": {"id": BOT["id"], "flags": 0},
                                },
                            }
                        )
                    )
                    self.identified.set()
        finally:
            self._sockets.remove(socket)
        return socket


def _valid_components(rows: Any) -> bool:
    """Action rows (type 1) of at most five buttons (type 2) each with a label and a
    custom id of 1-100 characters, at most five rows: what Discord accepts of ours."""
    if not isinstance(rows, list) or len(rows) > 5:
        return False
    for row in rows:
        items = row.get("components") if isinstance(row, dict) else None
        if row.get("type") != 1 or not isinstance(items, list) or not 1 <= len(items) <= 5:
            return False
        for item in items:
            if item.get("type") != 2 or not str(item.get("label") or "").strip():
                return False
            if not 1 <= len(str(item.get("custom_id") or "")) <= 100:
                return False
    return True


def _json(body: Any, status: int = 200) -> web.Response:
    # discord.py parses JSON only when the header is exactly "application/json".
    return web.Response(
        status=status, body=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )


def patch_discord(monkeypatch: Any, server: FakeDiscordServer) -> None:
    import discord.gateway
    import discord.http

    monkeypatch.setattr(discord.http.Route, "BASE", server.api_base)
    monkeypatch.setattr(
        discord.gateway.DiscordWebSocket, "DEFAULT_GATEWAY", yarl.URL(server.gateway_url)
    )
