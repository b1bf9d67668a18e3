"""The agent loop: ask the model, run the tools it calls, repeat until a final answer.

With a `TurnStream`, the text of each model call is passed on as it is written (a live
preview), and while tools run the preview shows a short progress line instead
(gateway/agent/progress.py); the next call's words replace it. The preview is best effort:
the reply is still the returned `TurnResult.reply`, delivered like any other.

Bounded by a number of tool rounds so a model that calls tools forever cannot hold a session
hostage, and by the turn's quotas (`ctx.budget`: tool calls per step and per turn). Each
message is recorded (transcript first) as it happens, so a crash mid-turn loses nothing that
was already said or done.

Each tool call sees what outside text the context window holds at that moment (`ctx.outside`,
from the records: gateway/agent/provenance.py), so a web page fetched in this round already
stops a write to a group's files in the next call; each result is recorded with its source.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager, nullcontext
from dataclasses import dataclass, replace
from typing import Protocol

from gateway.agent.conversation import Message, SystemPrompt, ToolCall, Usage
from gateway.agent.media.window import ImageWindow
from gateway.agent.progress import progress_line
from gateway.agent.provenance import outside_text
from gateway.agent.providers.base import Provider, TextStream
from gateway.agent.tools.base import ToolContext
from gateway.agent.tools.registry import ToolOutcome, ToolRegistry

log = logging.getLogger(__name__)

EMPTY_ANSWER = "(The assistant returned an empty answer. Try asking again or rephrasing.)"
ROUND_LIMIT_NOTE = (
    "(I stopped after {rounds} rounds of tool calls without finishing. "
    'Say "continue" to let me go on, or tell me what to do differently.)'
)

Recorder = Callable[[Message, Usage | None], None]
# Entered around each model call: the turn is waiting on the provider, not working itself.
Waiting = Callable[[], AbstractAsyncContextManager[object]]


class TurnStream(TextStream, Protocol):
    """A turn's live preview: the model's text as it comes, and a line while tools run."""

    def progress(self, line: str) -> None:
        """Show `line` in place of the text so far (the next delta replaces it)."""


@dataclass(frozen=True, slots=True)
class TurnResult:
    reply: str
    usage: Usage
    rounds: int


class AgentLoop:
    def __init__(
        self, provider: Provider, max_tool_rounds: int, images: ImageWindow | None = None
    ) -> None:
        self.provider = provider
        self.max_tool_rounds = max_tool_rounds
        # Which images go to the model as pixels (the newest few); None: none ever do.
        self.images = images

    async def run(
        self,
        system: SystemPrompt,
        history: list[Message],
        ctx: ToolContext,
        tools: ToolRegistry,
        record: Recorder,
        waiting: Waiting | None = None,
        stream: TurnStream | None = None,
    ) -> TurnResult:
        """Run one turn. `history` must already end with the person's message.

        `record` appends each new message to the session (and so to `history`); provider
        errors propagate to the caller, which owns the wording shown to the person.
        `waiting` (optional) is entered around each model call; `stream` (optional) gets
        the text as it is written and a progress line while tools run.
        """
        total = Usage()
        last_text = ""
        for round_number in range(1, self.max_tool_rounds + 1):
            # Read every round: a tool may make more tools available (mcp_load_tools).
            specs = tools.specs()
            messages = (
                history if self.images is None else self.images.attach(history, ctx.workspace)
            )
            async with waiting() if waiting is not None else nullcontext():
                completion = await self.provider.complete(system, messages, specs, stream=stream)
            total = total + completion.usage
            # A name the model made up may hold a secret (the name of a tool a server listing
            # was refused for): recorded masked, as any tool result is.
            shown = [tools.shown_name(call.name) for call in completion.tool_calls]
            record(
                Message(
                    "assistant",
                    completion.text,
                    tool_calls=tuple(
                        replace(call, name=name)
                        for call, name in zip(completion.tool_calls, shown, strict=True)
                    ),
                ),
                completion.usage,
            )
            if not completion.tool_calls:
                return TurnResult(completion.text.strip() or EMPTY_ANSWER, total, round_number)
            last_text = completion.text.strip() or last_text
            if stream is not None:
                stream.progress(progress_line(completion.tool_calls))
            for position, call in enumerate(completion.tool_calls):
                # Past the per-step or per-turn number of calls, a call gets an error result
                # instead of running (every call needs a result for the next request).
                refusal = ctx.budget.call_refusal(position, call.name) if ctx.budget else None
                outcome = (
                    ToolOutcome(refusal, True)
                    if refusal
                    else await self._run_tool(call, _seeing(ctx, history), tools)
                )
                record(
                    Message(
                        "tool",
                        outcome.text,
                        tool_call_id=call.id,
                        tool_name=shown[position],
                        is_error=outcome.is_error,
                        untrusted=outcome.untrusted,
                    ),
                    None,
                )
        stop = ROUND_LIMIT_NOTE.format(rounds=self.max_tool_rounds)
        reply = f"{last_text}\n\n{stop}" if last_text else stop
        return TurnResult(reply, total, self.max_tool_rounds)

    async def _run_tool(self, call: ToolCall, ctx: ToolContext, tools: ToolRegistry) -> ToolOutcome:
        if call.arguments_error:
            return ToolOutcome(f"invalid arguments for {call.name}: {call.arguments_error}", True)
        log.info("tool %s in %s", call.name, ctx.session_key)
        return await tools.run(call.name, call.arguments, ctx)


def _seeing(ctx: ToolContext, history: list[Message]) -> ToolContext:
    """`ctx` as of now: the outside text in the window (only the owner's own turn asks)."""
    if not (ctx.private and ctx.attended):
        return ctx
    return replace(ctx, outside=outside_text(history))
