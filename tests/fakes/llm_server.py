"""Loopback stand-ins for the Anthropic and OpenAI HTTP APIs.

The real SDKs talk to these through `base_url`, so tests exercise the SDKs' own request
building, response parsing and error classes instead of mocks of them. Replies are scripted
in order; when the script runs dry a default responder echoes the last user message so
end-to-end tests get a predictable answer without scripting every turn.

Usage is reported the way the real APIs report it, computed from the request unless a test
scripts numbers (`reply_text(..., input_tokens=...)`). Tokens are estimated as characters / 4
of each content block's JSON. Prompt caching is simulated:

- Anthropic: the prefix up to each `cache_control` breakpoint (tools, then system, then
  messages) is written to a cache per model when it has at least `cache_min_tokens`; a later
  request reads the longest cached prefix that ends at one of its block boundaries within 20
  blocks before one of its breakpoints. `cache_read_input_tokens` is that prefix,
  `cache_creation_input_tokens` what follows it up to the last breakpoint, `input_tokens` the
  rest. More than 4 breakpoints is a 400, as it is there. Entries live `cache_ttl` seconds
  from their last use.
- OpenAI: automatic; a prompt of at least 1,024 tokens reads the longest prefix (in steps of
  128 tokens) that an earlier prompt to the same model shared byte for byte, counted in
  `prompt_tokens_details.cached_tokens` (which `prompt_tokens` includes).

`reported` keeps every usage block sent; `reported_totals()` sums them.

Streaming: a request with `"stream": true` gets the same reply as server-sent events in the
API's own wire format (Anthropic: message_start, content_block_start/delta/stop, ping,
message_delta with the output usage, message_stop; OpenAI: chat.completion.chunk objects,
a last chunk with the usage and no choices when `stream_options.include_usage` is set, then
`[DONE]`). Text goes out in pieces of `stream_chunk_chars` characters, `stream_delay` seconds
apart; `stream_marks` records when each stream's first text piece was written (for the
streaming benchmark). `Reply.break_after` ends a stream after that many text pieces with the
API's mid-stream error (an `overloaded` error event), as a provider failing mid-answer does.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import itertools
import json
import math
import re
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

from aiohttp import web

_ids = itertools.count(1)


@dataclass(frozen=True)
class Reply:
    """One scripted HTTP answer. `raw` (sent verbatim) wins over `body` (JSON-encoded)."""

    status: int = 200
    body: Any = None
    raw: str | None = None
    content_type: str = "application/json"
    headers: Mapping[str, str] = field(default_factory=dict)
    delay: float = 0.0
    # A placeholder that means "whatever the default responder says", used by reply_delay.
    use_default: bool = False
    # Fill in the usage block from the request (tokens estimated, prompt cache simulated).
    computed_usage: bool = False
    # Streamed: after this many text pieces, an error event instead of the rest.
    break_after: int | None = None


def estimate_tokens(value: Any) -> int:
    """Characters / 4 of the canonical JSON (a text block's overhead included), at least 1."""
    text = (
        value
        if isinstance(value, str)
        else json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    )
    return max(1, math.ceil(len(text) / 4))


def _canonical(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode(
        "utf-8"
    )


Responder = Callable[[dict[str, Any]], Reply]
ToolCallSpec = tuple[str, dict[str, Any] | str, str | None]


class FakeLLMServer:
    """Shared plumbing: aiohttp app on 127.0.0.1:0, request log, reply script, delays."""

    path: str = ""
    base_path: str = ""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.request_headers: list[dict[str, str]] = []
        self.reported: list[dict[str, Any]] = []  # every usage block sent with a 2xx
        # Prompt cache simulation (see the module doc).
        self.cache: dict[str, float] = {}
        self.cache_ttl = 300.0
        self.cache_min_tokens = 1024
        self.now: Callable[[], float] = time.monotonic
        self.responder: Responder | None = None
        # Streaming (see the module doc).
        self.stream_chunk_chars = 8
        self.stream_delay = 0.0
        self.stream_marks: list[float] = []
        self.stream_starts: list[tuple[float, str]] = []  # (when, the first text piece)
        self.streamed = 0  # requests answered as a stream
        self.in_flight = 0  # requests received and not yet answered
        self.answered = 0  # requests whose answer went out (after its delay)
        self.most_in_flight = 0  # the most at once: how many calls really overlapped
        self._script: deque[Reply] = deque()
        self._runner: web.AppRunner | None = None
        self._port = 0
        # Set on stop() so replies that are still sleeping finish at once instead of holding
        # the runner's graceful shutdown for their whole delay.
        self._stopping = asyncio.Event()

    # -- lifecycle ---------------------------------------------------------------------------

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post(self.path, self._handle)
        self._runner = web.AppRunner(app, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self._port = self._runner.addresses[0][1]

    async def stop(self) -> None:
        self._stopping.set()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> FakeLLMServer:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._port}{self.base_path}"

    # -- scripting ---------------------------------------------------------------------------

    def enqueue(self, reply: Reply) -> Reply:
        self._script.append(reply)
        return reply

    def reply_text(
        self,
        text: str,
        *,
        input_tokens: int | None = None,
        output_tokens: int = 5,
        cache_read_tokens: int = 0,
        cache_write_tokens: int = 0,
        delay: float = 0.0,
        break_after: int | None = None,
    ) -> Reply:
        """Without `input_tokens` the usage is computed from the request. `break_after`:
        streamed, the stream breaks off after that many text pieces (module doc)."""
        reply = self.make_text(
            text,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            cache_read_tokens=cache_read_tokens,
            cache_write_tokens=cache_write_tokens,
        )
        return self.enqueue(replace(reply, delay=delay, break_after=break_after))

    def reply_tool_call(
        self,
        name: str,
        arguments: dict[str, Any] | str,
        call_id: str | None = None,
        *,
        text: str = "",
        delay: float = 0.0,
    ) -> Reply:
        """`arguments` as a str is sent raw, so tests can feed the client invalid JSON."""
        return self.reply_tool_calls([(name, arguments, call_id)], text=text, delay=delay)

    def reply_tool_calls(
        self, calls: list[ToolCallSpec], *, text: str = "", delay: float = 0.0
    ) -> Reply:
        return self.enqueue(replace(self.make_tool_calls(calls, text=text), delay=delay))

    def reply_error(
        self,
        status: int,
        body: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
        *,
        delay: float = 0.0,
    ) -> Reply:
        """Without `body`, sends this API's usual error envelope for `status`."""
        if body is None:
            body = self.error_body(status, f"fake error {status}")
        return self.enqueue(Reply(status=status, body=body, headers=headers or {}, delay=delay))

    def reply_raw(
        self,
        status: int,
        body_text: str,
        content_type: str = "application/json",
        *,
        delay: float = 0.0,
    ) -> Reply:
        return self.enqueue(
            Reply(status=status, raw=body_text, content_type=content_type, delay=delay)
        )

    def reply_delay(self, seconds: float, then: Reply | None = None) -> Reply:
        """Wait `seconds` before answering with `then` (default: the default responder)."""
        return self.enqueue(replace(then or Reply(use_default=True), delay=seconds))

    # -- wire formats: subclasses ------------------------------------------------------------

    def make_text(
        self,
        text: str,
        *,
        input_tokens: int | None = None,
        output_tokens: int = 5,
        cache_read_tokens: int = 0,
        cache_write_tokens: int = 0,
    ) -> Reply:
        """Without `input_tokens`, the usage is computed from the request it answers."""
        raise NotImplementedError

    def computed_usage(self, request: dict[str, Any], reply: dict[str, Any]) -> dict[str, Any]:
        """The usage block the real API would send for `request` answered by `reply`."""
        raise NotImplementedError

    def request_error(self, request: dict[str, Any]) -> Reply | None:
        """A 400 the real API would send for this request, if any."""
        return None

    def reported_totals(self) -> dict[str, int]:
        """Sum of every usage block sent, as uncached input, output, cache read and write."""
        raise NotImplementedError

    def _cache_lookup(self, keys: list[str]) -> None:
        """Drop expired entries; refresh the ones in `keys` that are alive."""
        now = self.now()
        for key in [k for k, at in self.cache.items() if now - at > self.cache_ttl]:
            del self.cache[key]
        for key in keys:
            if key in self.cache:
                self.cache[key] = now

    def make_tool_calls(self, calls: list[ToolCallSpec], *, text: str = "") -> Reply:
        raise NotImplementedError

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        raise NotImplementedError

    def last_user_text(self, body: dict[str, Any]) -> str:
        raise NotImplementedError

    def default_reply(self, body: dict[str, Any]) -> Reply:
        return self.make_text(f"echo: {self.last_user_text(body)}")

    # -- serving -----------------------------------------------------------------------------

    def _next_reply(self, body: dict[str, Any]) -> Reply:
        if self._script:
            reply = self._script.popleft()
            if not reply.use_default:
                return reply
            fallback = self.responder(body) if self.responder else self.default_reply(body)
            return replace(fallback, delay=reply.delay)
        if self.responder is not None:
            return self.responder(body)
        return self.default_reply(body)

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        try:
            body = await request.json()
        except ValueError:
            return web.json_response(self.error_body(400, "request body is not JSON"), status=400)
        self.requests.append(body)
        self.request_headers.append(dict(request.headers))
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            return await self._answer(request, body)
        finally:
            self.in_flight -= 1

    async def _answer(self, request: web.Request, body: dict[str, Any]) -> web.StreamResponse:
        reply = self.request_error(body) or self._next_reply(body)
        if reply.computed_usage and isinstance(reply.body, dict):
            reply = replace(
                reply, body={**reply.body, "usage": self.computed_usage(body, reply.body)}
            )
        if (
            200 <= reply.status < 300
            and isinstance(reply.body, dict)
            and isinstance(reply.body.get("usage"), dict)
        ):
            self.reported.append(reply.body["usage"])
        if reply.delay > 0:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), reply.delay)
        self.answered += 1  # its delay is over: the answer is on its way
        if (
            body.get("stream") is True
            and reply.status == 200
            and reply.raw is None
            and isinstance(reply.body, dict)
        ):
            return await self._stream(request, body, reply)
        text = reply.raw if reply.raw is not None else json.dumps(reply.body)
        return web.Response(
            status=reply.status,
            text=text,
            headers=dict(reply.headers),
            content_type=reply.content_type,
        )

    # -- streaming ---------------------------------------------------------------------------

    def stream_events(
        self, request: dict[str, Any], reply: Reply
    ) -> list[tuple[str | None, Any, bool]]:
        """(event name, data, carries text) in order: the reply as this API streams it."""
        raise NotImplementedError

    def stream_error(self) -> tuple[str | None, Any]:
        """The mid-stream error event this API sends (overloaded)."""
        raise NotImplementedError

    def pieces(self, text: str) -> list[str]:
        size = max(1, self.stream_chunk_chars)
        return [text[i : i + size] for i in range(0, len(text), size)] or []

    async def _stream(
        self, request: web.Request, body: dict[str, Any], reply: Reply
    ) -> web.StreamResponse:
        self.streamed += 1
        response = web.StreamResponse(
            status=200,
            headers={
                "Content-Type": "text/event-stream",
                "Cache-Control": "no-cache",
                **dict(reply.headers),
            },
        )
        texts = 0
        try:
            await response.prepare(request)
            for event, data, carries_text in self.stream_events(body, reply):
                if carries_text:
                    if reply.break_after is not None and texts >= reply.break_after:
                        event, data = self.stream_error()
                        await response.write(_sse(event, data))
                        break
                    if texts == 0:
                        self.stream_marks.append(time.monotonic())
                        self.stream_starts.append((self.stream_marks[-1], _piece(data)))
                    elif self.stream_delay > 0:
                        with contextlib.suppress(TimeoutError):
                            await asyncio.wait_for(self._stopping.wait(), self.stream_delay)
                    texts += 1
                await response.write(_sse(event, data))
            await response.write_eof()
        except (ConnectionResetError, RuntimeError):  # the client went away mid-stream
            pass
        return response


def _piece(data: Any) -> str:
    """The text of a streamed piece (either API's event)."""
    if not isinstance(data, dict):
        return ""
    if "delta" in data:
        return str(data["delta"].get("text") or "")
    choices = data.get("choices") or [{}]
    return str((choices[0].get("delta") or {}).get("content") or "")


def _sse(event: str | None, data: Any) -> bytes:
    payload = data if isinstance(data, str) else json.dumps(data)
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {payload}\n\n".encode()


# The gateway's time note on the newest message (gateway/agent/providers/caching.py): not
# the person's words, so the echo leaves it out.
_TIME_NOTE = re.compile(r"\s*\[Current time: [^\]\n]*\]\s*$")


def _typed_text(content: Any) -> str:
    """The person's words in a `content` that is a string or a list of typed parts.

    Tool results are not the person's words: on Anthropic they travel in user turns, and
    echoing them would make the two fakes answer the same conversation differently.
    """
    if isinstance(content, str):
        return _TIME_NOTE.sub("", content)
    if not isinstance(content, list):
        return ""
    return "".join(
        _TIME_NOTE.sub("", str(part.get("text", "")))
        for part in content
        if isinstance(part, dict) and part.get("type") == "text"
    )


def _last_user_text(messages: Any) -> str:
    for message in reversed(messages if isinstance(messages, list) else []):
        if isinstance(message, dict) and message.get("role") == "user":
            text = _typed_text(message.get("content", ""))
            if text:
                return text
    return ""


class FakeAnthropicServer(FakeLLMServer):
    """POST /v1/messages in the Messages API wire format; base_url has no /v1 suffix."""

    path = "/v1/messages"
    base_path = ""
    model = "claude-fake"

    _ERROR_TYPES: ClassVar[dict[int, str]] = {
        400: "invalid_request_error",
        401: "authentication_error",
        403: "permission_error",
        404: "not_found_error",
        413: "request_too_large",
        429: "rate_limit_error",
        500: "api_error",
        529: "overloaded_error",
    }

    def _message(
        self, content: list[dict[str, Any]], stop_reason: str, usage: dict[str, int]
    ) -> Reply:
        return Reply(
            body={
                "id": f"msg_fake{next(_ids):06d}",
                "type": "message",
                "role": "assistant",
                "model": self.model,
                "content": content,
                "stop_reason": stop_reason,
                "stop_sequence": None,
                "usage": usage,
            },
            headers={"request-id": f"req_fake{next(_ids):06d}"},
        )

    @staticmethod
    def _usage(inp: int = 10, out: int = 5, read: int = 0, write: int = 0) -> dict[str, int]:
        return {
            "input_tokens": inp,
            "output_tokens": out,
            "cache_creation_input_tokens": write,
            "cache_read_input_tokens": read,
        }

    def make_text(
        self,
        text: str,
        *,
        input_tokens: int | None = None,
        output_tokens: int = 5,
        cache_read_tokens: int = 0,
        cache_write_tokens: int = 0,
    ) -> Reply:
        usage = self._usage(input_tokens or 0, output_tokens, cache_read_tokens, cache_write_tokens)
        reply = self._message([{"type": "text", "text": text}], "end_turn", usage)
        return replace(reply, computed_usage=input_tokens is None)

    @staticmethod
    def prompt_blocks(request: dict[str, Any]) -> list[dict[str, Any]]:
        """The request as the cache sees it: tools, then system, then message blocks."""
        blocks: list[dict[str, Any]] = [dict(tool) for tool in request.get("tools") or []]
        system = request.get("system") or []
        if isinstance(system, str):
            system = [{"type": "text", "text": system}]
        blocks += [dict(block) for block in system]
        for message in request.get("messages") or []:
            content = message.get("content")
            if isinstance(content, str):
                content = [{"type": "text", "text": content}]
            blocks += [{**block, "role": message.get("role")} for block in content or []]
        return blocks

    def request_error(self, request: dict[str, Any]) -> Reply | None:
        marked = sum("cache_control" in block for block in self.prompt_blocks(request))
        if marked > 4:
            return Reply(
                status=400,
                body=self.error_body(
                    400,
                    f"A maximum of 4 blocks with cache_control may be provided. Found {marked}.",
                ),
            )
        return None

    def computed_usage(self, request: dict[str, Any], reply: dict[str, Any]) -> dict[str, Any]:
        blocks = self.prompt_blocks(request)
        digest = hashlib.sha256(str(request.get("model")).encode())
        keys: list[str] = []
        ends: list[int] = []  # tokens up to and including block i
        total = 0
        for block in blocks:
            plain = {k: v for k, v in block.items() if k != "cache_control"}
            digest.update(_canonical(plain))
            keys.append(digest.hexdigest())
            total += estimate_tokens(plain)
            ends.append(total)
        breakpoints = [i for i, block in enumerate(blocks) if "cache_control" in block]
        self._cache_lookup([])
        hit = -1
        for point in breakpoints:
            for index in range(point, max(-1, point - 21), -1):
                if keys[index] in self.cache:
                    hit = max(hit, index)
                    break
        if hit >= 0:
            self._cache_lookup([keys[hit]])
        read = ends[hit] if hit >= 0 else 0
        written_to = read
        for point in breakpoints:
            if point > hit and ends[point] >= self.cache_min_tokens:
                self.cache[keys[point]] = self.now()
                written_to = ends[point]
        output = sum(
            estimate_tokens(block.get("text") or block.get("input") or "")
            for block in reply.get("content") or []
        )
        return self._usage(total - written_to, output, read, written_to - read)

    def reported_totals(self) -> dict[str, int]:
        def total(name: str) -> int:
            return sum(int(usage.get(name) or 0) for usage in self.reported)

        return {
            "input": total("input_tokens"),
            "output": total("output_tokens"),
            "cache_read": total("cache_read_input_tokens"),
            "cache_write": total("cache_creation_input_tokens"),
        }

    def make_tool_calls(self, calls: list[ToolCallSpec], *, text: str = "") -> Reply:
        content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
        for name, arguments, call_id in calls:
            content.append(
                {
                    "type": "tool_use",
                    "id": call_id or f"toolu_fake{next(_ids):06d}",
                    "name": name,
                    # The Messages API always sends an object; a str here is the test's way
                    # of sending something malformed.
                    "input": arguments,
                }
            )
        return replace(self._message(content, "tool_use", self._usage()), computed_usage=True)

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        error_type = self._ERROR_TYPES.get(
            status, "api_error" if status >= 500 else "invalid_request_error"
        )
        return {
            "type": "error",
            "error": {"type": error_type, "message": message},
            "request_id": f"req_fake{next(_ids):06d}",
        }

    def last_user_text(self, body: dict[str, Any]) -> str:
        return _last_user_text(body.get("messages"))

    def stream_events(
        self, request: dict[str, Any], reply: Reply
    ) -> list[tuple[str | None, Any, bool]]:
        message = dict(reply.body)
        usage = dict(message.get("usage") or {})
        start = {
            **message,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {**usage, "output_tokens": 1},
        }
        events: list[tuple[str | None, Any, bool]] = [
            ("message_start", {"type": "message_start", "message": start}, False)
        ]
        for index, block in enumerate(message.get("content") or []):
            if block.get("type") == "text":
                events.append(
                    (
                        "content_block_start",
                        {
                            "type": "content_block_start",
                            "index": index,
                            "content_block": {"type": "text", "text": ""},
                        },
                        False,
                    )
                )
                if index == 0:
                    events.append(("ping", {"type": "ping"}, False))
                events += [
                    (
                        "content_block_delta",
                        {
                            "type": "content_block_delta",
                            "index": index,
                            "delta": {"type": "text_delta", "text": piece},
                        },
                        True,
                    )
                    for piece in self.pieces(str(block.get("text") or ""))
                ]
            else:
                arguments = block.get("input")
                raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
                events.append(
                    (
                        "content_block_start",
                        {
                            "type": "content_block_start",
                            "index": index,
                            "content_block": {**block, "input": {}},
                        },
                        False,
                    )
                )
                events += [
                    (
                        "content_block_delta",
                        {
                            "type": "content_block_delta",
                            "index": index,
                            "delta": {"type": "input_json_delta", "partial_json": raw[i : i + 16]},
                        },
                        False,
                    )
                    for i in range(0, len(raw), 16)
                ]
            events.append(
                ("content_block_stop", {"type": "content_block_stop", "index": index}, False)
            )
        events.append(
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": message.get("stop_reason"), "stop_sequence": None},
                    "usage": {"output_tokens": usage.get("output_tokens", 0)},
                },
                False,
            )
        )
        events.append(("message_stop", {"type": "message_stop"}, False))
        return events

    def stream_error(self) -> tuple[str | None, Any]:
        return "error", {
            "type": "error",
            "error": {"type": "overloaded_error", "message": "Overloaded"},
        }


class FakeOpenAIServer(FakeLLMServer):
    """POST /v1/chat/completions in the Chat Completions wire format; base_url ends in /v1."""

    path = "/v1/chat/completions"
    base_path = "/v1"
    model = "gpt-fake"

    def _completion(
        self, message: dict[str, Any], finish_reason: str, usage: dict[str, Any]
    ) -> Reply:
        return Reply(
            body={
                "id": f"chatcmpl-fake{next(_ids):06d}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": self.model,
                "choices": [
                    {
                        "index": 0,
                        "message": message,
                        "logprobs": None,
                        "finish_reason": finish_reason,
                    }
                ],
                "usage": usage,
                "system_fingerprint": None,
            },
            headers={"x-request-id": f"req_fake{next(_ids):06d}"},
        )

    @staticmethod
    def _usage(inp: int = 10, out: int = 5, cached: int = 0) -> dict[str, Any]:
        # OpenAI counts cached tokens inside prompt_tokens and itemizes them separately.
        return {
            "prompt_tokens": inp,
            "completion_tokens": out,
            "total_tokens": inp + out,
            "prompt_tokens_details": {"cached_tokens": cached},
        }

    def make_text(
        self,
        text: str,
        *,
        input_tokens: int | None = None,
        output_tokens: int = 5,
        cache_read_tokens: int = 0,
        cache_write_tokens: int = 0,
    ) -> Reply:
        message = {"role": "assistant", "content": text, "refusal": None}
        reply = self._completion(
            message, "stop", self._usage(input_tokens or 0, output_tokens, cache_read_tokens)
        )
        return replace(reply, computed_usage=input_tokens is None)

    CACHE_STEP_CHARS = 512  # 128 tokens at 4 characters a token

    def computed_usage(self, request: dict[str, Any], reply: dict[str, Any]) -> dict[str, Any]:
        prompt = b"".join(
            _canonical(part)
            for part in [*(request.get("tools") or []), *(request.get("messages") or [])]
        )
        text = prompt.decode("utf-8")
        tokens = estimate_tokens(text)
        digest = hashlib.sha256(str(request.get("model")).encode())
        keys = []
        for start in range(0, len(text) - self.CACHE_STEP_CHARS + 1, self.CACHE_STEP_CHARS):
            digest.update(text[start : start + self.CACHE_STEP_CHARS].encode("utf-8"))
            keys.append(digest.hexdigest())
        self._cache_lookup([])
        cached_steps = 0
        if tokens >= self.cache_min_tokens:
            for index, key in enumerate(keys):
                if key not in self.cache:
                    break
                cached_steps = index + 1
            self._cache_lookup(keys[:cached_steps])
            for key in keys[cached_steps:]:
                self.cache[key] = self.now()
        cached = min(cached_steps * self.CACHE_STEP_CHARS // 4, tokens)
        if cached < self.cache_min_tokens:
            cached = 0
        message = (reply.get("choices") or [{}])[0].get("message") or {}
        output = estimate_tokens(message.get("content") or "") + sum(
            estimate_tokens(call) for call in message.get("tool_calls") or []
        )
        return self._usage(tokens, output, cached)

    def reported_totals(self) -> dict[str, int]:
        prompt = sum(int(u.get("prompt_tokens") or 0) for u in self.reported)
        cached = sum(
            int((u.get("prompt_tokens_details") or {}).get("cached_tokens") or 0)
            for u in self.reported
        )
        return {
            "input": prompt - cached,
            "output": sum(int(u.get("completion_tokens") or 0) for u in self.reported),
            "cache_read": cached,
            "cache_write": 0,
        }

    def make_tool_calls(self, calls: list[ToolCallSpec], *, text: str = "") -> Reply:
        tool_calls = [
            {
                "id": call_id or f"call_fake{next(_ids):06d}",
                "type": "function",
                "function": {
                    "name": name,
                    "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments),
                },
            }
            for name, arguments, call_id in calls
        ]
        message = {
            "role": "assistant",
            "content": text or None,
            "refusal": None,
            "tool_calls": tool_calls,
        }
        return replace(self._completion(message, "tool_calls", self._usage()), computed_usage=True)

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        error_type = {
            401: "invalid_request_error",
            429: "requests",
        }.get(status, "server_error" if status >= 500 else "invalid_request_error")
        return {"error": {"message": message, "type": error_type, "param": None, "code": None}}

    def stream_events(
        self, request: dict[str, Any], reply: Reply
    ) -> list[tuple[str | None, Any, bool]]:
        completion = dict(reply.body)
        choice = (completion.get("choices") or [{}])[0]
        message = choice.get("message") or {}

        def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
            return {
                "id": completion.get("id"),
                "object": "chat.completion.chunk",
                "created": completion.get("created"),
                "model": completion.get("model"),
                "system_fingerprint": None,
                "choices": [
                    {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
                ],
            }

        events: list[tuple[str | None, Any, bool]] = [
            (None, chunk({"role": "assistant", "content": ""}), False)
        ]
        events += [
            (None, chunk({"content": piece}), True)
            for piece in self.pieces(str(message.get("content") or ""))
        ]
        for index, call in enumerate(message.get("tool_calls") or []):
            arguments = str(call["function"]["arguments"])
            events.append(
                (
                    None,
                    chunk(
                        {
                            "tool_calls": [
                                {
                                    "index": index,
                                    "id": call["id"],
                                    "type": "function",
                                    "function": {"name": call["function"]["name"], "arguments": ""},
                                }
                            ]
                        }
                    ),
                    False,
                )
            )
            events += [
                (
                    None,
                    chunk(
                        {
                            "tool_calls": [
                                {"index": index, "function": {"arguments": arguments[i : i + 16]}}
                            ]
                        }
                    ),
                    False,
                )
                for i in range(0, len(arguments), 16)
            ]
        events.append((None, chunk({}, str(choice.get("finish_reason") or "stop")), False))
        if (request.get("stream_options") or {}).get("include_usage"):
            events.append(
                (None, {**chunk({}), "choices": [], "usage": completion.get("usage")}, False)
            )
        events.append((None, "[DONE]", False))
        return events

    def stream_error(self) -> tuple[str | None, Any]:
        return None, {
            "error": {
                "message": "The server is overloaded",
                "type": "server_error",
                "param": None,
                "code": None,
            }
        }

    def last_user_text(self, body: dict[str, Any]) -> str:
        return _last_user_text(body.get("messages"))
