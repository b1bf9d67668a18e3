"""The tool interface: a name, a JSON schema, and `run` with a context.

A tool never raises to the agent loop for a refusal: it raises `ToolError`, which the loop turns
into an error result the model can read and react to.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from gateway.agent.conversation import ToolSpec
from gateway.agent.tool_errors import ToolError as ToolError  # where tools import it from

if TYPE_CHECKING:
    from gateway.agent.tools.quota import TurnBudget


@dataclass(frozen=True, slots=True)
class ToolContext:
    """What a tool may act on: one workspace, one session, and whether it is private.

    `private` is true only in a context of the workspace's owner (their DM, heartbeat, flush);
    `area` is a group's own writable area. Tools pass both to the path resolver, which asks
    `memory.layout` what this context may read and write. `budget` is the turn's share of the
    quotas (gateway/agent/tools/quota.py): one per turn, shared by its tool calls; None only
    where no model runs tools (tests of a single tool).
    """

    workspace: Path
    session_key: str
    private: bool
    max_file_bytes: int = 1_048_576
    area: str = ""
    budget: TurnBudget | None = None


class Tool(Protocol):
    spec: ToolSpec

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> str: ...
