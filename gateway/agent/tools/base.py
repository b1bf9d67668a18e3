"""The tool interface: a name, a JSON schema, and `run` with a context.

A tool never raises to the agent loop for a refusal: it raises `ToolError`, which the loop turns
into an error result the model can read and react to.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from gateway.agent.conversation import ToolSpec
from gateway.tool_errors import ToolError as ToolError  # where tools import it from

if TYPE_CHECKING:
    from gateway.agent.tools.quota import TurnBudget


class FileOutbox(Protocol):
    """Sends a file to the person of the current chat through the gateway's one delivery path
    (the outbox: durable, retried, sent once). `max_bytes` is the channel's upload limit;
    `channel` and `chat_id` name the chat (where a late answer to it is posted: exec),
    `message_id` the message the turn answers ("" for none)."""

    channel: str
    chat_id: str
    message_id: str
    max_bytes: int

    async def send_file(self, path: Path, caption: str) -> str: ...


@dataclass(frozen=True, slots=True)
class ToolContext:
    """What a tool may act on: one workspace, one session, and whether it is private.

    `private` is true only in a context of the workspace's owner (their DM, heartbeat, flush);
    `area` is a group's own writable area. Tools pass both to the path resolver, which asks
    `memory.layout` what this context may read and write. `budget` is the turn's share of the
    quotas (gateway/agent/tools/quota.py): one per turn, shared by its tool calls; None only
    where no model runs tools (tests of a single tool). `outbox` reaches the person of the
    chat the turn answers (None where no one is: heartbeats, flushes).

    `attended` and `outside` decide whether a private context may write the files groups
    read (memory/layout.py, "Group-readable files"): `attended` only in the owner's own DM
    turn (the default, False, is every context no one thought about: heartbeats, flushes,
    reminders, tidying); `outside` is set by the agent loop before each call from the records
    in the context window (gateway/agent/provenance.py).
    """

    workspace: Path
    session_key: str
    private: bool
    max_file_bytes: int = 1_048_576
    area: str = ""
    outbox: FileOutbox | None = None
    budget: TurnBudget | None = None
    attended: bool = False
    outside: str = ""


class OutsideText(str):
    """A tool result whose text came from outside the owner's own files (`source` says from
    where: "a file a group wrote"), for tools whose output is outside only sometimes; a tool
    whose output always is declares `ToolSpec.untrusted_output` instead."""

    source: str

    def __new__(cls, text: str, source: str) -> OutsideText:
        made = super().__new__(cls, text)
        made.source = source
        return made


def outside(text: str, source: str) -> str:
    """`text` marked as outside text from `source`, or as it is when `source` is ""."""
    return OutsideText(text, source) if source else text


class Tool(Protocol):
    spec: ToolSpec

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> str: ...
