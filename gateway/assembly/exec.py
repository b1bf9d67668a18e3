"""Gives a gateway the `exec` tool and its approvals, where the sandbox runs (before start).

The sandbox is probed once here (a real run of `true` in bubblewrap): where it cannot run,
the tool is not registered at all, the reason is logged (and `clawgate doctor` prints it with
the remedy), and nothing else changes: there is no host shell to fall back to. Where it
runs, the owner's private contexts get the tool (groups never: it is not in the shared
registry), and the gateway gets the approval desk for button presses and /approve, /deny.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

from gateway.agent.web.addresses import AddressPolicy, parse_networks
from gateway.config.settings import ConfigError, config_path
from gateway.features.exec.allowlist import AllowEntry
from gateway.features.exec.approvals_store import ApprovalStore
from gateway.features.exec.desk import ApprovalDesk
from gateway.features.exec.runner import Runner
from gateway.features.exec.sandbox import Sandbox, SandboxUnavailable
from gateway.features.exec.tool import ExecTool

if TYPE_CHECKING:
    from gateway.pipeline.gateway import Gateway

__all__ = ["ExecParts", "attach_exec"]

log = logging.getLogger(__name__)


class ExecParts:
    """What attach_exec made (the desk closes the sandbox when the gateway stops)."""

    def __init__(self, sandbox: Sandbox, desk: ApprovalDesk, tool: ExecTool) -> None:
        self.sandbox, self.desk, self.tool = sandbox, desk, tool


def hidden_paths(gateway: Gateway) -> list[Path]:
    """What a sandbox must never show even inside a mounted system directory: the config
    file, the gateway's state directory, its home."""
    settings = gateway.settings
    paths = [config_path().resolve(), (settings.workspaces_dir / ".gateway").resolve(),
             Path.home()]
    return paths


def attach_exec(gateway: Gateway) -> ExecParts | None:
    """Register the exec tool and the approval desk on `gateway` as `[exec]` says; None when
    off or where the sandbox cannot run (logged with the reason and the remedy)."""
    settings = gateway.settings
    config = settings.exec
    if not config.enabled:
        return None
    for entry in config.allow:  # refused at start, with the entry named
        try:
            AllowEntry.parse(entry)
        except ValueError as exc:
            raise ConfigError(f"[exec] allow (CLAWGATE_EXEC__ALLOW): {exc}") from None
    try:
        sandbox = Sandbox.open(config, hidden_paths=hidden_paths(gateway),
                               bwrap=config.bwrap or None,
                               policy=AddressPolicy(parse_networks(settings.web.allow_networks)))
    except SandboxUnavailable as exc:
        log.warning("the exec tool is not offered: %s (clawgate doctor says more)", exc)
        return None
    store = ApprovalStore(gateway.state)
    runner = Runner(sandbox, store, gateway.clock)
    desk = ApprovalDesk(store, runner, gateway, gateway.clock, owner=settings.owner,
                        expiry_seconds=config.approval_seconds)
    tool = ExecTool(config, runner, desk, owner=settings.owner,
                    network_available=sandbox.network_available)
    gateway.use_presses(desk)
    gateway.add_private_tools([tool], offered=tool.may_run)
    return ExecParts(sandbox, desk, tool)
