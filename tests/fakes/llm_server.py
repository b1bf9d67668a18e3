"""Loopback stand-ins for the Anthropic and OpenAI HTTP APIs.

The real SDKs talk to these through `base_url`, so tests exercise the SDKs' own request
building, response parsing and error classes instead of mocks of them. Replies are scripted
in order; when the script runs dry a default responder echoes the last user message so
end-to-end tests get a predictable answer without scripting every turn.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
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


Responder = Callable[[dict[str, Any]], Reply]
ToolCallSpec = tuple[str, dict[str, Any] | str, str | None]


class FakeLLMServer:
    """Shared plumbing: aiohttp app on 127.0.0.1:0, request log, reply script, delays."""

    path: str = ""
    base_path: str = ""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.request_headers: list[dict[str, str]] = []
        self.responder: Responder | None = None
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
        input_tokens: int = 10,
        output_tokens: int = 5,
        cache_read_tokens: int = 0,
        cache_write_tokens: int = 0,
        delay: float = 0.0,
    ) -> Reply:
        reply = self.make_text(
            text,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            cache_read_tokens=cache_read_tokens,
            cache_write_tokens=cache_write_tokens,
        )
        return self.enqueue(replace(reply, delay=delay))

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
        input_tokens: int = 10,
        output_tokens: int = 5,
        cache_read_tokens: int = 0,
        cache_write_tokens: int = 0,
    ) -> Reply:
        raise NotImplementedError

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
        reply = self._next_reply(body)
        if reply.delay > 0:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), reply.delay)
        text = reply.raw if reply.raw is not None else json.dumps(reply.body)
        return web.Response(
            status=reply.status,
            text=text,
            headers=dict(reply.headers),
            content_type=reply.content_type,
        )


def _typed_text(content: Any) -> str:
    """The person's words in a `content` that is a string or a list of typed parts.

    Tool results are not the person's words: on Anthropic they travel in user turns, and
    echoing them would make the two fakes answer the same conversation differently.
    """
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    return "".join(
        str(part.get("text", ""))
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
        input_tokens: int = 10,
        output_tokens: int = 5,
        cache_read_tokens: int = 0,
        cache_write_tokens: int = 0,
    ) -> Reply:
        usage = self._usage(input_tokens, output_tokens, cache_read_tokens, cache_write_tokens)
        return self._message([{"type": "text", "text": text}], "end_turn", usage)

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
        return self._message(content, "tool_use", self._usage())

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
        input_tokens: int = 10,
        output_tokens: int = 5,
        cache_read_tokens: int = 0,
        cache_write_tokens: int = 0,
    ) -> Reply:
        message = {"role": "assistant", "content": text, "refusal": None}
        return self._completion(
            message, "stop", self._usage(input_tokens, output_tokens, cache_read_tokens)
        )

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
        return self._completion(message, "tool_calls", self._usage())

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        error_type = {
            401: "invalid_request_error",
            429: "requests",
        }.get(status, "server_error" if status >= 500 else "invalid_request_error")
        return {"error": {"message": message, "type": error_type, "param": None, "code": None}}

    def last_user_text(self, body: dict[str, Any]) -> str:
        return _last_user_text(body.get("messages"))
