"""One command run for one person, recorded: the sandbox run, the quota, the record.

Both ways a command runs go through here: the `exec` tool in a turn, and the desk when an
approval arrives after the turn that asked has ended (or after a restart). So every run is
counted against the workspace quota the same way and leaves one row in `exec_runs` (command,
who approved it, exit status, duration, bytes out) for the panel.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from gateway.clock import Clock
from gateway.features.exec.approvals_store import ApprovalStore, RunRecord
from gateway.features.exec.gate import SandboxGate
from gateway.features.exec.sandbox import (
    RunRequest,
    RunResult,
    Sandbox,
    SandboxRefused,
    SandboxUnavailable,
)

if TYPE_CHECKING:
    from gateway.agent.tools.quota import TurnBudget

__all__ = ["Job", "Runner"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Job:
    """A command to run: for whom, where, and on whose word."""

    person_id: str
    workspace: Path
    command: str
    cwd: str
    network: bool
    timeout: float | None
    approved_by: str
    code: str = ""


class Runner:
    """Runs jobs in the sandbox and records them."""

    def __init__(self, sandbox: SandboxGate, store: ApprovalStore, clock: Clock) -> None:
        """`sandbox`: the gate that opens it beside the first poll (gate.py)."""
        self.gate = sandbox
        self.store = store
        self.clock = clock

    def start(self) -> None:
        """Begin probing the sandbox in the background (the tool is offered once it works)."""
        self.gate.start()

    async def close(self) -> None:
        """Close the sandbox (its threads, runtime files, cgroups), after a running probe."""
        await self.gate.close()

    async def _sandbox(self) -> Sandbox:
        try:
            return await self.gate.opened()
        except SandboxUnavailable as exc:  # never anywhere else instead
            raise SandboxRefused(f"the sandbox cannot run here: {exc}") from None

    async def run(self, job: Job, budget: TurnBudget | None = None) -> RunResult:
        """Run `job`; SandboxRefused (a directory outside the workspace, a link at a
        protected name), a sandbox that cannot run here and a full workspace raise before
        anything runs."""
        room = None
        if budget is not None:
            room = budget.disk_room(job.workspace, "", wanted=1)
            if room.bytes <= 0:
                budget.no_room(room)
                raise SandboxRefused(
                    "the workspace is at its quota ([tools] "
                    "workspace_max_bytes): nothing may be added by a command"
                )
        sandbox = await self._sandbox()
        result = await sandbox.run(
            RunRequest(
                job.workspace,
                job.command,
                job.cwd,
                network=job.network,
                timeout=job.timeout,
                disk_budget_bytes=room.bytes if room is not None else None,
            )
        )
        if budget is not None:
            budget.wrote(
                job.workspace, "", authored=result.workspace_growth, growth=result.workspace_growth
            )
        try:
            await self.store.record_run(
                RunRecord(
                    job.person_id,
                    job.command,
                    job.cwd,
                    job.network,
                    job.approved_by,
                    result.exit_code,
                    result.ended,
                    result.duration,
                    result.output.total_bytes,
                    self.clock.now().timestamp(),
                    job.code,
                )
            )
        except Exception:  # the record is bookkeeping: the result still reaches the model
            log.exception("could not record the run of a command for %s", job.person_id)
        return result
