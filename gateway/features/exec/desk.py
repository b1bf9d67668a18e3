"""Approvals in the chat: ask the owner, take their answer, run what they approved.

A command that needs the owner's word becomes a row (approvals_store.py) and a question in
the owner's DM: the exact command, its directory, whether it has the network, and three
answers, as buttons where the channel has them (Telegram's inline keyboard, Discord's
components) and always as text (`/approve CODE`, `/approve CODE always`, `/deny CODE`), so
it can be answered anywhere the owner writes from, the terminal chat included.

Who decides: only an account that routes to the owner (identity links join accounts);
anyone else's press or `/approve` is refused, logged, and changes nothing.

The turn that asked waits for the answer (`wait`), up to `[exec] wait_seconds`, without
holding any other chat: the answer comes through a button press (handled as the update
arrives, outside every lane) or a command answered at once (its own lane). Past that the
turn ends saying the request is pending; an answer that comes later (also after a restart
or a kill -9: the row is durable) runs the command here and posts the result in the chat
that asked, through the outbox, once (its key names the approval). Before any approved
command runs, its binding (binding.py) is computed again: if the command, directory, network
flag or a script it runs changed since the owner saw it, it is not run and the owner is
asked again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol

from channels.base import Channel, Choice, InboundMessage
from gateway.clock import Clock
from gateway.features.exec.approvals_store import (
    Approval,
    ApprovalStore,
    new_code,
    normal_code,
)
from gateway.features.exec.binding import approval_binding
from gateway.features.exec.runner import Job, Runner
from gateway.features.exec.sandbox import RunResult, SandboxRefused

if TYPE_CHECKING:
    from gateway.agent.tools.quota import TurnBudget

__all__ = ["CHANGED", "ApprovalDesk", "DeskHost", "Verb", "question_text"]

log = logging.getLogger(__name__)

Verb = Literal["once", "always", "deny"]
PRESS_PREFIX = "exec:"
_SWEEP_SECONDS = 30.0
CHANGED = "Not run: a file the command runs"
_SHOWN_COMMAND_CHARS = 1500


class DeskHost(Protocol):
    """What the desk needs of the gateway (gateway/pipeline/gateway.py implements it)."""

    async def person_for(self, channel: str, sender_id: str) -> str: ...

    def channel(self, name: str) -> Channel | None: ...

    async def deliver(
        self, channel: str, chat_id: str, text: str, *, key: str | None = None
    ) -> object: ...

    async def owner_dm(self) -> tuple[str, str] | None: ...

    async def commit(
        self, workspace: Path, reason: str, *, session: str = "", note: str = ""
    ) -> str | None: ...


@dataclass(frozen=True, slots=True)
class Decided:
    """What a decision did, for the one who pressed or typed."""

    ok: bool
    text: str  # the answer to the presser
    shown: str = ""  # the question's message as it should read now ("" leaves it)


def question_text(approval: Approval, person_name: str) -> str:
    """The question as the owner reads it: everything the approval is bound to."""
    command = approval.command
    if len(command) > _SHOWN_COMMAND_CHARS:
        command = command[:_SHOWN_COMMAND_CHARS] + f"... ({len(approval.command)} characters)"
    who = person_name if person_name else "you"
    network = "yes (public addresses only)" if approval.network else "no"
    return (
        f"Run this command for {who}? (code {approval.code})\n\n{command}\n\n"
        f"directory: /workspace/{'' if approval.cwd == '.' else approval.cwd}\n"
        f"network: {network}\n\n"
        f"Answer with the choices below, or type /approve {approval.code} (once), "
        f"/approve {approval.code} always (this exact command from now on) or "
        f"/deny {approval.code}."
    )


def choices(code: str) -> list[Choice]:
    return [
        Choice("Run once", f"{PRESS_PREFIX}once:{code}"),
        Choice("Always allow", f"{PRESS_PREFIX}always:{code}"),
        Choice("Deny", f"{PRESS_PREFIX}deny:{code}"),
    ]


def parse_press(data: str) -> tuple[Verb, str] | None:
    if not data.startswith(PRESS_PREFIX):
        return None
    verb, _, code = data[len(PRESS_PREFIX) :].partition(":")
    if verb not in ("once", "always", "deny") or not code:
        return None
    return verb, normal_code(code)  # type: ignore[return-value]


class ApprovalDesk:
    """The pending approvals of one gateway: asks, waits, decides, runs late answers."""

    def __init__(
        self,
        store: ApprovalStore,
        runner: Runner,
        host: DeskHost,
        clock: Clock,
        *,
        owner: str,
        expiry_seconds: float,
    ) -> None:
        self.store = store
        self.runner = runner
        self.host = host
        self.clock = clock
        self.owner = owner
        self.expiry_seconds = expiry_seconds
        self._waiting: dict[str, list[asyncio.Future[str]]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._sweeper: asyncio.Task[None] | None = None
        self.refused_presses = 0

    def _now(self) -> float:
        return self.clock.now().timestamp()

    # -- lifecycle --------------------------------------------------------------------------

    async def settled(self) -> None:
        """Until the sandbox's probe has answered (started here if it was not): the exec tool
        is offered from then on where it passed."""
        await self.runner.gate.settled()

    async def start(self) -> None:
        """Take up what a stopped process left: questions not shown yet, approvals not run
        yet, runs cut off (reported as such). The sandbox's probe starts here, beside the
        first poll; a run approved before the restart waits for its answer."""
        self.runner.start()
        await self._expire()
        for approval in await self.store.interrupted():
            await self._post(
                approval,
                f"The command `{_short(approval.command)}` (code "
                f"{approval.code}) was cut off by a restart of the gateway while "
                "it ran; it was not run again. Ask for it again if it is still "
                "needed.",
                "interrupted",
            )
        for approval in await self.store.approved_unclaimed():
            self._spawn(self._run_late(approval))
        for approval in await self.store.pending():
            if not approval.request_channel:
                await self._show(approval)
        self._sweeper = asyncio.create_task(self._sweep(), name="exec-approvals-expiry")

    async def stop(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
            await asyncio.gather(self._sweeper, return_exceptions=True)
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for futures in self._waiting.values():
            for future in futures:
                future.cancel()
        await self.runner.close()

    def _spawn(self, work: Awaitable[None]) -> None:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # -- asking -----------------------------------------------------------------------------

    async def ask(
        self,
        *,
        person_id: str,
        workspace: Path,
        session_key: str,
        channel: str,
        chat_id: str,
        command: str,
        cwd: str,
        network: bool,
        timeout: float | None,
        digest: str,
        message_id: str = "",
    ) -> Approval:
        """The pending request for this binding from this session (a turn run again after a
        restart finds the one it made), or a new one, shown to the owner."""
        now = self._now()
        existing = await self.store.pending_for(session_key, digest, now)
        if existing is not None:
            return existing
        approval = Approval(
            new_code(),
            person_id,
            str(workspace),
            session_key,
            channel,
            chat_id,
            command,
            cwd,
            network,
            timeout,
            digest,
            "pending",
            False,
            now,
            now + self.expiry_seconds,
            message_id=message_id,
        )
        await self.store.add(approval)
        return await self._show(approval)

    async def _show(self, approval: Approval) -> Approval:
        """Put the question in the owner's DM (buttons where the channel has them)."""
        route = await self.host.owner_dm()
        if route is None:
            log.warning("exec approval %s: the owner has no DM to ask in yet", approval.code)
            return approval
        channel_name, chat_id = route
        text = question_text(
            approval, "" if approval.person_id == self.owner else approval.person_id
        )
        channel = self.host.channel(channel_name)
        message_id = ""
        if channel is not None and channel.buttons:
            try:
                message_id = await channel.send_choices(chat_id, text, choices(approval.code))
            except Exception as exc:
                log.warning(
                    "exec approval %s: buttons could not be sent (%s); asking in text",
                    approval.code,
                    exc,
                )
        if not message_id:
            await self.host.deliver(channel_name, chat_id, text, key=f"exec-ask:{approval.code}")
        await self.store.shown(approval.code, channel_name, chat_id, message_id)
        return replace(
            approval, request_channel=channel_name, request_chat=chat_id, request_message=message_id
        )

    async def wait(self, code: str, seconds: float) -> str:
        """The approval's status once decided, or "pending" after `seconds`."""
        approval = await self.store.get(code)
        if approval is None:
            return "gone"
        if approval.status != "pending":
            return approval.status
        left = min(seconds, approval.expires_at - self._now())
        if left <= 0:
            await self._expire()
            current = await self.store.get(code)
            return current.status if current else "gone"
        future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(code, []).append(future)
        try:
            return await asyncio.wait_for(future, left)
        except TimeoutError:
            current = await self.store.get(code)
            if (
                current is not None
                and current.status == "pending"
                and current.expires_at <= self._now()
            ):
                await self._expire()
                return "expired"
            return current.status if current is not None else "gone"
        finally:
            futures = self._waiting.get(code, [])
            with contextlib.suppress(ValueError):
                futures.remove(future)
            if not futures:
                self._waiting.pop(code, None)

    # -- deciding ---------------------------------------------------------------------------

    async def is_owner(self, channel: str, sender_id: str) -> bool:
        return await self.host.person_for(channel, sender_id) == self.owner

    async def decide(self, code: str, verb: Verb, channel: str, sender_id: str) -> Decided:
        """The owner's answer to request `code`, from the account `sender_id` on `channel`."""
        code = normal_code(code)
        if not await self.is_owner(channel, sender_id):
            self.refused_presses += 1
            log.warning(
                "exec approval %s: %s account %s is not the owner's; its %r was refused",
                code,
                channel,
                sender_id,
                verb,
            )
            return Decided(False, "Only the owner of this assistant can answer this.")
        approval = await self.store.get(code)
        if approval is None:
            return Decided(False, f"There is no command waiting with the code {code}.")
        if approval.status == "pending" and approval.expires_at <= self._now():
            await self._expire()
            approval = await self.store.get(code) or approval
        if approval.status != "pending":
            return Decided(
                False,
                f"The command with the code {code} was already {_said(approval.status)}.",
                _outcome(approval, approval.status),
            )
        who = f"{channel}:{sender_id}"
        status = "denied" if verb == "deny" else "approved"
        if not await self.store.decide(code, status, who, self._now(), always=verb == "always"):
            current = await self.store.get(code) or approval
            return Decided(
                False, f"The command with the code {code} was already {_said(current.status)}."
            )
        decided = replace(approval, status=status, decided_by=who, always=verb == "always")
        if verb == "always":
            await self.store.allow_always(decided, who, self._now())
        log.info("exec approval %s %s by %s", code, status, who)
        if not self._wake(code, status) and status == "approved":
            self._spawn(self._run_late(decided))
        if status == "denied" and code not in self._waiting:
            await self.store.finish(code, "denied-late")  # no turn was told: a resumed one is
            await self._post(
                decided,
                f"The owner denied the command `{_short(decided.command)}`"
                f" (code {code}); it did not run.",
                "denied",
            )
        answer = {
            "once": "Approved: it runs once.",
            "always": "Approved: this exact command runs from now on without asking.",
            "deny": "Denied: it does not run.",
        }[verb]
        return Decided(True, answer, _outcome(decided, status))

    def _wake(self, code: str, status: str) -> bool:
        woken = False
        for future in self._waiting.get(code, []):
            if not future.done():
                future.set_result(status)
                woken = True
        return woken

    async def pressed(self, msg: InboundMessage) -> None:
        """A button press (`msg.press`); answered on the platform (a toast, the question
        edited to say what became of it)."""
        parsed = parse_press(msg.press)
        channel = self.host.channel(msg.channel)
        if parsed is None:
            log.info("ignored a press on %s with unknown data", msg.channel)
            if channel is not None:
                await _settle(channel, msg, "This button does nothing any more.", "")
            return
        verb, code = parsed
        decided = await self.decide(code, verb, msg.channel, msg.sender_id)
        if channel is not None:
            await _settle(channel, msg, decided.text, decided.shown)

    async def typed(self, channel: str, sender_id: str, name: str, args: str) -> str:
        """`/approve CODE [always]` or `/deny CODE`: the answer line."""
        words = args.split()
        if not words:
            return f"Usage: /{name} CODE" + (" [always]" if name == "approve" else "")
        verb: Verb = (
            "deny"
            if name == "deny"
            else ("always" if len(words) > 1 and words[1].lower() == "always" else "once")
        )
        decided = await self.decide(words[0], verb, channel, sender_id)
        return decided.text

    # -- late answers -----------------------------------------------------------------------

    async def _run_late(self, approval: Approval) -> None:
        """An approval no turn waits for: run it (if still what was approved), post the
        result in the chat that asked, commit what it wrote."""
        try:
            text = await self.run_approved(approval, budget=None, for_person=True)
            if text.startswith("The command approved"):
                await self.store.finish(approval.code, "posted")  # ran with no turn waiting
        except Exception:
            log.exception("exec approval %s: the late run failed", approval.code)
            text = (
                f"The approved command `{_short(approval.command)}` (code "
                f"{approval.code}) could not be run (see the gateway's log)."
            )
        await self._post(approval, text, "result")
        with contextlib.suppress(Exception):
            await self.host.commit(
                Path(approval.workspace),
                "exec",
                session=approval.session_key,
                note=f"command {approval.code}",
            )

    async def run_approved(
        self, approval: Approval, budget: TurnBudget | None, *, for_person: bool = False
    ) -> str:
        """Claim and run an approved request; the text for the model (`for_person`: for the
        chat, no model in between). Asks again (and says so) when what it is bound to
        changed since the owner saw it."""
        if not await self.store.claim(approval.code):
            return f"The command with the code {approval.code} was already run."
        workspace = Path(approval.workspace)
        now_bound = await asyncio.to_thread(
            approval_binding, approval.command, approval.cwd, approval.network, workspace
        )
        if now_bound.digest != approval.digest:
            await self.store.finish(approval.code, "changed")
            again = await self.ask(
                person_id=approval.person_id,
                workspace=workspace,
                session_key=approval.session_key,
                channel=approval.channel,
                chat_id=approval.chat_id,
                command=approval.command,
                cwd=approval.cwd,
                network=approval.network,
                timeout=approval.timeout,
                digest=now_bound.digest,
                message_id=approval.message_id,
            )
            return (
                f"{CHANGED} (or its directory) changed after the "
                f"owner approved it, so the owner was asked again (code {again.code})."
            )
        job = Job(
            approval.person_id,
            workspace,
            approval.command,
            approval.cwd,
            approval.network,
            approval.timeout,
            approval.decided_by,
            approval.code,
        )
        try:
            result = await self.runner.run(job, budget)
        except SandboxRefused as exc:
            await self.store.finish(approval.code, "refused")
            return f"Not run: {exc}"
        await self.store.finish(approval.code)
        if for_person:
            return _for_person(approval, result)
        return (
            f"command (code {approval.code}, approved by the owner): "
            f"{_short(approval.command)}\n" + result.for_model()
        )

    async def _post(self, approval: Approval, text: str, what: str) -> None:
        """A message about `approval` in the chat that asked (once: keyed)."""
        try:
            await self.host.deliver(
                approval.channel, approval.chat_id, text, key=f"exec-{what}:{approval.code}"
            )
        except Exception:
            log.exception("exec approval %s: could not post the %s", approval.code, what)

    # -- expiry -----------------------------------------------------------------------------

    async def _expire(self) -> None:
        for code in await self.store.expire(self._now()):
            self._wake(code, "expired")
            approval = await self.store.get(code)
            if approval is not None:
                await self._edit_question(approval, _outcome(approval, "expired"))

    async def _edit_question(self, approval: Approval, text: str) -> None:
        channel = self.host.channel(approval.request_channel)
        if channel is None or not approval.request_message:
            return
        with contextlib.suppress(Exception):
            await channel.settle_choices(approval.request_chat, approval.request_message, text)

    async def _sweep(self) -> None:
        while True:
            await asyncio.sleep(_SWEEP_SECONDS)
            try:
                await self._expire()
            except Exception:
                log.exception("exec approvals: the expiry sweep failed")


async def _settle(channel: Channel, msg: InboundMessage, answer: str, shown: str) -> None:
    try:
        await channel.answer_press(msg, answer, shown)
    except Exception as exc:
        log.warning("could not answer a press on %s: %s", msg.channel, exc)


def _for_person(approval: Approval, result: RunResult) -> str:
    """A late result as the person reads it in the chat: what ran, how it ended, the output
    (as kept: head and tail, binary summarised) in a code block."""
    status = "none" if result.exit_code is None else str(result.exit_code)
    lines = [
        f"The command approved with code {approval.code} ran: {_short(approval.command)}",
        f"exit status {status}, {result.duration:.2f} s"
        + (f", stopped: {result.ended}" if result.ended not in ("exited", "signal") else ""),
    ]
    output = result.output
    if output.saved_as:
        lines.append(f"The whole output ({output.total_bytes} bytes) is in {output.saved_as}.")
    fence = "`" * 3
    shown = output.shown.replace(fence, "'" * 3)
    lines.append(f"{fence}\n{shown}\n{fence}" if shown.strip() else "(no output)")
    return "\n".join(lines)


def _short(command: str, limit: int = 200) -> str:
    line = " ".join(command.split())
    return line if len(line) <= limit else line[:limit] + "..."


def _said(status: str) -> str:
    return {
        "approved": "approved",
        "denied": "denied",
        "expired": "expired (ask again)",
        "running": "approved and is running",
        "done": "approved and run",
        "posted": "approved and run",
        "denied-late": "denied",
        "changed": "approved, but changed before it ran",
        "interrupted": "cut off by a restart",
    }.get(status, status)


def _outcome(approval: Approval, status: str) -> str:
    """The question's message once answered: the command, and what became of it."""
    head = {
        "approved": "Approved" + (" (always)" if approval.always else " (once)"),
        "denied": "Denied",
        "expired": "Expired: not answered in time",
    }.get(status, _said(status).capitalize())
    return f"{head}: {_short(approval.command, 500)} (code {approval.code})"
