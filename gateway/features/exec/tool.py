"""The `exec` tool: run a shell command in the person's sandbox, asking the owner when needed.

Named `exec` as the issue proposed: it is what the model is used to calling a shell (OpenClaw
and Hermes name theirs so), and the name says it runs something.

Who may (checked here, and the tool is only registered for private contexts):
- a private context only; groups never get the tool and it refuses there too;
- the owner's own workspace, or a person the owner listed in `[exec] people`;
- with someone present (a DM turn): whatever the mode allows, asking the owner when needed;
  without (a heartbeat, a reminder, tidying): only commands that need no one's word
  (the allowlist, or "always allow" for that exact binding).

When: `mode = "off"` runs everything; `"allowlist"` runs commands matching `[exec] allow`
and asks for the rest; `"ask"` asks for everything not approved "always". An approval is
bound to the command, directory, network flag and scripts (binding.py) and checked again
just before the run (desk.py).

The result (exit status, duration, what ended it, the output between unforgeable markers) is
outside text: the spec declares `untrusted_output`, so it taints the context like a web page.
"""

from __future__ import annotations

import asyncio
import posixpath
from typing import Any

from gateway.agent.conversation import ToolSpec
from gateway.agent.tools.base import ToolContext, ToolError
from gateway.config.exec import ExecSettings
from gateway.features.exec.allowlist import Allowlist
from gateway.features.exec.binding import approval_binding
from gateway.features.exec.desk import CHANGED, ApprovalDesk
from gateway.features.exec.runner import Job, Runner
from gateway.features.exec.sandbox import SandboxRefused
from gateway.features.exec.view import WORKSPACE
from memory.layout import is_task_session_key

__all__ = ["MAX_COMMAND_CHARS", "ExecTool"]

MAX_COMMAND_CHARS = 8000
_MAX_ASKS = 3  # a script changing under every approval: ask at most this often in a turn
# What a turn run again after a restart is told about the request its first run made.
_SETTLED = {  # statuses only a decision no turn waited for leaves behind
    "posted": "This command was approved (code {code}) and already ran after a restart of "
    "the gateway; its result was posted in this chat. Do not run it again.",
    "running": "This command was approved (code {code}) and is running; its result will be "
    "posted in this chat.",
    "approved": "This command was approved (code {code}) and runs now; its result will be "
    "posted in this chat.",
    "denied-late": "The owner denied this command (code {code}); it did not run.",
    "interrupted": "This command (code {code}) was cut off by a restart of the gateway while "
    "it ran; it was not run again.",
}


class ExecTool:
    """`exec(command, cwd, timeout)` in the person's sandbox."""

    def __init__(
        self,
        settings: ExecSettings,
        runner: Runner,
        desk: ApprovalDesk,
        *,
        owner: str,
        network_available: bool,
    ) -> None:
        self.settings = settings
        self.runner = runner
        self.desk = desk
        self.owner = owner
        self.allowlist = Allowlist(settings.allow)
        self.network_available = network_available
        limit = int(settings.wall_seconds)
        self.spec = ToolSpec(
            name="exec",
            description=(
                "Run a shell command (bash) in the person's sandbox: their workspace is at "
                "/workspace (read-write in folders, read-only at its top), the system is "
                "read-only, /tmp is private, there is no network unless the owner allowed "
                "it. Returns the exit status, the output (long output is saved as a workspace "
                "file) and the duration. The owner may have to approve the command first; "
                "if so, say that you asked and what for."
            ),
            parameters={
                "type": "object",
                "properties": {
                    "command": {"type": "string", "description": "e.g. 'ls -la notes'"},
                    "cwd": {
                        "type": "string",
                        "default": ".",
                        "description": "Directory inside the workspace, e.g. 'notes'.",
                    },
                    "timeout": {
                        "type": "number",
                        "minimum": 1,
                        "maximum": limit,
                        "default": limit,
                        "description": "Seconds.",
                    },
                },
                "required": ["command"],
                "additionalProperties": False,
            },
            untrusted_output=True,
        )

    def may_run(self, person_id: str) -> bool:
        return person_id == self.owner or person_id in self.settings.people

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> str:
        command = args["command"]
        if not ctx.private or ctx.area:
            raise ToolError("exec: commands run only in a direct message, never in a group")
        person = ctx.workspace.name
        if not self.may_run(person):
            raise ToolError(
                "exec: the owner has not allowed commands for this person ([exec] people)"
            )
        if not command.strip() or "\x00" in command:
            raise ToolError("exec: the command is empty")
        if len(command) > MAX_COMMAND_CHARS:
            raise ToolError(
                f"exec: the command is {len(command)} characters; keep it under "
                f"{MAX_COMMAND_CHARS} (write a script file and run that)"
            )
        cwd = _cwd(args.get("cwd", "."))
        timeout = float(args.get("timeout") or self.settings.wall_seconds)
        network = person in self.settings.network and self.network_available
        binding = await asyncio.to_thread(approval_binding, command, cwd, network, ctx.workspace)
        approved_by = await self._without_asking(person, command, cwd, binding.digest)
        if approved_by is None:
            if not ctx.attended:
                raise ToolError(
                    "exec: not run: this command needs the owner's approval and no one is "
                    "here to give it (heartbeats and reminders run only commands on the "
                    "[exec] allow list, or ones the owner allowed always)"
                )
            return await self._ask_and_run(
                ctx, person, command, cwd, network, timeout, binding.digest
            )
        job = Job(person, ctx.workspace, command, cwd, network, timeout, approved_by)
        try:
            result = await self.runner.run(job, ctx.budget)
        except SandboxRefused as exc:
            raise ToolError(f"exec: not run: {exc}") from None
        return result.for_model()

    async def _without_asking(self, person: str, command: str, cwd: str, digest: str) -> str | None:
        """Who lets this run without a question ("mode off", "allowlist", "always"), or None."""
        mode = self.settings.mode
        if mode == "off":
            return "mode off"
        where = WORKSPACE if cwd == "." else f"{WORKSPACE}/{cwd}"
        if mode == "allowlist" and self.allowlist.decide(command, where).allowed:
            return "allowlist"
        if await self.desk.store.always_allowed(person, digest):
            return "always"
        return None

    async def _ask_and_run(
        self,
        ctx: ToolContext,
        person: str,
        command: str,
        cwd: str,
        network: bool,
        timeout: float,
        digest: str,
    ) -> str:
        outbox = ctx.outbox
        channel, chat, message = (
            (outbox.channel, outbox.chat_id, outbox.message_id) if outbox else ("", "", "")
        )
        # A turn run again after a restart (the same message) asks nothing twice: what its
        # first run asked was answered meanwhile, and a command it ran is not run again. (In
        # a turn that waited for its answer, the same command may be asked for again.)
        earlier = await self.desk.store.for_message(ctx.session_key, message, command, cwd, network)
        if earlier is not None and earlier.status in _SETTLED:
            return _SETTLED[earlier.status].format(code=earlier.code)
        for _ in range(_MAX_ASKS):
            approval = await self.desk.ask(
                person_id=person,
                workspace=ctx.workspace,
                session_key=ctx.session_key,
                channel=channel,
                chat_id=chat,
                command=command,
                cwd=cwd,
                network=network,
                timeout=timeout,
                digest=digest,
                message_id=message,
            )
            if not approval.request_channel:
                return (
                    f"Could not ask the owner to approve this command (code "
                    f"{approval.code}): they have no direct message with the assistant "
                    "yet. It runs if they answer /approve " + approval.code + " from "
                    "their account; tell the person it is waiting for the owner."
                )
            # A chat turn waits a while and moves on (a late approval posts the result in
            # the chat); a background task has time: it waits as long as the request lives
            # (its own deadline still ends it).
            waits = (
                self.settings.approval_seconds
                if is_task_session_key(ctx.session_key)
                else self.settings.wait_seconds
            )
            status = await self.desk.wait(approval.code, waits)
            if status == "pending":
                return (
                    f"Asked the owner to approve this command (code {approval.code}); "
                    "no answer yet. It runs when they approve it, and its result will be "
                    "posted in this chat. Tell the person it is waiting for approval."
                )
            if status == "denied":
                return f"The owner denied this command (code {approval.code}); it did not run."
            if status == "expired":
                return (
                    f"The request to approve this command (code {approval.code}) expired "
                    "unanswered; it did not run."
                )
            if status != "approved":
                return f"The command (code {approval.code}) was {status}; it did not run here."
            current = await self.desk.store.get(approval.code)
            if current is None:
                return "The approval disappeared; the command did not run."
            text = await self.desk.run_approved(current, ctx.budget)
            if not text.startswith(CHANGED):
                return text
            digest = (
                await asyncio.to_thread(approval_binding, command, cwd, network, ctx.workspace)
            ).digest
        return "The command kept changing between approvals; it did not run."


def _cwd(value: object) -> str:
    """A workspace-relative directory ("." for the top); ToolError for one outside."""
    text = str(value or ".").strip()
    if text == WORKSPACE or text.startswith(WORKSPACE + "/"):
        text = text[len(WORKSPACE) :].lstrip("/") or "."
    if text.startswith("/"):
        raise ToolError(
            f"exec: the directory must be inside the workspace ({WORKSPACE}), not {text[:100]!r}"
        )
    normal = posixpath.normpath(text)
    if normal == ".." or normal.startswith("../"):
        raise ToolError("exec: the directory must be inside the workspace")
    return normal
