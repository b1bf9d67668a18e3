"""PanelHost: the panel's one door into the running gateway's parts.

Pages and actions ask this adapter and nothing else, so the panel calls the very functions the
CLI calls (Pairing.approve, Versioning.undo, link_accounts, the slash commands' compact and
reset, the heartbeat's beat) on the live objects of `clawgate run`: the same state database
connection, the same versioning locks, the same session lanes (a compaction from the panel
waits for a running turn like /compact does).
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo

from gateway.ops.versioning import Change, Commit
from gateway.pipeline.links import LinkResult, link_accounts
from gateway.pipeline.pairing import Pairing, PairingRequest
from gateway.pipeline.routing import Route
from gateway.workspace.seed import SEEDED_MARKER, SESSIONS_DIR, WorkspaceError, workspace_path
from memory.layout import (
    dm_session_key,
    group_area,
    heartbeat_session_key,
    parse_group_session_key,
)

if TYPE_CHECKING:
    from gateway.agent.tools.schedule_tools import ScheduleDesk
    from gateway.pipeline.budgets import CapStatus
    from gateway.pipeline.ports import PanelParts
    from gateway.stores.tasks import Task
    from gateway.stores.usage import UsageLedger
    from heartbeat import BeatOutcome
    from memory.search import SearchResponse
    from scheduler import JobView

PANEL_CHANNEL = "panel"


class PanelError(Exception):
    """An action the panel cannot do as asked; `str()` is the line to show."""


class UnknownPerson(LookupError):
    """No workspace by that name (or not one this login may see)."""


@dataclass(frozen=True, slots=True)
class Person:
    person_id: str
    workspace: Path
    sessions: int
    last_activity: float | None  # newest transcript mtime
    name: str = ""  # what the panel calls them ("" : their id; gateway/panel/names.py)


NAMES_FRESH_SECONDS = 5.0  # the approved accounts' names are read again after this


class PanelHost:
    """The panel's view of the running gateway: its parts, as `PanelParts` shows them."""

    def __init__(self, parts: PanelParts, *, started: bool = True) -> None:
        self.parts = parts
        self.settings, self.clock = parts.settings, parts.clock
        self.root = Path(self.settings.workspaces_dir)
        self.started = started
        # The parts the CLI's commands use too: the same calls on the same objects.
        self.state, self.versioning = parts.state, parts.versioning
        self.pairing = Pairing(self.state, self.clock)
        self._account_names: dict[str, str] = {}  # person id -> platform display name
        self.sender_names: dict[tuple[str, str], str] = {}  # (channel, sender id) -> name
        self._names_read_at: float | None = None

    def now(self) -> datetime:
        return self.clock.now()

    def channel_names(self) -> frozenset[str]:
        """The channels this gateway runs (the terminal chat alone: `clawgate chat`)."""
        return self.parts.routes.channel_names()

    @property
    def usage(self) -> UsageLedger:
        """The usage ledger (gateway/stores/usage.py) the usage page reads."""
        return self.parts.usage

    async def budget_status(self, person: str) -> list[CapStatus]:
        return await self.parts.budgets.status(person)

    # --- people --------------------------------------------------------------------------

    def person_ids(self) -> list[str]:
        try:
            entries = sorted(os.scandir(self.root), key=lambda e: e.name)
        except OSError:
            return []
        return [
            e.name
            for e in entries
            if not e.name.startswith(".")
            and e.is_dir()
            and os.path.exists(os.path.join(e.path, SEEDED_MARKER))
        ]

    def workspace(self, person_id: str) -> Path:
        """The person's workspace directory, or UnknownPerson (never a path outside the root)."""
        try:
            path = workspace_path(self.root, person_id)
        except WorkspaceError as exc:
            raise UnknownPerson(person_id) from exc
        if not (path / SEEDED_MARKER).exists():
            raise UnknownPerson(person_id)
        return path

    def people(self, ids: list[str]) -> list[Person]:
        people = []
        for person_id in ids:
            workspace = self.root / person_id
            newest: float | None = None
            count = 0
            try:
                with os.scandir(workspace / SESSIONS_DIR) as entries:
                    for entry in entries:
                        if entry.name.endswith(".jsonl"):
                            count += 1
                            mtime = entry.stat().st_mtime
                            newest = mtime if newest is None else max(newest, mtime)
            except OSError:
                pass
            people.append(Person(person_id, workspace, count, newest, self.display_name(person_id)))
        return people

    async def refresh_names(self) -> None:
        """Read the names approved accounts came with (pairing requests; links say whose
        account it is), at most every NAMES_FRESH_SECONDS."""
        import time

        from gateway.panel.names import clean_name
        from gateway.pipeline.routing import person_id_for

        now = time.monotonic()
        if not self.state.is_open or (
            self._names_read_at is not None and now - self._names_read_at < NAMES_FRESH_SECONDS
        ):
            return
        self._names_read_at = now
        rows = await self.state.pairing.approved_names()
        linked = {(channel, sender): person for person, channel, sender in await self.links()}
        names: dict[str, str] = {}
        senders: dict[tuple[str, str], str] = {}
        for channel, sender, name in rows:
            account = (str(channel), str(sender))
            person = linked.get(account) or person_id_for(*account, self.settings.owner)
            if clean_name(str(name or "")):
                names[person] = senders[account] = clean_name(str(name))  # newest wins
        self._account_names, self.sender_names = names, senders

    def display_name(self, person_id: str) -> str:
        """The person's name, or "" when none is known (their id is shown then)."""
        from gateway.panel.names import name_in_user_file

        try:
            workspace = self.workspace(person_id)
        except UnknownPerson:
            return ""
        return name_in_user_file(workspace) or self._account_names.get(person_id, "")

    # --- readiness, metrics ----------------------------------------------------------------

    async def readiness(self) -> dict[str, Any]:
        from gateway.pipeline.health import readiness

        return await readiness(self.parts, self.started)

    def counters(self) -> dict[str, dict[str, float]]:
        """The gateway's counters since start (metric -> label values -> value)."""
        m = self.parts.metrics
        picked = {
            "turns": m.turns,
            "tokens": m.tokens,
            "heartbeats": m.heartbeats,
            "deliveries": m.deliveries,
            "commits": m.commits,
            "provider errors": m.provider_errors,
            "tool calls": m.tool_calls,
        }
        return {
            title: {"/".join(key) or "all": value for _, key, value in metric.samples()}
            for title, metric in picked.items()
        }

    # --- pairing, approvals, links (same calls as `clawgate pairing` / `users`) -----------

    async def pending_pairing(self) -> list[PairingRequest]:
        if not self.state.is_open:
            return []
        return await self.pairing.pending()

    async def approve(self, channel: str, code: str) -> PairingRequest:
        return await self.pairing.approve(channel, code)

    async def deny(self, channel: str, code: str) -> PairingRequest:
        return await self.pairing.deny(channel, code)

    async def approved(self) -> list[tuple[str, str, str, str]]:
        return await self.state.access.approved() if self.state.is_open else []

    async def revoke(self, channel: str, sender_id: str) -> bool:
        from gateway.pipeline.pairing import Pairing

        return await Pairing(self.state).revoke(channel, sender_id)

    async def links(self) -> list[tuple[str, str, str]]:
        return await self.state.links.all() if self.state.is_open else []

    async def link(self, items: list[str]) -> LinkResult:
        return await link_accounts(self.state, self.root, self.settings.owner, items)

    # --- versioning (same calls as `clawgate memory log|diff|undo`) ------------------------

    @property
    def versioning_on(self) -> bool:
        return self.versioning.enabled

    async def history(self, person_id: str, limit: int = 30) -> list[Commit]:
        workspace = self.workspace(person_id)
        versioning = self.versioning
        await versioning.commit(workspace, "hand edit", note="noticed by the panel")
        return await versioning.log(workspace, limit=limit)

    async def diff(self, person_id: str, rev: str) -> str:
        return await self.versioning.diff(self.workspace(person_id), rev)

    async def undo(self, person_id: str, rev: str) -> list[Change]:
        return await self.versioning.undo(self.workspace(person_id), rev)

    async def commit_edit(self, person_id: str, path: str) -> str | None:
        return await self.versioning.commit(
            self.workspace(person_id), "panel edit", note=f"{path} saved in the web panel"
        )

    async def commit_hand_edits(self, person_id: str) -> None:
        await self.versioning.commit(
            self.workspace(person_id), "hand edit", note="found before a panel edit"
        )

    # --- sessions (same calls as /compact and /new) ----------------------------------------

    def _route(self, person_id: str, key: str) -> Route:
        """The route a session command runs with: private for the person's own DM and
        heartbeat sessions; a group's session keeps its group area (memory.layout)."""
        workspace = self.workspace(person_id)
        if key in (dm_session_key(person_id), heartbeat_session_key(person_id)):
            return Route(person_id, workspace, key, True, PANEL_CHANNEL, "")
        group = parse_group_session_key(key)
        if group is None:
            raise PanelError(f"{key} is not a session the panel can change")
        channel, chat_id = group
        return Route(
            person_id, workspace, key, False, channel, chat_id, area=group_area(channel, chat_id)
        )

    async def compact(self, person_id: str, key: str) -> str:
        from gateway.pipeline.commands import Command

        return await self._in_lane(person_id, key, Command("compact", ""))

    async def reset(self, person_id: str, key: str) -> str:
        from gateway.pipeline.commands import Command

        return await self._in_lane(person_id, key, Command("new", ""))

    async def _in_lane(self, person_id: str, key: str, command: Any) -> str:
        """Run a session command in the session's lane, behind any running turn."""
        from gateway.pipeline.commands import run_command

        route = self._route(person_id, key)
        answer: list[str] = []

        async def job() -> None:
            from gateway.agent.scope import usage_scope

            ctx = self.parts.commands.for_route(route, command.args)
            with usage_scope(person_id, "conversation"):  # a compaction's model calls
                answer.append(await run_command(ctx, command))

        await self.parts.lanes.submit(key, job)
        return answer[0] if answer else ""

    # --- memory search, heartbeat ----------------------------------------------------------

    @property
    def memory_on(self) -> bool:
        return self.parts.memory is not None

    async def search(self, person_id: str, query: str, limit: int = 10) -> SearchResponse:
        memory = self.parts.memory
        if memory is None:
            raise PanelError("memory search is off ([memory] enabled = false)")
        return await memory.search(self.workspace(person_id), query, max_results=limit)

    async def beat_now(self, person_id: str) -> BeatOutcome:
        from gateway.features.heartbeat_host import beat_now

        return await beat_now(self.parts, person_id, self.workspace(person_id))

    def heartbeat_policy(self, person_id: str) -> Any:
        from gateway.features.heartbeat_host import policy_for

        return policy_for(self.settings, person_id)

    # --- reminders (the desk the schedule tools and `/reminders` use) ----------------------

    @property
    def reminders_on(self) -> bool:
        return self.parts.schedule_desk is not None

    def zone(self, person_id: str) -> ZoneInfo:
        return self.settings.zone_of(person_id)

    async def reminders(self, person_id: str) -> tuple[list[JobView], list[str]]:
        """The person's jobs (as `clawgate schedule list` reads them) and the file's problems;
        ScheduleFileError when the file cannot be read at all."""
        from scheduler import list_jobs

        workspace = self.workspace(person_id)
        return await asyncio.to_thread(list_jobs, workspace, self.zone(person_id))

    async def add_reminder(self, person_id: str, when: str, text: str, kind: str) -> str:
        """Through the desk the assistant's schedule tool calls (the running scheduler
        reloads at once), then committed as a "schedule" change like `clawgate schedule add`.
        ScheduleError (the time or text) / ScheduleFileError (the file) otherwise."""
        desk = self._desk()
        workspace = self.workspace(person_id)
        said = await desk.create(workspace, when, text, kind)
        await self.versioning.commit(
            workspace, "schedule", note=f"added in the web panel: {text!r}"
        )
        return said

    async def cancel_reminder(self, person_id: str, job_id: int) -> str:
        desk = self._desk()
        workspace = self.workspace(person_id)
        said = await desk.cancel(workspace, job_id)
        await self.versioning.commit(
            workspace, "schedule", note=f"cancelled in the web panel: #{job_id}"
        )
        return said

    def _desk(self) -> ScheduleDesk:
        desk = self.parts.schedule_desk
        if desk is None:
            raise PanelError("reminders are off ([scheduler] enabled = false)")
        return desk

    async def command_runs(self, person_id: str, limit: int = 100) -> tuple[list[Any], list[Any]]:
        """The person's recorded command runs (newest first) and their pending approvals
        (the exec tables: migration 10 of the state database)."""
        from gateway.features.exec.approvals_store import ApprovalStore

        store = ApprovalStore(self.state.database)
        runs = await store.runs(person_id, limit)
        pending = [a for a in await store.pending() if a.person_id == person_id]
        return runs, pending

    # --- background tasks (the same store `/tasks` and `clawgate tasks` use) -----------------

    @property
    def tasks_on(self) -> bool:
        return self.settings.tasks.enabled

    async def tasks(self, person_id: str, limit: int = 50) -> list[Task]:
        """The person's tasks: the active ones first, then the most recent."""
        self.workspace(person_id)
        return await self.state.tasks.list_for(person_id, limit) if self.state.is_open else []

    async def cancel_task(self, person_id: str, number: int, by: str) -> str:
        """Ask the gateway to stop task `number` (only the flag is written: the runner reads
        it between steps and on its poll, and the task's one report says it stopped); `by`
        is recorded as who asked. PanelError when there is no such task or it has finished
        already."""
        self.workspace(person_id)
        store = self.state.tasks
        if await store.request_cancel(person_id, number, by=by):
            return f"stopping task #{number}: its report will say when it has stopped"
        task = await store.by_number(person_id, number)
        if task is None:
            raise PanelError(f"there is no task #{number}")
        raise PanelError(f"task #{number} has already finished ({task.state})")

    async def to_thread(self, fn: Any, *args: Any) -> Any:
        return await asyncio.to_thread(fn, *args)
