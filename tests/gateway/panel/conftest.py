"""A panel over a real Gateway (fake LLM, recording channel) and an aiohttp test client."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from gateway.config.panel import PanelSettings
from gateway.panel.host import PanelHost
from gateway.panel.server import PanelServer, build_app
from gateway.pipeline.gateway import Gateway
from gateway.workspace.seed import ensure_workspace
from memory.service import MemoryOptions, MemoryService

CSRF = re.compile(r'name="csrf" value="([^"]+)"')


@dataclass
class PanelRig:
    gateway: Gateway
    server: PanelServer
    client: TestClient

    @property
    def token(self) -> str:
        return self.server.panel.auth.token()

    async def login(self) -> str:
        """Log in with the token; returns the session's CSRF token."""
        await self.client.get("/login")
        page = await (await self.client.get("/login")).text()
        pre = CSRF.search(page).group(1)  # type: ignore[union-attr]
        response = await self.client.post(
            "/login", data={"csrf": pre, "token": self.token}, allow_redirects=False
        )
        assert response.status == 303, await response.text()
        return await self.csrf()

    async def csrf(self) -> str:
        page = await (await self.client.get("/")).text()
        return CSRF.search(page).group(1)  # type: ignore[union-attr]

    async def post(self, path: str, data: dict[str, Any], csrf: str) -> Any:
        return await self.client.post(path, data={**data, "csrf": csrf}, allow_redirects=False)


@pytest.fixture
async def rig(
    request: pytest.FixtureRequest, make_gateway: Callable[..., Any], anthropic_server: Any
) -> AsyncIterator[PanelRig]:
    """With memory search and the schedule desk, as `clawgate run` and `clawgate chat` have
    them (`indirect` parametrization with {"scheduler": False}: a gateway without the desk)."""
    scheduler = getattr(request, "param", {}).get("scheduler", True)
    # Heartbeats active all day: what the pages say must not depend on the hour of the run.
    gateway, _ = await make_gateway(
        anthropic_server,
        heartbeat={"active_start": "00:00", "active_end": "00:00"},
        memory_service=MemoryService(lambda: None, MemoryOptions(watch=False)),
        scheduler=scheduler,
    )
    for person in ("owner", "telegram-42"):
        ensure_workspace(gateway.settings.workspaces_dir, person)
        await gateway.versioning.ensure_repo(gateway.settings.workspaces_dir / person)
    server = PanelServer(PanelHost(gateway.parts), PanelSettings(port=0))
    client = TestClient(TestServer(build_app(server.panel)))
    await client.start_server()
    server.panel.recent.attach()
    try:
        yield PanelRig(gateway, server, client)
    finally:
        server.panel.recent.detach()
        await client.close()
