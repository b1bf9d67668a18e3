"""The real sandbox on this machine, and a workspaces root with two people in it.

Tests skip only where bubblewrap is missing and nobody requires it: in CI (CI=true) or with
CLAWGATE_REQUIRE_SANDBOX=1 (.ci/run sets it, and installs bubblewrap) a missing or broken
sandbox fails instead, so the escape tests can never pass by not running.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import pytest

from gateway.features.exec.probe import find_bwrap
from gateway.features.exec.sandbox import Sandbox, SandboxUnavailable, probe
from gateway.features.exec.settings import ExecSettings
from gateway.workspace.seed import ensure_workspace

REQUIRED = bool(os.environ.get("CLAWGATE_REQUIRE_SANDBOX")) or os.environ.get("CI") == "true"
BOB_SECRET = "BOB-PRIVATE-MEMORY-7c1f"
STATE_SECRET = "STATE-DB-CONTENT-91ab"
CONFIG_SECRET = "CONFIG-TOKEN-3e77"


def _skip_or_fail(reason: str) -> None:
    if REQUIRED:
        pytest.fail(f"the sandbox is required here (CI or CLAWGATE_REQUIRE_SANDBOX) but {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def sandbox_works() -> None:
    if find_bwrap() is None:
        _skip_or_fail("bubblewrap is not installed")
    availability = probe()
    if not availability.ok:
        _skip_or_fail(availability.line())


class World:
    """A workspaces root: alice (who runs commands), bob (a sibling), the state database and
    a config file, each holding a secret the sandbox must not show."""

    def __init__(self, tmp: Path) -> None:
        self.root = tmp / "workspaces"
        self.alice = ensure_workspace(self.root, "alice")
        self.bob = ensure_workspace(self.root, "bob")
        (self.bob / "MEMORY.md").write_text(BOB_SECRET + "\n", encoding="utf-8")
        for ws in (self.alice, self.bob):
            for folder in (".git", ".recall", ".trash", "sessions"):
                (ws / folder).mkdir(exist_ok=True)
        (self.alice / ".git" / "HEAD").write_text("ref: refs/heads/main\n", encoding="utf-8")
        (self.alice / "sessions" / "alice:dm.jsonl").write_text("{}\n", encoding="utf-8")
        (self.alice / "notes").mkdir()
        state_dir = self.root / ".gateway"
        state_dir.mkdir()
        self.state_db = state_dir / "state.db"
        self.state_db.write_text(STATE_SECRET, encoding="utf-8")
        self.config = tmp / "clawgate.toml"
        self.config.write_text(f'[telegram]\ntoken = "{CONFIG_SECRET}"\n', encoding="utf-8")


@pytest.fixture
def world(tmp_path: Path) -> World:
    return World(tmp_path)


Opener = Callable[..., Sandbox]


@pytest.fixture
def open_sandbox(sandbox_works: None, world: World) -> Iterator[Opener]:
    """`open_sandbox(**settings)`: a Sandbox with those settings (closed after the test)."""
    opened: list[Sandbox] = []

    def make(policy: object = None, **fields: object) -> Sandbox:
        settings = ExecSettings(**fields)  # type: ignore[arg-type]
        try:
            box = Sandbox.open(
                settings, hidden_paths=(world.config, world.root / ".gateway"), policy=policy
            )  # type: ignore[arg-type]
        except SandboxUnavailable as exc:
            _skip_or_fail(str(exc))
            raise
        opened.append(box)
        return box

    yield make
    for box in opened:
        box.close()


async def wait_until(
    check: Callable[[], bool | Awaitable[bool]], timeout: float = 10.0, what: str = "the condition"
) -> None:
    """Until `check()` holds; AssertionError after `timeout` (never a fixed sleep)."""
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while True:
        result = check()
        if not isinstance(result, bool):
            result = await result
        if result:
            return
        if loop.time() > end:
            raise AssertionError(f"{what} did not happen within {timeout} s")
        await asyncio.sleep(0.02)


async def sandbox_settled(gateway: object) -> bool:
    """Wait for the started gateway's sandbox probe (it runs beside the first poll), the way
    a person's next message would find it; whether the sandbox works."""
    from gateway.features.exec.desk import ApprovalDesk

    desk = getattr(gateway, "presses", None)
    assert isinstance(desk, ApprovalDesk), "the gateway has no exec approvals"
    return await desk.runner.gate.settled()
