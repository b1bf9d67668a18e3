"""The exec tables of the state database: pending approvals, "always allow", and every run.

Pending approvals are rows, not futures: they survive a restart or a kill -9, so a button
pressed afterwards still finds what it approves (gateway/features/exec/desk.py runs it then
and reports). A row moves `pending -> approved | denied | expired`, and an approved one is
claimed once (`approved -> running -> done`) by whoever runs it: the turn that asked, if it
still waits, else the desk. Every transition is one conditional UPDATE, so two presses, or a
press racing the expiry, decide once.

The tables are created by the state database's numbered migrations (migration 10,
gateway/stores/migrations.py); this store reads and writes them through the one writer and
touches no other table.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Any

from gateway.stores.database import StateDatabase

__all__ = ["Approval", "ApprovalStore", "RunRecord"]

CODE_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"  # no 0/O, 1/I: read aloud, typed back
CODE_LENGTH = 6

_COLUMNS = (
    "code, person_id, workspace, session_key, channel, chat_id, command, cwd, network,"
    " timeout, digest, status, always, created_at, expires_at, decided_by,"
    " request_channel, request_chat, request_message, message_id"
)


def new_code() -> str:
    return "".join(secrets.choice(CODE_ALPHABET) for _ in range(CODE_LENGTH))


def normal_code(text: str) -> str:
    return "".join(text.split()).replace("-", "").upper()


@dataclass(frozen=True, slots=True)
class Approval:
    """One request for the owner's decision, and where its answer goes."""

    code: str
    person_id: str
    workspace: str
    session_key: str
    channel: str  # the chat that asked: where a late result is posted
    chat_id: str
    command: str
    cwd: str
    network: bool
    timeout: float | None
    digest: str  # the binding's (binding.py) when asked
    status: str
    always: bool
    created_at: float
    expires_at: float
    decided_by: str = ""
    request_channel: str = ""  # where the question was shown (the owner's DM)
    request_chat: str = ""
    request_message: str = ""  # its platform message (buttons), "" for none
    message_id: str = ""  # the message whose turn asked ("" for none)

    @classmethod
    def from_row(cls, row: Any) -> Approval:
        (
            code,
            person,
            workspace,
            session,
            channel,
            chat,
            command,
            cwd,
            network,
            timeout,
            digest,
            status,
            always,
            created,
            expires,
            decided_by,
            req_channel,
            req_chat,
            req_message,
            message_id,
        ) = tuple(row)
        return cls(
            code,
            person,
            workspace,
            session,
            channel,
            chat,
            command,
            cwd,
            bool(network),
            timeout,
            digest,
            status,
            bool(always),
            created,
            expires,
            decided_by,
            req_channel,
            req_chat,
            req_message,
            message_id,
        )


@dataclass(frozen=True, slots=True)
class RunRecord:
    person_id: str
    command: str
    cwd: str
    network: bool
    approved_by: str  # "allowlist", "always", "mode off", or the approver's account
    exit_code: int | None
    ended: str
    duration: float
    bytes_out: int
    at: float
    code: str = ""


class ApprovalStore:
    """Reads and conditional writes of the exec tables (the state database opens them)."""

    def __init__(self, db: StateDatabase) -> None:
        self.db = db

    async def add(self, approval: Approval) -> None:
        await self.db.write(
            f"INSERT INTO exec_approvals ({_COLUMNS}) VALUES"
            " (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                approval.code,
                approval.person_id,
                approval.workspace,
                approval.session_key,
                approval.channel,
                approval.chat_id,
                approval.command,
                approval.cwd,
                int(approval.network),
                approval.timeout,
                approval.digest,
                approval.status,
                int(approval.always),
                approval.created_at,
                approval.expires_at,
                approval.decided_by,
                approval.request_channel,
                approval.request_chat,
                approval.request_message,
                approval.message_id,
            ),
            durable=True,
        )

    async def get(self, code: str) -> Approval | None:
        rows = await self.db.rows(f"SELECT {_COLUMNS} FROM exec_approvals WHERE code = ?", (code,))
        return Approval.from_row(rows[0]) if rows else None

    async def pending_for(self, session_key: str, digest: str, now: float) -> Approval | None:
        """A request still pending for the same binding from the same session (a turn run
        again after a restart asks the same question: it waits on the first one)."""
        rows = await self.db.rows(
            f"SELECT {_COLUMNS} FROM exec_approvals WHERE session_key = ? AND digest = ?"
            " AND status = 'pending' AND expires_at > ? ORDER BY created_at DESC LIMIT 1",
            (session_key, digest, now),
        )
        return Approval.from_row(rows[0]) if rows else None

    async def for_message(
        self, session_key: str, message_id: str, command: str, cwd: str, network: bool
    ) -> Approval | None:
        """The newest request for this command made by the turn answering `message_id` (a
        turn run again after a restart answers the same message: it finds its own, even if
        what the command wrote since changed the files it is bound to)."""
        if not message_id:
            return None
        rows = await self.db.rows(
            f"SELECT {_COLUMNS} FROM exec_approvals WHERE session_key = ? AND message_id = ?"
            " AND command = ? AND cwd = ? AND network = ? ORDER BY created_at DESC LIMIT 1",
            (session_key, message_id, command, cwd, int(network)),
        )
        return Approval.from_row(rows[0]) if rows else None

    async def pending(self) -> list[Approval]:
        rows = await self.db.rows(
            f"SELECT {_COLUMNS} FROM exec_approvals WHERE status = 'pending' ORDER BY created_at"
        )
        return [Approval.from_row(row) for row in rows]

    async def shown(self, code: str, channel: str, chat_id: str, message_id: str) -> None:
        await self.db.write(
            "UPDATE exec_approvals SET request_channel = ?, request_chat = ?,"
            " request_message = ? WHERE code = ?",
            (channel, chat_id, message_id, code),
        )

    async def decide(
        self, code: str, status: str, by: str, now: float, *, always: bool = False
    ) -> bool:
        """`pending -> status` if still pending and not expired; True when this call did it."""
        changed = await self.db.write(
            "UPDATE exec_approvals SET status = ?, decided_by = ?, decided_at = ?, always = ?"
            " WHERE code = ? AND status = 'pending' AND expires_at > ?",
            (status, by, now, int(always), code, now),
            durable=True,
        )
        return changed == 1

    async def expire(self, now: float) -> list[str]:
        """Mark every pending request past its time expired; their codes."""
        rows = await self.db.rows(
            "SELECT code FROM exec_approvals WHERE status = 'pending' AND expires_at <= ?", (now,)
        )
        codes = [row[0] for row in rows]
        for code in codes:
            await self.db.write(
                "UPDATE exec_approvals SET status = 'expired', decided_at = ?"
                " WHERE code = ? AND status = 'pending'",
                (now, code),
                durable=True,
            )
        return codes

    async def withdraw(self, session_key: str, now: float) -> int:
        """A session that asked is over (a background task ended or was cancelled): its
        pending requests can no longer be decided (`decide` needs `expires_at > now`), and
        the desk's expiry sweep marks them expired and edits their questions. How many."""
        return await self.db.write(
            "UPDATE exec_approvals SET expires_at = ? WHERE session_key = ?"
            " AND status = 'pending' AND expires_at > ?",
            (now, session_key, now),
            durable=True,
        )

    async def claim(self, code: str) -> bool:
        """`approved -> running`: True for the one caller that runs it."""
        changed = await self.db.write(
            "UPDATE exec_approvals SET status = 'running' WHERE code = ? AND status = 'approved'",
            (code,),
            durable=True,
        )
        return changed == 1

    async def finish(self, code: str, status: str = "done") -> None:
        await self.db.write(
            "UPDATE exec_approvals SET status = ? WHERE code = ?", (status, code), durable=True
        )

    async def interrupted(self) -> list[Approval]:
        """Runs a stopped process left `running`: marked `interrupted`, returned to report."""
        rows = await self.db.rows(f"SELECT {_COLUMNS} FROM exec_approvals WHERE status = 'running'")
        found = [Approval.from_row(row) for row in rows]
        for approval in found:
            await self.finish(approval.code, "interrupted")
        return found

    async def approved_unclaimed(self) -> list[Approval]:
        rows = await self.db.rows(
            f"SELECT {_COLUMNS} FROM exec_approvals WHERE status = 'approved'"
        )
        return [Approval.from_row(row) for row in rows]

    # -- always allow ------------------------------------------------------------------------

    async def allow_always(self, approval: Approval, by: str, now: float) -> None:
        await self.db.write(
            "INSERT OR REPLACE INTO exec_always (person_id, digest, command, cwd, network,"
            " added_by, added_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (
                approval.person_id,
                approval.digest,
                approval.command,
                approval.cwd,
                int(approval.network),
                by,
                now,
            ),
            durable=True,
        )

    async def always_allowed(self, person_id: str, digest: str) -> bool:
        rows = await self.db.rows(
            "SELECT 1 FROM exec_always WHERE person_id = ? AND digest = ?", (person_id, digest)
        )
        return bool(rows)

    # -- the record of runs ------------------------------------------------------------------

    async def record_run(self, run: RunRecord) -> None:
        await self.db.write(
            "INSERT INTO exec_runs (person_id, command, cwd, network, approved_by, code,"
            " exit_code, ended, duration, bytes_out, at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                run.person_id,
                run.command,
                run.cwd,
                int(run.network),
                run.approved_by,
                run.code,
                run.exit_code,
                run.ended,
                run.duration,
                run.bytes_out,
                run.at,
            ),
        )

    async def runs(self, person_id: str | None = None, limit: int = 50) -> list[RunRecord]:
        """The newest runs first (one person's, or everyone's)."""
        where, params = ("WHERE person_id = ?", (person_id,)) if person_id else ("", ())
        rows = await self.db.rows(
            "SELECT person_id, command, cwd, network, approved_by, exit_code, ended, duration,"
            f" bytes_out, at, code FROM exec_runs {where} ORDER BY at DESC, id DESC LIMIT ?",
            (*params, limit),
        )
        return [
            RunRecord(r[0], r[1], r[2], bool(r[3]), r[4], r[5], r[6], r[7], r[8], r[9], r[10])
            for r in rows
        ]

    async def pending_sessions(self, session_keys: list[str]) -> set[str]:
        """Which of these sessions have a request waiting for the owner (a background task
        shows `waiting_approval` then: gateway/features/tasks/runner.py)."""
        if not session_keys:
            return set()
        marks = ",".join("?" * len(session_keys))
        rows = await self.db.rows(
            "SELECT DISTINCT session_key FROM exec_approvals WHERE status = 'pending'"
            f" AND session_key IN ({marks})",
            tuple(session_keys),
        )
        return {str(r[0]) for r in rows}
