"""Shared fixtures: a clean environment, settings in a temp dir, fake LLM servers, gateways."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from channels.base import InboundMessage
from gateway.agent.providers import build_provider
from gateway.agent.sessions import SessionStore
from gateway.clock import Clock, SystemClock
from gateway.config.settings import Settings, load_settings
from gateway.pipeline.access import AccessDecision
from gateway.pipeline.gateway import Gateway
from gateway.stores.state import StateDB
from tests import loopback_only
from tests.fakes.channel import RecordingChannel
from tests.fakes.llm_server import FakeAnthropicServer, FakeLLMServer, FakeOpenAIServer

TEST_KEY = "sk-test-key-0123456789"


class AllowAll:
    """Tests of the turn path use this so any fake sender may talk."""

    async def check(self, msg: InboundMessage) -> AccessDecision:
        return AccessDecision(True)


loopback_only.install()


# Files whose tests run one at a time, on one worker, while the other worker goes on with the
# rest (tests/README.md). Keep it short: these are what hold the suite's wall time up.
SERIAL_FILES = frozenset(
    {
        # kill -9 and restart real `clawgate run` processes on a schedule, 20 and 8 times
        "tests/reliability/test_crash_safety.py",
        # 2,000 messages from 100 people through one real process, with its resident memory
        "tests/reliability/test_load.py",
    }
)
SERIAL = "serial"


def _in_serial_file(nodeid: str) -> bool:
    return nodeid.split("::", 1)[0] in SERIAL_FILES


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The serial tests first: the longest work unit starts while there is other work for
    the second worker, instead of running alone at the end."""
    items.sort(key=lambda item: not _in_serial_file(item.nodeid))


@pytest.hookimpl(tryfirst=True, optionalhook=True)  # before pytest-xdist's own choice
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """`-n N` (dist "load"), except that SERIAL_FILES' tests are one unit of work. Here rather
    than `--dist loadgroup` with `xdist_group` marks: pytest-xdist 3.8 marks a group in a
    node attribute that pytest 9.2 no longer reads, so the groups are silently ignored."""
    if config.getvalue("dist") != "load":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class SerialFilesTogether(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return SERIAL if _in_serial_file(nodeid) else nodeid

    return SerialFilesTogether(config, log)


@pytest.fixture(autouse=True)
def only_loopback() -> Iterator[None]:
    """Fails a test that looked up a name or connected past loopback (tests/loopback_only.py:
    the attempt itself was refused)."""
    loopback_only.attempts.clear()
    yield
    tried, loopback_only.attempts[:] = list(loopback_only.attempts), []
    assert not tried, f"this test tried to reach past loopback: {tried}"


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in list(os.environ):
        if name.startswith("CLAWGATE_") or name in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY"):
            monkeypatch.delenv(name)
    # The default workspaces root is per-user (platformdirs): never the real home in a test,
    # also for CLI subprocesses, which inherit this environment.
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg-data"))
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def make_settings(tmp_path: Path) -> Callable[..., Settings]:
    def make(**overrides: Any) -> Settings:
        overrides.setdefault("workspaces_dir", tmp_path / "workspaces")
        overrides.setdefault("timezone", "UTC")
        return load_settings(tmp_path / "no-such-config.toml", **overrides)

    return make


@pytest.fixture
async def anthropic_server() -> AsyncIterator[FakeAnthropicServer]:
    async with FakeAnthropicServer() as server:
        yield server  # type: ignore[misc]


@pytest.fixture
async def openai_server() -> AsyncIterator[FakeOpenAIServer]:
    async with FakeOpenAIServer() as server:
        yield server  # type: ignore[misc]


@pytest.fixture
async def tg() -> AsyncIterator[Any]:
    """The loopback Telegram Bot API (tests/fakes/telegram_server.py)."""
    from tests.fakes.telegram_server import FakeTelegramServer

    async with FakeTelegramServer() as server:
        yield server


@pytest.fixture
async def dc(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Any]:
    """The loopback Discord (REST and gateway; tests/fakes/discord_server.py), with discord.py
    pointed at it."""
    from tests.fakes.discord_server import FakeDiscordServer, patch_discord

    async with FakeDiscordServer() as server:
        patch_discord(monkeypatch, server)
        yield server


def llm_overrides(server: FakeLLMServer, **extra: Any) -> dict[str, Any]:
    provider = "anthropic" if isinstance(server, FakeAnthropicServer) else "openai"
    llm = {
        "provider": provider,
        "base_url": server.base_url,
        "api_key": TEST_KEY,
        "timeout_seconds": 5,
        "max_attempts": 1,
        **extra,
    }
    return {"llm": llm}


@pytest.fixture
async def make_gateway(
    make_settings: Callable[..., Settings],
) -> AsyncIterator[Callable[..., Any]]:
    """A started Gateway with a RecordingChannel, wired at construction as the assembly does:
    `memory_service` (a MemoryService, or a function of the settings making one), `scheduler`
    (the schedule desk, its scheduler not started, and the schedule tools; `scheduler_sleep`
    for its timer), web tools (`web_tools`: their keywords, e.g. a test resolver)."""
    gateways: list[Gateway] = []

    async def make(
        server: FakeLLMServer,
        *,
        channel: RecordingChannel | None = None,
        clock: Clock | None = None,
        llm: dict[str, Any] | None = None,
        memory_service: Any = None,
        scheduler: bool = False,
        scheduler_sleep: Any = None,
        web_tools: dict[str, Any] | None = None,
        **settings_overrides: Any,
    ) -> tuple[Gateway, RecordingChannel]:
        channel = channel or RecordingChannel()
        settings = make_settings(**llm_overrides(server, **(llm or {})), **settings_overrides)
        clock = clock or SystemClock()
        state = StateDB.for_root(settings.workspaces_dir, inbox_retention=settings.inbox_retention)
        sessions = SessionStore(clock)
        memory = memory_service(settings) if callable(memory_service) else memory_service
        private: list[Any] = []
        shared: list[Any] = []
        if web_tools is not None:
            from gateway.assembly.web import web_tools as make_web_tools

            made = make_web_tools(settings.web, sessions, **web_tools)
            private.extend(made)
            shared.extend(made if settings.web.groups else [])
        desk = None
        if scheduler:
            from gateway.agent.tools.schedule_tools import schedule_tools
            from gateway.features.scheduling import build_schedule_desk

            desk = build_schedule_desk(
                settings,
                clock,
                state.links.last_dm_route,
                [channel.name],
                **({"sleep": scheduler_sleep} if scheduler_sleep else {}),
            )
            private.extend(schedule_tools(desk) if desk is not None else [])
        gateway = Gateway.build(
            settings,
            build_provider(settings),
            channels=[channel],
            clock=clock,
            access=AllowAll(),
            state=state,
            sessions=sessions,
            memory=memory,
            private_tools=private,
            shared_tools=shared,
            schedule_desk=desk,
        )
        await gateway.start()
        gateways.append(gateway)
        return gateway, channel

    yield make
    for gateway in gateways:
        await gateway.stop()


@pytest.fixture(params=["anthropic", "openai"])
async def llm_server(request: pytest.FixtureRequest) -> AsyncIterator[FakeLLMServer]:
    """Runs a test once against each provider's fake."""
    server_class = FakeAnthropicServer if request.param == "anthropic" else FakeOpenAIServer
    async with server_class() as server:
        yield server
