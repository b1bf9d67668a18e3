"""The `exec` tool and its approvals, where the sandbox runs, wired into the parts at
construction (`build_parts(press_wiring=...)`).

The sandbox is probed once here (a real run of `true` in bubblewrap): where it cannot run,
the tool is not made at all, the reason is logged (and `clawgate doctor` prints it with the
remedy), and nothing else changes: there is no host shell to fall back to. Where it runs,
the owner's private contexts get the tool (groups never: it is not in the shared registry),
and the gateway's parts get the approval desk for button presses and /approve, /deny.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

from gateway.agent.web.addresses import AddressPolicy, parse_networks
from gateway.clock import Clock
from gateway.config.settings import ConfigError, Settings, config_path
from gateway.features.exec.allowlist import AllowEntry
from gateway.features.exec.approvals_store import ApprovalStore
from gateway.features.exec.desk import ApprovalDesk
from gateway.features.exec.runner import Runner
from gateway.features.exec.sandbox import Sandbox, SandboxUnavailable
from gateway.features.exec.tool import ExecTool
from gateway.pipeline.presses import PressPorts, PressWiring
from gateway.stores.state import StateDB

__all__ = ["exec_wiring", "hidden_paths"]

log = logging.getLogger(__name__)


def hidden_paths(settings: Settings) -> list[Path]:
    """What a sandbox must never show even inside a mounted system directory: the config
    file, the gateway's state directory, its home."""
    return [config_path().resolve(), (settings.workspaces_dir / ".gateway").resolve(), Path.home()]


def exec_wiring(
    settings: Settings, state: StateDB, clock: Clock
) -> Callable[[PressPorts], PressWiring] | None:
    """How the parts get the exec tool and the approval desk as `[exec]` says; None when off
    or where the sandbox cannot run (logged with the reason and the remedy)."""
    config = settings.exec
    if not config.enabled:
        return None
    for entry in config.allow:  # refused at start, with the entry named
        try:
            AllowEntry.parse(entry)
        except ValueError as exc:
            raise ConfigError(f"[exec] allow (CLAWGATE_EXEC__ALLOW): {exc}") from None
    try:
        sandbox = Sandbox.open(
            config,
            hidden_paths=hidden_paths(settings),
            bwrap=config.bwrap or None,
            policy=AddressPolicy(parse_networks(settings.web.allow_networks)),
        )
    except SandboxUnavailable as exc:
        log.warning("the exec tool is not offered: %s (clawgate doctor says more)", exc)
        return None

    def wire(ports: PressPorts) -> PressWiring:
        store = ApprovalStore(state.database)
        runner = Runner(sandbox, store, clock)
        desk = ApprovalDesk(
            store,
            runner,
            ports,
            clock,
            owner=settings.owner,
            expiry_seconds=config.approval_seconds,
        )
        tool = ExecTool(
            config, runner, desk, owner=settings.owner, network_available=sandbox.network_available
        )
        return PressWiring(desk, [tool], {tool.spec.name: tool.may_run})

    return wire
