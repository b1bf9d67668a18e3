"""A loopback Telegram Bot API server (aiohttp) for the real python-telegram-bot client.

It speaks the wire format: `POST /bot<token>/<method>`, form-encoded parameters whose values
are JSON, answers `{"ok": true, "result": ...}` or `{"ok": false, "error_code", "description",
"parameters"}`. getUpdates follows Telegram's rule: an update is confirmed (gone for good)
once getUpdates is called with a higher offset; until then every poll returns it again.
Long polls wait for new updates up to `max_poll` seconds, so tests stay quick.

Streaming: `sendMessageDraft` (private chats only, as the Bot API says; `draft_id` must be
non-zero) is recorded in `drafts`; `editMessageText` changes a sent message (`Sent.text`
is its current text, `Sent.edits` how often it changed) and answers 400 "message is not
modified" for the same text and "message to edit not found" for an unknown id, as Telegram
does; `deleteMessage` removes one. Every call is logged with its time (`call_times`) so the
benchmark can count updates per second per chat.
Files: `add_file(data)` stores bytes under a new file id; getFile answers with its path (or,
like Telegram, "file is too big" past 20 MB) and `GET /file/bot<token>/<path>` streams the
bytes in chunks. sendPhoto, sendDocument and sendVoice take multipart uploads; what arrived
is in `files` (a voice note with the `duration` the bot declared).
"""

from __future__ import annotations

import asyncio
import contextlib
import html
import itertools
import json
import re
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from channels.preview import is_preview_text

BOT_USER = {"id": 777000111, "is_bot": True, "first_name": "Claw", "username": "claw_bot"}


# Shaped like a real token: the settings refuse one that cannot be.
TEST_TOKEN = "123456789:AAF-test-token-0123456789abcdefghijkl"


@dataclass
class Failure:
    status: int
    description: str
    parameters: dict[str, Any] | None = None


@dataclass
class Sent:
    chat_id: str
    text: str
    parse_mode: str | None
    at: float = field(default_factory=time.monotonic)
    message_id: int = 0
    edits: int = 0
    deleted: bool = False
    # The inline keyboard under it (the Bot API's InlineKeyboardMarkup), None for none; an
    # edit without one removes it, as the Bot API does.
    reply_markup: dict[str, Any] | None = None

    def button_data(self) -> list[str]:
        rows = (self.reply_markup or {}).get("inline_keyboard", [])
        return [str(b.get("callback_data", "")) for row in rows for b in row]


@dataclass
class Draft:
    chat_id: str
    draft_id: int
    text: str
    at: float = field(default_factory=time.monotonic)


@dataclass
class SentFile:
    chat_id: str
    method: str  # sendPhoto | sendDocument | sendVoice
    filename: str
    data: bytes
    caption: str
    duration: int | None = None  # sendVoice: what the bot declared
    parse_mode: str = ""


GETFILE_LIMIT = 20 * 1024 * 1024


class FakeTelegramServer:
    def __init__(self, token: str = TEST_TOKEN, *, max_poll: float = 0.5) -> None:
        self.token = token
        self.max_poll = max_poll
        self.updates: list[dict[str, Any]] = []  # unconfirmed, in order
        self.sent: list[Sent] = []
        self.by_chat: dict[str, list[Sent]] = {}
        self.rejected_html: list[str] = []
        self.chat_actions: list[tuple[str, str]] = []
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.call_times: list[tuple[str, str, float]] = []  # (method, chat id, monotonic)
        self.drafts: list[Draft] = []
        self.messages: dict[tuple[str, int], Sent] = {}
        self.offsets_seen: list[int | None] = []
        self.failures: dict[str, deque[Failure]] = {}
        # sendMessage to one chat only; None in the queue serves that send normally
        self.chat_failures: dict[str, deque[Failure | None]] = {}
        self.reject_html = False  # answer every HTML send with "can't parse entities"
        self.hang_polls = 0  # this many getUpdates calls hang (a stalled connection)
        # Cleared: sendMessage calls wait (not accepted) until it is set again; one whose
        # client went away meanwhile is never accepted (a killed gateway's pending send).
        self.sends_open = asyncio.Event()
        self.sends_open.set()
        self._held_epoch = 0  # `drop_held_sends` moves it: the sends held until then fail
        self.stored: dict[str, bytes] = {}  # file id -> bytes (add_file)
        self.file_paths: dict[str, str] = {}  # file path -> file id
        self.downloads: list[str] = []  # file paths fetched
        self.files: list[SentFile] = []  # files the bot sent
        self._file_ids = itertools.count(1)
        self._update_ids = itertools.count(1000)
        self._query_ids = itertools.count(5000)
        self.queries: dict[str, dict[str, Any]] = {}  # callback query id -> the query
        self.query_answers: dict[str, str] = {}  # callback query id -> answerCallbackQuery text
        self.allowed_updates: list[str] | None = None  # as the last getUpdates asked
        self.keyboards: list[Sent] = []  # messages sent with an inline keyboard, in order
        self._message_ids = itertools.count(1)
        self._changed = asyncio.Condition()
        self._runner: web.AppRunner | None = None
        self.port = 0

    # -- lifecycle ---------------------------------------------------------------------------

    async def start(self) -> FakeTelegramServer:
        app = web.Application()
        app.router.add_route("*", "/bot{token}/{method}", self._handle)
        app.router.add_get("/file/bot{token}/{path:.+}", self._download)
        self._runner = web.AppRunner(app, shutdown_timeout=0.5)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", self.port)
        await site.start()
        self.port = self._runner.addresses[0][1]
        return self

    async def stop(self) -> None:
        async with self._changed:
            self._changed.notify_all()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> FakeTelegramServer:
        return await self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/bot"

    # -- scripting ---------------------------------------------------------------------------

    def fail(
        self,
        method: str,
        status: int,
        description: str,
        parameters: dict[str, Any] | None = None,
        times: int = 1,
    ) -> None:
        queue = self.failures.setdefault(method, deque())
        for _ in range(times):
            queue.append(Failure(status, description, parameters))

    def fail_chat(
        self,
        chat_id: int | str,
        status: int,
        description: str,
        parameters: dict[str, Any] | None = None,
        times: int = 1,
        after: int = 0,
    ) -> None:
        """The next `times` sendMessage calls to `chat_id` fail (other chats are served),
        once `after` sends to it went through (the second part of a long reply, say)."""
        queue = self.chat_failures.setdefault(str(chat_id), deque())
        queue.extend([None] * after)
        for _ in range(times):
            queue.append(Failure(status, description, parameters))

    def drop_held_sends(self) -> None:
        """Open sends again; those held until now are never accepted (their client, a killed
        process, is gone even if the closed connection was not noticed yet)."""
        self._held_epoch += 1
        self.sends_open.set()

    async def add_update(self, message: dict[str, Any]) -> int:
        update_id = next(self._update_ids)
        async with self._changed:
            self.updates.append({"update_id": update_id, "message": message})
            self._changed.notify_all()
        return update_id

    async def press(self, user_id: int, sent: Sent, data: str, *, first_name: str = "Ann") -> str:
        """`user_id` presses the button with `data` under the bot's message `sent`: a
        callback_query update, as Telegram sends it (only for a button the message has)."""
        if data not in sent.button_data():
            raise AssertionError(f"no button {data!r} under message {sent.message_id}")
        query_id = str(next(self._query_ids))
        query = {
            "id": query_id,
            "from": {"id": user_id, "is_bot": False, "first_name": first_name},
            "message": {
                "message_id": sent.message_id,
                "date": int(time.time()),
                "chat": {"id": int(sent.chat_id), "type": "private"},
                "from": BOT_USER,
                "text": sent.text,
                **({"reply_markup": sent.reply_markup} if sent.reply_markup else {}),
            },
            "chat_instance": f"ci-{sent.chat_id}",
            "data": data,
        }
        self.queries[query_id] = query
        update_id = next(self._update_ids)
        async with self._changed:
            self.updates.append({"update_id": update_id, "callback_query": query})
            self._changed.notify_all()
        return query_id

    async def wait_answered(self, query_id: str, timeout: float = 10.0) -> str:
        await _until(lambda: query_id in self.query_answers, timeout)
        return self.query_answers[query_id]

    def with_buttons(self, chat_id: int | str | None = None) -> list[Sent]:
        """Messages sent with an inline keyboard (which an edit may since have removed)."""
        return [s for s in self.keyboards if chat_id is None or s.chat_id == str(chat_id)]

    def message(
        self,
        user_id: int,
        text: str | None = None,
        *,
        chat_id: int | None = None,
        chat_type: str = "private",
        first_name: str = "Ann",
        **extra: Any,
    ) -> dict[str, Any]:
        chat = {"id": chat_id if chat_id is not None else user_id, "type": chat_type}
        if chat_type == "private":
            chat["first_name"] = first_name
        else:
            chat["title"] = "A group"
        message: dict[str, Any] = {
            "message_id": next(self._message_ids),
            "date": int(time.time()),
            "chat": chat,
            "from": {"id": user_id, "is_bot": False, "first_name": first_name},
            **extra,
        }
        if text is not None:
            message["text"] = text
        return message

    def add_file(self, data: bytes, *, declared_size: int | None = None) -> dict[str, Any]:
        """Store `data` as a file; returns the fields a message carries for it (file_id,
        file_unique_id, file_size: `declared_size` may lie, as a platform's can)."""
        number = next(self._file_ids)
        file_id = f"file-{number}-id"
        self.stored[file_id] = data
        self.file_paths[f"documents/file_{number}"] = file_id
        return {
            "file_id": file_id,
            "file_unique_id": f"u{number}",
            "file_size": len(data) if declared_size is None else declared_size,
        }

    async def send_text(self, user_id: int, text: str, **kwargs: Any) -> dict[str, Any]:
        message = self.message(user_id, text, **kwargs)
        await self.add_update(message)
        return message

    def texts(self, chat_id: int | str | None = None) -> list[str]:
        return [s.text for s in self.sent if chat_id is None or s.chat_id == str(chat_id)]

    def finished(self) -> list[Sent]:
        """Sent messages, less the live previews of a streaming gateway still being written
        (their text ends with its cursor; the reply then replaces it by an edit)."""
        return [s for s in self.sent if not is_preview_text(s.text)]

    async def wait_sent(self, count: int, timeout: float = 10.0) -> list[Sent]:
        """Until `count` messages were sent (previews count once they became replies)."""
        async with self._changed:
            await asyncio.wait_for(
                self._changed.wait_for(lambda: len(self.finished()) >= count), timeout
            )
        return self.finished()

    async def wait_confirmed(self, timeout: float = 10.0) -> None:
        """Until every queued update was confirmed by a later offset."""
        await _until(lambda: not self.updates, timeout)

    # -- serving -----------------------------------------------------------------------------

    async def _params(self, request: web.Request) -> dict[str, Any]:
        if request.content_type == "application/json":
            return dict(await request.json())
        params: dict[str, Any] = {}
        for key, value in (await request.post()).items():
            if isinstance(value, str):
                try:
                    params[key] = json.loads(value)
                except ValueError:
                    params[key] = value
            elif isinstance(value, web.FileField):  # an upload (sendPhoto, sendDocument)
                params[key] = (value.filename, value.file.read())
        return params

    async def _handle(self, request: web.Request) -> web.Response:
        if request.match_info["token"] != self.token:
            return _error(401, "Unauthorized")
        method = request.match_info["method"]
        params = await self._params(request)
        self.calls.append((method, params))
        self.call_times.append((method, str(params.get("chat_id", "")), time.monotonic()))
        queue = self.failures.get(method)
        if queue:
            failure = queue.popleft()
            return _error(failure.status, failure.description, failure.parameters)
        handler = getattr(self, f"_m_{method}", None)
        if handler is None:
            return _error(404, "Not Found: method not found")
        if method == "sendMessage" and not self.sends_open.is_set():
            epoch = self._held_epoch
            await self.sends_open.wait()
            if (
                epoch != self._held_epoch
                or request.transport is None
                or request.transport.is_closing()
            ):
                return _error(500, "Internal Server Error: the client went away")
        return await handler(params)

    async def _m_getMe(self, params: dict[str, Any]) -> web.Response:
        return _ok(BOT_USER)

    async def _m_deleteWebhook(self, params: dict[str, Any]) -> web.Response:
        return _ok(True)

    async def _m_close(self, params: dict[str, Any]) -> web.Response:
        return _ok(True)

    async def _m_getUpdates(self, params: dict[str, Any]) -> web.Response:
        offset = params.get("offset")
        self.offsets_seen.append(offset)
        if self.hang_polls > 0:
            self.hang_polls -= 1
            await asyncio.sleep(30)
        wait = min(float(params.get("timeout") or 0), self.max_poll)
        if offset is not None:
            self.updates = [u for u in self.updates if u["update_id"] >= int(offset)]
        # A long poll waits for an update without holding any lock: a poll abandoned by its
        # client (a cancelled request) must not be able to block the next one.
        with contextlib.suppress(TimeoutError):
            await _until(lambda: bool(self.updates), wait)
        limit = int(params.get("limit") or 100)
        allowed = params.get("allowed_updates")
        if allowed is not None:
            self.allowed_updates = list(allowed)
        if self.allowed_updates:  # the kinds a client did not ask for are dropped
            kinds = set(self.allowed_updates)
            self.updates = [u for u in self.updates if kinds & (set(u) - {"update_id"})]
        return _ok(self.updates[:limit])

    async def _m_sendMessage(self, params: dict[str, Any]) -> web.Response:
        text = str(params.get("text", ""))
        parse_mode = params.get("parse_mode")
        if parse_mode == "HTML" and self.reject_html:
            self.rejected_html.append(text)
            return _error(
                400,
                'Bad Request: can\'t parse entities: unsupported start tag "foo" at byte offset 0',
            )
        if len(text.encode("utf-16-le")) // 2 > 4096:
            return _error(400, "Bad Request: message is too long")
        if not text.strip():
            return _error(400, "Bad Request: message text is empty")
        chat_id = str(params["chat_id"])
        queue = self.chat_failures.get(chat_id)
        failure = queue.popleft() if queue else None
        if failure is not None:
            return _error(failure.status, failure.description, failure.parameters)
        markup = params.get("reply_markup")
        if isinstance(markup, str):
            markup = json.loads(markup)
        problem = _markup_problem(markup)
        if problem:
            return _error(400, f"Bad Request: {problem}")
        message_id = next(self._message_ids)
        async with self._changed:
            sent = Sent(chat_id, text, parse_mode, message_id=message_id, reply_markup=markup)
            if markup:
                self.keyboards.append(sent)
            self.sent.append(sent)
            self.by_chat.setdefault(chat_id, []).append(sent)
            self.messages[(chat_id, message_id)] = sent
            self._changed.notify_all()
        return _ok(
            {
                "message_id": message_id,
                "date": int(time.time()),
                "chat": {"id": int(chat_id), "type": "private"},
                "from": BOT_USER,
                "text": text,
            }
        )

    async def _m_sendMessageDraft(self, params: dict[str, Any]) -> web.Response:
        chat_id = str(params.get("chat_id", ""))
        draft_id = int(params.get("draft_id") or 0)
        if not draft_id:
            return _error(400, "Bad Request: draft_id must be non-zero")
        if chat_id.startswith("-"):
            return _error(400, "Bad Request: drafts can be sent to private chats only")
        text = str(params.get("text") or "")
        if len(text.encode("utf-16-le")) // 2 > 4096:
            return _error(400, "Bad Request: text is too long")
        async with self._changed:
            self.drafts.append(Draft(chat_id, draft_id, text))
            self._changed.notify_all()
        return _ok(True)

    async def _m_editMessageText(self, params: dict[str, Any]) -> web.Response:
        key = (str(params.get("chat_id", "")), int(params.get("message_id") or 0))
        sent = self.messages.get(key)
        if sent is None or sent.deleted:
            return _error(400, "Bad Request: message to edit not found")
        text = str(params.get("text", ""))
        parse_mode = params.get("parse_mode")
        if parse_mode == "HTML" and self.reject_html:
            self.rejected_html.append(text)
            return _error(
                400,
                'Bad Request: can\'t parse entities: unsupported start tag "foo" at byte offset 0',
            )
        if not text.strip():
            return _error(400, "Bad Request: message text is empty")
        if len(text.encode("utf-16-le")) // 2 > 4096:
            return _error(400, "Bad Request: MESSAGE_TOO_LONG")
        if text == sent.text and parse_mode == sent.parse_mode:
            return _error(
                400,
                "Bad Request: message is not modified: specified new message "
                "content and reply markup are exactly the same as a current "
                "content and reply markup of the message",
            )
        markup = params.get("reply_markup")
        if isinstance(markup, str):
            markup = json.loads(markup)
        problem = _markup_problem(markup)
        if problem:
            return _error(400, f"Bad Request: {problem}")
        async with self._changed:
            sent.text, sent.parse_mode = text, parse_mode
            sent.reply_markup = markup
            sent.edits += 1
            self._changed.notify_all()
        return _ok(
            {
                "message_id": key[1],
                "date": int(time.time()),
                "edit_date": int(time.time()),
                "chat": {"id": int(key[0]), "type": "private"},
                "from": BOT_USER,
                "text": text,
            }
        )

    async def _m_editMessageReplyMarkup(self, params: dict[str, Any]) -> web.Response:
        sent = self.messages.get(
            (str(params.get("chat_id", "")), int(params.get("message_id") or 0))
        )
        if sent is None or sent.deleted:
            return _error(400, "Bad Request: message to edit not found")
        markup = params.get("reply_markup")
        if isinstance(markup, str):
            markup = json.loads(markup)
        problem = _markup_problem(markup)
        if problem:
            return _error(400, f"Bad Request: {problem}")
        async with self._changed:
            sent.reply_markup = markup
            sent.edits += 1
            self._changed.notify_all()
        return _ok(True)

    async def _m_answerCallbackQuery(self, params: dict[str, Any]) -> web.Response:
        query_id = str(params.get("callback_query_id", ""))
        if query_id not in self.queries or query_id in self.query_answers:
            return _error(
                400,
                "Bad Request: query is too old and response timeout expired or query ID is invalid",
            )
        text = str(params.get("text") or "")
        if len(text) > 200:
            return _error(400, "Bad Request: MESSAGE_TOO_LONG")
        self.query_answers[query_id] = text
        return _ok(True)

    async def _m_deleteMessage(self, params: dict[str, Any]) -> web.Response:
        sent = self.messages.get(
            (str(params.get("chat_id", "")), int(params.get("message_id") or 0))
        )
        if sent is None or sent.deleted:
            return _error(400, "Bad Request: message to delete not found")
        sent.deleted = True
        return _ok(True)

    def current_texts(self, chat_id: int | str | None = None) -> list[str]:
        """What the chat shows now: each message's latest text, deleted ones left out."""
        return [
            s.text
            for s in self.sent
            if not s.deleted and (chat_id is None or s.chat_id == str(chat_id))
        ]

    async def _m_getFile(self, params: dict[str, Any]) -> web.Response:
        file_id = str(params.get("file_id", ""))
        data = self.stored.get(file_id)
        if data is None:
            return _error(400, "Bad Request: invalid file_id")
        if len(data) > GETFILE_LIMIT:
            return _error(400, "Bad Request: file is too big")
        path = next(p for p, f in self.file_paths.items() if f == file_id)
        return _ok(
            {"file_id": file_id, "file_unique_id": "u", "file_size": len(data), "file_path": path}
        )

    async def _download(self, request: web.Request) -> web.StreamResponse:
        if request.match_info["token"] != self.token:
            return web.Response(status=401)
        file_id = self.file_paths.get(request.match_info["path"])
        if file_id is None:
            return web.Response(status=404)
        self.downloads.append(request.match_info["path"])
        data = self.stored[file_id]
        response = web.StreamResponse(headers={"Content-Type": "application/octet-stream"})
        response.content_length = len(data)
        await response.prepare(request)
        for start in range(0, len(data), 256 * 1024):
            await response.write(data[start : start + 256 * 1024])
        await response.write_eof()
        return response

    async def _m_sendPhoto(self, params: dict[str, Any]) -> web.Response:
        return await self._upload("sendPhoto", "photo", params)

    async def _m_sendDocument(self, params: dict[str, Any]) -> web.Response:
        return await self._upload("sendDocument", "document", params)

    async def _m_sendVoice(self, params: dict[str, Any]) -> web.Response:
        return await self._upload("sendVoice", "voice", params)

    async def _upload(self, method: str, field_name: str, params: dict[str, Any]) -> web.Response:
        upload = params.get(field_name)
        if isinstance(upload, str) and upload.startswith("attach://"):
            upload = params.get(upload.removeprefix("attach://"))
        if not isinstance(upload, tuple):
            return _error(400, "Bad Request: there is no file in the request")
        filename, data = upload
        if not data:
            return _error(400, "Bad Request: file must be non-empty")
        chat_id = str(params["chat_id"])
        caption = str(params.get("caption") or "")
        parse_mode = str(params.get("parse_mode") or "")
        shown = html.unescape(re.sub(r"<[^>]+>", "", caption)) if parse_mode == "HTML" else caption
        if len(shown.encode("utf-16-le")) // 2 > 1024:  # counted after entities parsing
            return _error(400, "Bad Request: message caption is too long")
        duration = params.get("duration")
        if method == "sendVoice" and duration is not None and not isinstance(duration, int):
            return _error(400, "Bad Request: wrong duration specified")
        async with self._changed:
            self.files.append(
                SentFile(chat_id, method, str(filename), data, caption, duration, parse_mode)
            )
            self._changed.notify_all()
        return _ok(
            {
                "message_id": next(self._message_ids),
                "date": int(time.time()),
                "chat": {"id": int(chat_id), "type": "private"},
                "from": BOT_USER,
                **(
                    {
                        "voice": {
                            "file_id": "sent",
                            "file_unique_id": "sent",
                            "duration": duration or 0,
                        }
                    }
                    if method == "sendVoice"
                    else {"document": {"file_id": "sent", "file_unique_id": "sent"}}
                ),
                **({"caption": caption} if caption else {}),
            }
        )

    async def wait_files(self, count: int, timeout: float = 10.0) -> list[SentFile]:
        await _until(lambda: len(self.files) >= count, timeout)
        return list(self.files)

    async def _m_sendChatAction(self, params: dict[str, Any]) -> web.Response:
        self.chat_actions.append((str(params["chat_id"]), str(params["action"])))
        return _ok(True)


async def _until(condition: Callable[[], bool], timeout: float) -> None:
    """Wait for `condition` by looking every 10 ms; TimeoutError after `timeout` seconds.

    Not with the server's Condition: a test's wait that times out must never leave that lock
    in a state where the server's own long polls (and so the bot's shutdown) hang with it,
    which is what Python 3.11's cancellation of Condition.wait inside wait_for could do.
    """
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() >= deadline:
            raise TimeoutError
        await asyncio.sleep(0.01)


def _markup_problem(markup: Any) -> str:
    """What the Bot API would refuse in an InlineKeyboardMarkup ("" when fine)."""
    if markup is None:
        return ""
    rows = markup.get("inline_keyboard") if isinstance(markup, dict) else None
    if not isinstance(rows, list) or not all(isinstance(row, list) for row in rows):
        return "can't parse reply keyboard markup JSON object"
    for row in rows:
        for button in row:
            if not isinstance(button, dict) or not str(button.get("text", "")).strip():
                return "BUTTON_TEXT_INVALID"
            data = button.get("callback_data")
            if data is not None and not 1 <= len(str(data).encode()) <= 64:
                return "BUTTON_DATA_INVALID"
    return ""


def _ok(result: Any) -> web.Response:
    return web.json_response({"ok": True, "result": result})


def _error(status: int, description: str, parameters: dict[str, Any] | None = None) -> web.Response:
    body: dict[str, Any] = {"ok": False, "error_code": status, "description": description}
    if parameters:
        body["parameters"] = parameters
    return web.json_response(body, status=status)
