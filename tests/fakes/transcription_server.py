"""A loopback OpenAI-compatible speech-to-text endpoint: `POST /v1/audio/transcriptions`.

The wire format of OpenAI's (and Groq's, and local whisper servers'): a multipart form with
`file`, `model` and optional `language` / `response_format`, answered with `{"text": ...}`
(plus `duration` and `language` for `verbose_json`). Errors use OpenAI's envelope. Tests set
`text`, queue failures with `fail`, and read what arrived in `requests`.
"""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass
from typing import Any

from aiohttp import web


@dataclass
class Received:
    model: str
    filename: str
    size: int
    language: str
    response_format: str
    authorization: str


class FakeTranscriptionServer:
    def __init__(self, *, key: str = "sk-stt-test") -> None:
        self.key = key
        self.text = "this is what the voice note said"
        self.delay = 0.0
        self.requests: list[Received] = []
        self.failures: deque[tuple[int, str]] = deque()
        self._runner: web.AppRunner | None = None
        self.port = 0

    async def __aenter__(self) -> FakeTranscriptionServer:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        self._routes(app.router)
        self._runner = web.AppRunner(app, shutdown_timeout=0.5)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = self._runner.addresses[0][1]
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    def _routes(self, router: web.UrlDispatcher) -> None:
        router.add_post("/v1/audio/transcriptions", self._transcribe)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def fail(self, status: int, message: str = "failure", times: int = 1) -> None:
        for _ in range(times):
            self.failures.append((status, message))

    def _refusal(self, request: web.Request) -> web.Response | None:
        """A wrong key's 401, or the next queued failure; None to go on."""
        if self.key and request.headers.get("Authorization", "") != f"Bearer {self.key}":
            return _error(401, "Incorrect API key provided", "invalid_api_key")
        if self.failures:
            status, message = self.failures.popleft()
            return _error(status, message, "server_error")
        return None

    async def _transcribe(self, request: web.Request) -> web.Response:
        authorization = request.headers.get("Authorization", "")
        if refusal := self._refusal(request):
            return refusal
        form = await request.post()
        upload = form.get("file")
        if not isinstance(upload, web.FileField):
            return _error(400, "file is required", "invalid_request_error")
        data = upload.file.read()
        fmt = str(form.get("response_format") or "json")
        self.requests.append(
            Received(
                str(form.get("model", "")),
                upload.filename,
                len(data),
                str(form.get("language") or ""),
                fmt,
                authorization,
            )
        )
        if self.delay:
            await asyncio.sleep(self.delay)
        if fmt == "text":
            return web.Response(text=self.text)
        body: dict[str, Any] = {"text": self.text}
        if fmt == "verbose_json":
            body.update(duration=1.0, language="english", segments=[])
        return web.json_response(body)


def _error(status: int, message: str, code: str) -> web.Response:
    return web.json_response(
        {"error": {"message": message, "type": code, "param": None, "code": code}}, status=status
    )
