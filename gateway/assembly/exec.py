"""The `exec` tool and its approvals, where the sandbox runs, wired into the parts at
construction (`build_parts(press_wiring=...)`).

Where bubblewrap is not installed, the tool is not made at all and the reason is logged
(`clawgate doctor` prints it with the remedy). Otherwise the tool and the approval desk are
made, and the sandbox is probed (a real run in bubblewrap) in the background once the gateway
has started polling (features/exec/gate.py): the tool is offered to the owner (and `[exec]
people`) only after the probe has passed, and never where it failed (logged the same way).
There is no host shell to fall back to. Groups never get the tool (it is not in the shared
registry); the gateway's parts get the desk for button presses and /approve, /deny.
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
from gateway.features.exec.gate import SandboxGate
from gateway.features.exec.probe import find_bwrap
from gateway.features.exec.runner import Runner
from gateway.features.exec.sandbox import Sandbox, network_relay_available
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
    or where bubblewrap is not installed (logged with the reason and the remedy). No I/O
    beyond looking for bubblewrap: the probe runs when the desk starts."""
    config = settings.exec
    if not config.enabled:
        return None
    for entry in config.allow:  # refused at start, with the entry named
        try:
            AllowEntry.parse(entry)
        except ValueError as exc:
            raise ConfigError(f"[exec] allow (CLAWGATE_EXEC__ALLOW): {exc}") from None
    if find_bwrap(config.bwrap or None) is None:
        log.warning(
            "the exec tool is not offered: %s (clawgate doctor says more)",
            "bubblewrap (bwrap) is not installed"
            if not config.bwrap
            else f"bubblewrap is not at {config.bwrap} ([exec] bwrap)",
        )
        return None
    policy = AddressPolicy(parse_networks(settings.web.allow_networks))
    hidden = hidden_paths(settings)

    def open_sandbox() -> Sandbox:
        return Sandbox.open(config, hidden_paths=hidden, bwrap=config.bwrap or None, policy=policy)

    def wire(ports: PressPorts) -> PressWiring:
        store = ApprovalStore(state.database)
        gate = SandboxGate(open_sandbox)
        runner = Runner(gate, store, clock)
        desk = ApprovalDesk(
            store,
            runner,
            ports,
            clock,
            owner=settings.owner,
            expiry_seconds=config.approval_seconds,
        )
        tool = ExecTool(
            config, runner, desk, owner=settings.owner, network_available=network_relay_available()
        )

        def offered(person_id: str) -> bool:  # never before the probe has passed
            return gate.ready and tool.may_run(person_id)

        return PressWiring(desk, [tool], {tool.spec.name: offered})

    return wire
