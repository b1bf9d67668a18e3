"""A loopback OpenAI-compatible `/v1/embeddings` endpoint for the `openai` embedder.

It speaks the wire format the real `openai` SDK sends and parses: a JSON body with `model`,
`input` (a list of strings), `dimensions` and `encoding_format` ("float", or "base64": the
float32 little-endian bytes, base64-encoded, which the SDK asks for by default), answered with
`{"object": "list", "data": [{"object": "embedding", "index": i, "embedding": ...}], ...}`.
Vectors come from the deterministic bag-of-words `FakeEmbedder`, so search results are
predictable. The answer's items are sent in reverse order: clients must sort by `index`.
Faults are scripted: `fail_with` (an HTTP status), `garbage` (a 200 that is not JSON),
`wrong_dim` (vectors of another size), `echo_key` (the error message quotes the key sent, as
some real endpoints do on a 401).
"""

from __future__ import annotations

import base64
from typing import Any

import numpy as np
from aiohttp import web

from tests.fakes.embedder import FakeEmbedder


class FakeEmbeddingsServer:
    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.authorizations: list[str] = []
        self.fail_with: int | None = None
        self.garbage = False
        self.wrong_dim = False
        self.echo_key = False
        self._runner: web.AppRunner | None = None
        self._port = 0

    async def __aenter__(self) -> FakeEmbeddingsServer:
        app = web.Application()
        app.router.add_post("/v1/embeddings", self._handle)
        self._runner = web.AppRunner(app, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self._port = self._runner.addresses[0][1]
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._port}/v1"

    @property
    def texts_embedded(self) -> int:
        return sum(len(r["input"]) for r in self.requests)

    async def _handle(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.requests.append(body)
        self.authorizations.append(request.headers.get("Authorization", ""))
        if self.fail_with is not None:
            message = "embedding model overloaded"
            if self.echo_key:
                key = self.authorizations[-1].removeprefix("Bearer ")
                message = f"Incorrect API key provided: {key}"
            return web.json_response(
                {"error": {"message": message, "type": "server_error"}}, status=self.fail_with
            )
        if self.garbage:
            return web.Response(text="<html>bad gateway</html>", content_type="text/html")
        texts = body["input"]
        if isinstance(texts, str):
            texts = [texts]
        dim = int(body.get("dimensions") or 1536) + (7 if self.wrong_dim else 0)
        vectors = FakeEmbedder(model=str(body["model"]), dim=dim).embed_documents(texts)
        data = []
        for index, vector in enumerate(vectors.astype(np.float32)):
            if body.get("encoding_format") == "base64":
                value: Any = base64.b64encode(vector.astype("<f4").tobytes()).decode()
            else:
                value = [float(x) for x in vector]
            data.append({"object": "embedding", "index": index, "embedding": value})
        tokens = sum(len(t.split()) for t in texts)
        return web.json_response(
            {
                "object": "list",
                "data": list(reversed(data)),
                "model": body["model"],
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            }
        )
