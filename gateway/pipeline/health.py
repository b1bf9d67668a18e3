"""The operator's HTTP endpoints while `clawgate run` is up: /healthz, /readyz, /metrics.

- `/healthz`: 200 while the process and its event loop answer (liveness).
- `/readyz`: 200 when every channel is ready and the state database answers, else 503; the
  JSON body has per-channel detail.
- `/metrics`: the gateway's metrics in the Prometheus text format.

Channel readiness is an optional feature declared on `channels.base.Channel`: `ready` (False
while, say, its polling keeps failing) and `ready_detail` (one line why). `ChannelBase` says
ready once started; adapters that know better override it.

`clawgate run` reserves the port with the standard library before anything else starts
(`bind`: a busy port fails first) and serves it with aiohttp once the channels poll (`start`):
the web framework is not imported before the first poll.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import os
import socket
from pathlib import Path
from typing import TYPE_CHECKING, Any

from channels.base import Channel

if TYPE_CHECKING:
    from aiohttp import web

    from gateway.pipeline.ports import HealthParts, ReadinessParts
    from gateway.stores.state import StateDB

log = logging.getLogger(__name__)

PROMETHEUS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
STATE_CHECK_SECONDS = 2.0


def channel_readiness(channel: Channel, started: bool) -> dict[str, Any]:
    if not started:
        return {"ready": False, "detail": "not started"}
    ready = bool(channel.ready)
    return {"ready": ready, "detail": channel.ready_detail or ("connected" if ready else "down")}


async def state_readiness(state: StateDB) -> dict[str, Any]:
    if not state.is_open:
        return {"ready": False, "detail": "not open"}
    try:
        await asyncio.wait_for(state.db.execute_fetchall("SELECT 1"), STATE_CHECK_SECONDS)
    except Exception as exc:  # any failure means "not ready", with the reason
        return {"ready": False, "detail": type(exc).__name__}
    return {"ready": True, "detail": "ok"}


async def readiness(parts: ReadinessParts, started: bool = True) -> dict[str, Any]:
    """/readyz's report on the gateway's parts (`started`: its channels are)."""
    channels = {
        name: channel_readiness(channel, started) for name, channel in parts.channels.items()
    }
    state = await state_readiness(parts.state)
    ready = started and state["ready"] and all(c["ready"] for c in channels.values())
    return {
        "ready": ready,
        "channels": channels,
        "state_db": state,
        "queue_depth": parts.lanes.depth(),
        # Reported, never gating: an optional tool server down is not the gateway down.
        "mcp": parts.capabilities.readiness(),
    }


def instance_id(workspaces_dir: Path) -> str:
    """Names one gateway by its workspaces root without revealing the path: `clawgate
    healthcheck` compares it to its own, so another program on the port does not pass."""
    digest = hashlib.sha256(str(Path(workspaces_dir).resolve()).encode("utf-8"))
    return digest.hexdigest()[:16]


class HealthServer:
    """Serves the three endpoints for one gateway's parts. `start()` after the gateway's."""

    def __init__(self, parts: HealthParts, host: str = "127.0.0.1", port: int = 8787) -> None:
        self.parts = parts
        self.host = host
        self.port = port
        self.started = False  # the gateway's channels are started
        self._runner: web.AppRunner | None = None
        self._sockets: list[socket.socket] = []  # bound by bind(), served by start()
        parts.metrics.channel_ready.collect_with(self._channel_gauge)

    def _channel_gauge(self) -> dict[tuple[str, ...], float]:
        return {
            (name,): float(channel_readiness(channel, self.started)["ready"])
            for name, channel in self.parts.channels.items()
        }

    def _app(self) -> web.Application:
        from aiohttp import web

        app = web.Application()
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/readyz", self._readyz)
        app.router.add_get("/metrics", self._metrics)
        return app

    def bind(self) -> None:
        """Reserve the port now (an OSError if it is taken), without serving it yet: what
        connects meanwhile waits in the listen backlog until `start()`."""
        infos = socket.getaddrinfo(
            self.host or None, self.port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
        try:
            for family, kind, proto, _, address in dict.fromkeys(infos):
                sock = socket.socket(family, kind, proto)
                self._sockets.append(sock)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as asyncio does
                if family == socket.AF_INET6:
                    sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                if self.port == 0 and len(self._sockets) > 1:  # one port for every address
                    address = (address[0], self._sockets[0].getsockname()[1], *address[2:])
                sock.bind(address)
                sock.listen(128)
                sock.setblocking(False)
        except BaseException:
            self._close_sockets()
            raise
        if self._sockets:
            self.port = int(self._sockets[0].getsockname()[1])

    def _close_sockets(self) -> None:
        for sock in self._sockets:
            sock.close()
        self._sockets = []

    async def start(self, *, channels_started: bool = True) -> None:
        """Serve (binding first unless `bind()` did). `channels_started=False` while the
        gateway is not started yet: readiness stays 503 until `started` is set."""
        from aiohttp import web

        if not self._sockets:
            self.bind()
        self._runner = web.AppRunner(self._app(), access_log=None)
        try:
            await self._runner.setup()
            for sock in self._sockets:
                await web.SockSite(self._runner, sock).start()
        except BaseException:
            await self._runner.cleanup()
            self._runner = None
            self._close_sockets()
            raise
        self.started = channels_started
        log.info("health endpoints on %s (/healthz /readyz /metrics)", self.url)

    async def stop(self) -> None:
        self.started = False
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        self._close_sockets()

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    async def _healthz(self, request: web.Request) -> web.Response:
        from aiohttp import web

        return web.json_response(
            {
                "status": "ok",
                "service": "clawgate",
                "pid": os.getpid(),
                "instance": instance_id(self.parts.settings.workspaces_dir),
            }
        )

    async def _readyz(self, request: web.Request) -> web.Response:
        from aiohttp import web

        report = await readiness(self.parts, self.started)
        return web.Response(
            text=json.dumps(report, indent=1),
            content_type="application/json",
            status=200 if report["ready"] else 503,
        )

    async def _metrics(self, request: web.Request) -> web.Response:
        from aiohttp import web

        body = self.parts.metrics.render()
        return web.Response(
            body=body.encode("utf-8"), headers={"Content-Type": PROMETHEUS_CONTENT_TYPE}
        )
