"""Said it saved, did not: make a reply's "I'll remember that" true.

Models often answer "Noted, I'll remember that" without calling a tool, and the fact is gone
by the next session. After each private turn a cheap check (a few regular expressions on the
reply, and the turn's write counter: `TurnBudget.written`) notices a reply that claims to
have saved, noted or to remember something while no file was written in that turn. Then a
silent capture step runs: a short model turn that sees the end of the conversation and has
only the memory-writing tools (append, exact edits and corrections, to MEMORY.md, USER.md
and memory/*.md), in the same private context and within the same turn quotas. It runs after the
reply is queued, so the person does not wait for it; its messages are not added to the
conversation (the transcript records a `capture` event), and what it writes is committed
with the turn.

Counted in /metrics as `clawgate_memory_claims_total{outcome}`: `kept` (a claim, and the turn
wrote something), `captured` (the capture step wrote), `nothing` (it wrote nothing), `failed`.
The claim patterns are English; a claim in another language is not noticed.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import gateway.workspace.paths as paths
from gateway.agent.conversation import Message, SystemPrompt, ToolSpec, Usage
from gateway.agent.loop import AgentLoop
from gateway.agent.providers.base import ProviderError
from gateway.agent.scope import usage_kind
from gateway.agent.sessions import Session
from gateway.agent.tools.base import ToolContext, ToolError
from gateway.agent.tools.corrections import MemoryCorrectTool
from gateway.agent.tools.files import AppendFileTool, EditFileTool
from gateway.agent.tools.registry import ToolRegistry
from memory.layout import MEMORY_DIR, PRIVATE_FILES

if TYPE_CHECKING:
    from gateway.agent.metrics import Registry

log = logging.getLogger(__name__)

# A claim to have written something down, or to do so: "I'll remember", "I've noted",
# "Noted!", "saved that to MEMORY.md", "I'll keep that in mind", "added it to my notes".
_CLAIMS = [
    r"\b(?:i'll|i will|i'm going to|i am going to)\s+(?:definitely\s+|make sure to\s+)?"
    r"(?:remember|note|save|store|record|jot|write (?:it|that|this) down|keep (?:it|that|"
    r"this|those) in mind)\b",
    r"\b(?:i've|i have)\s+(?:now\s+|just\s+|also\s+)?(?:noted|saved|stored|recorded|jotted|"
    r"written (?:it|that|this) down|made a note|added (?:it|that|this) to)\b",
    r"^\W*(?:noted|saved|got it[,;]? (?:noted|saved))\b",
    r"\b(?:saved|noted|stored|added|written) (?:it |that |this )?(?:to|in|into) "
    r"(?:my |your )?(?:memory|notes|memory\.md|user\.md|daily note)\b",
    r"\bi(?:'ll| will) (?:always )?remember (?:that|this|it)\b",
]
CLAIM = re.compile("|".join(f"(?:{p})" for p in _CLAIMS), re.IGNORECASE | re.MULTILINE)
# "I can't remember", "I don't remember": not claims, and no pattern above matches them.

CAPTURE_PROMPT = """\
[Silent memory capture, not from the person: nobody will see your reply.]
In your last reply you told the person you would remember, or had noted or saved,
something, but nothing was written to a file in that turn. Write it now, so it is true:
durable facts and preferences to MEMORY.md (or USER.md for facts about the person),
things about today to {note}. Use append_file (memory_correct or edit_file to change a
line that is now wrong). One fact per line, naming people explicitly. Only what the person said or
asked you to keep; nothing else. Then reply {done}."""
DONE = "DONE"
HISTORY_MESSAGES = 12  # the end of the conversation the capture step sees
TIMEOUT_SECONDS = 60.0


def claims_saved(reply: str) -> bool:
    """Does the reply say something was, or will be, written down or remembered?"""
    return bool(CLAIM.search(reply))


class MemoryFilesOnly:
    """A file tool limited to the memory files (compared after resolution)."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.spec = ToolSpec(
            name=inner.spec.name,
            description=f"{inner.spec.description} Only MEMORY.md, USER.md and "
            f"{MEMORY_DIR}/*.md may be changed now.",
            parameters=inner.spec.parameters,
        )

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> str:
        target = await asyncio.to_thread(
            paths.resolve_in_workspace,
            ctx.workspace,
            args["path"],
            private=ctx.private,
            write=True,
            area=ctx.area,
        )
        rel = os.path.relpath(target, os.path.realpath(ctx.workspace)).replace(os.sep, "/")
        if not is_memory_file(rel):
            raise ToolError(
                f"{self.spec.name}: only MEMORY.md, USER.md and {MEMORY_DIR}/*.md "
                f"may be changed now, not {rel}"
            )
        return str(await self._inner.run(args, ctx))


def is_memory_file(rel: str) -> bool:
    """MEMORY.md, USER.md or a Markdown note under memory/ (workspace-relative, resolved)."""
    parts = rel.split("/")
    if len(parts) == 1:
        return parts[0] in PRIVATE_FILES
    return parts[0] == MEMORY_DIR and rel.endswith(".md") and ".." not in parts


def capture_tools() -> ToolRegistry:
    return ToolRegistry(
        [MemoryFilesOnly(AppendFileTool()), MemoryFilesOnly(EditFileTool()), MemoryCorrectTool()]
    )


@dataclass(frozen=True, slots=True)
class Due:
    """A capture owed after the reply is queued: the turn's prompt and tool context."""

    system: SystemPrompt
    ctx: ToolContext


class Capture:
    def __init__(self, agent: AgentLoop, registry: Registry | None = None) -> None:
        self.agent = agent
        self.claims = (
            registry.counter(
                "clawgate_memory_claims_total",
                "Replies claiming to have saved or to remember something, by outcome: kept (the "
                "turn wrote a file), captured (a silent capture step wrote it), nothing (it wrote "
                "nothing), failed.",
                ["outcome"],
            )
            if registry is not None
            else None
        )

    def _count(self, outcome: str) -> None:
        if self.claims is not None:
            self.claims.inc(outcome=outcome)

    def check(
        self, private: bool, reply: str, system: SystemPrompt, ctx: ToolContext
    ) -> Due | None:
        """After a turn: a capture is due when a private reply claims a save and the turn
        wrote nothing. Cheap: a regular expression and a counter."""
        if not private or ctx.budget is None or not claims_saved(reply):
            return None
        if ctx.budget.written > 0:
            self._count("kept")
            return None
        return Due(system, replace(ctx, attended=False))  # a step the person did not ask for

    async def run(self, session: Session, due: Due, today_note: str) -> bool:
        """The silent capture step; True when it wrote something."""
        budget = due.ctx.budget
        before = budget.written if budget is not None else 0
        history = _tail(session.history)
        history.append(Message("user", CAPTURE_PROMPT.format(note=today_note, done=DONE)))
        calls: list[str] = []

        def record(message: Message, usage: Usage | None) -> None:
            history.append(message)
            calls.extend(call.name for call in message.tool_calls)

        try:
            with usage_kind("flush"):  # a background memory turn, like the flush
                result = await asyncio.wait_for(
                    self.agent.run(due.system, history, due.ctx, capture_tools(), record),
                    TIMEOUT_SECONDS,
                )
        except (ProviderError, TimeoutError) as exc:
            log.warning("memory capture failed in %s: %s", session.key, type(exc).__name__)
            self._count("failed")
            _note(session, ok=False, error=getattr(exc, "kind", "timeout"))
            return False
        wrote = budget is not None and budget.written > before
        self._count("captured" if wrote else "nothing")
        _note(
            session,
            ok=True,
            wrote=wrote,
            tool_calls=calls,
            reply=result.reply[:200],
            usage=result.usage.as_dict(),
        )
        return wrote


def _tail(history: list[Message]) -> list[Message]:
    """The last messages, starting at a person's message (a tool result needs its call)."""
    tail = history[-HISTORY_MESSAGES:]
    while tail and tail[0].role != "user":
        tail = tail[1:]
    return list(tail) or [m for m in history if m.role == "user"][-1:]


def _note(session: Session, **fields: Any) -> None:
    try:
        session.record_event("capture", **fields)
    except OSError as exc:
        log.warning("could not note the memory capture in the transcript: %s", exc)
