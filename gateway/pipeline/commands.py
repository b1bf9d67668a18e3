"""Slash commands, answered by the gateway itself without calling the model.

The commands are a table (`COMMANDS`): name, handler, and whether the command is `queued` (it
changes the session, so it waits for the running turn in the session's lane) or answered at
once. A handler gets a small `CommandContext` (the route, the arguments and the few parts it
needs), never the Gateway itself, so this module does not depend on the gateway's module.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from gateway.agent.compaction import Compactor
from gateway.agent.context_files import ContextFile
from gateway.agent.conversation import SystemPrompt
from gateway.agent.prompt import request_overhead_chars, tool_schema_chars
from gateway.agent.providers.base import BudgetExceeded, ModelInfo
from gateway.agent.sessions import SessionStore, estimate_tokens
from gateway.agent.tools import ToolContext, ToolRegistry
from gateway.config.settings import Settings
from gateway.pipeline.reminders import reminders_command
from gateway.pipeline.routing import Route
from gateway.pipeline.tasks_command import tasks_command
from gateway.pipeline.usage_report import usage_command

if TYPE_CHECKING:
    from gateway.agent.providers import ModelRouter
    from gateway.agent.tools.schedule_tools import ScheduleDesk
    from gateway.pipeline.budgets import Budgets
    from gateway.pipeline.voice_choice import VoiceChoices
    from gateway.stores.tasks import TaskStore
    from gateway.stores.usage import UsageLedger

# Telegram-style: "/name" or "/name@bot", then arguments. "/etc/passwd?" is not a command.
_COMMAND = re.compile(r"^/([A-Za-z0-9_]{1,32})(?:@\S+)?(?:\s+(.*))?$", re.DOTALL)

HELP = """\
Commands:
/help - this list
/new or /reset - start a fresh session (the old transcript stays on disk)
/compact [focus] - summarize the older part of this session now (optional focus for the summary)
/status - model, session size in tokens, context window, compactions, workspace
/context - which workspace files are in the prompt, and how big it is
/reminders [cancel N] - your reminders and scheduled tasks, or cancel number N
/tasks [cancel N] - your background tasks (running and recent), or stop number N
/usage [all] - tokens and cost today, this week and this month, by kind (all: everyone)
/voice [on|off|mirror] - voice replies: always, never, or to voice notes (alone: the setting)
/approve CODE [always], /deny CODE - answer a request to run a command (the owner)"""

UNKNOWN = "Unknown command /{name}. Send /help for the list."


@dataclass(frozen=True, slots=True)
class Command:
    name: str
    args: str


def parse_command(text: str) -> Command | None:
    match = _COMMAND.match(text.strip())
    if not match:
        return None
    return Command(match.group(1).lower(), (match.group(2) or "").strip())


class PromptParts(Protocol):
    """What a command needs to see a session as the model would (the Gateway provides it)."""

    def tools_for(self, route: Route) -> ToolRegistry: ...

    def context_files(self, route: Route) -> list[ContextFile]: ...

    def system_prompt(self, route: Route, files: list[ContextFile]) -> SystemPrompt: ...

    def tool_context(self, route: Route) -> ToolContext: ...

    def capability_lines(self, route: Route) -> list[str]: ...


@dataclass(frozen=True, slots=True)
class CommandContext:
    route: Route
    args: str
    settings: Settings
    sessions: SessionStore
    compactor: Compactor
    provider: ModelInfo  # names the model (/status); calls go through the metered one
    prompt: PromptParts
    schedule_desk: ScheduleDesk | None = None  # reminders (gateway/features/scheduling.py)
    usage: UsageLedger | None = None  # /usage (gateway/stores/usage.py)
    budgets: Budgets | None = None
    voice: VoiceChoices | None = None  # /voice (gateway/pipeline/voice_choice.py)
    tasks: TaskStore | None = None  # /tasks (gateway/pipeline/tasks_command.py); None: off


@dataclass(frozen=True, slots=True)
class CommandContexts:
    """Makes the `CommandContext` of a route: for the gateway's slash commands and the panel's
    session actions (the same parts, so the panel's /compact is the chat's)."""

    settings: Settings
    sessions: SessionStore
    compactor: Compactor
    models: ModelRouter
    prompt: PromptParts
    schedule_desk: ScheduleDesk | None = None
    usage: UsageLedger | None = None
    budgets: Budgets | None = None
    voice: VoiceChoices | None = None
    tasks: TaskStore | None = None

    def for_route(self, route: Route, args: str = "") -> CommandContext:
        return CommandContext(
            route,
            args,
            self.settings,
            self.sessions,
            self.compactor,
            self.models.for_person(route.person_id),
            self.prompt,
            self.schedule_desk,
            usage=self.usage,
            budgets=self.budgets,
            voice=self.voice,
            tasks=self.tasks,
        )


Handler = Callable[[CommandContext], Awaitable[str]]


@dataclass(frozen=True, slots=True)
class CommandSpec:
    handler: Handler
    # Changes the session: waits for the running turn in the session's lane.
    queued: bool = False


def lookup(name: str) -> CommandSpec:
    """The command's entry; an unknown name gets the "unknown command" answer, at once."""
    return COMMANDS.get(name) or CommandSpec(_unknown(name))


async def run_command(ctx: CommandContext, command: Command) -> str:
    return await lookup(command.name).handler(ctx)


def _unknown(name: str) -> Handler:
    async def answer(ctx: CommandContext) -> str:
        return UNKNOWN.format(name=name)

    return answer


async def _help(ctx: CommandContext) -> str:
    return HELP


async def _new_session(ctx: CommandContext) -> str:
    route = ctx.route
    archived = ctx.sessions.reset(route.workspace, route.session_key)
    if archived is None:
        return "Started a fresh session."
    kept = archived.relative_to(route.workspace)
    return f"Started a fresh session. The previous conversation is kept in {kept}."


async def _compact(ctx: CommandContext) -> str:
    route, prompt = ctx.route, ctx.prompt
    session = await ctx.sessions.get(route.workspace, route.session_key)
    tools = prompt.tools_for(route)
    system = prompt.system_prompt(route, prompt.context_files(route))
    try:
        result = await ctx.compactor.flush_and_compact(
            session,
            system,
            prompt.tool_context(route),
            request_overhead_chars(system, tools.specs()),
            reason="manual",
            focus=ctx.args,
        )
    except BudgetExceeded as exc:  # at a cap: the session stays as it is
        return str(exc)
    if not result.compacted:
        return "Nothing to compact yet: the whole session fits in what is kept verbatim."
    if result.fallback:
        return result.notice
    return (
        f"Compacted: {result.messages} older messages summarized, "
        f"~{result.tokens_before:,} -> ~{result.tokens_after:,} tokens. "
        "The full transcript stays on disk."
    )


async def _status(ctx: CommandContext) -> str:
    route = ctx.route
    session = await ctx.sessions.get(route.workspace, route.session_key)
    llm = ctx.settings.llm
    used = session.context_tokens()
    share = used / llm.context_window
    lines = [
        f"Model: {ctx.provider.name} / {ctx.provider.model}",
        f"Session: {route.session_key} ({'private' if route.private else 'shared'}), "
        f"{len(session.history)} messages",
        f"Context: ~{used:,} of {llm.context_window:,} tokens ({share:.0%}), "
        f"compactions: {session.compactions}",
        # A group is shown only its own area: no absolute path, nothing of the owner's.
        f"Workspace: {route.workspace}"
        if route.private
        else f"Workspace: shared with this group; its notes are in {route.access.area}/",
    ]
    if session.last_usage is not None:
        usage = session.last_usage
        lines.append(
            f"Last request: {usage.input_tokens:,} tokens in, {usage.output_tokens:,} out"
            + (f", {usage.cache_read_tokens:,} from cache" if usage.cache_read_tokens else "")
        )
    return "\n".join(lines)


async def _context(ctx: CommandContext) -> str:
    route, parts = ctx.route, ctx.prompt
    files = parts.context_files(route)
    system = parts.system_prompt(route, files)
    session = await ctx.sessions.get(route.workspace, route.session_key)
    width = max(len(item.name) for item in files)
    lines = [f"Context for {route.session_key} ({'private' if route.private else 'shared'}):"]
    for item in files:
        report = item.report
        if report.status == "loaded":
            detail = f"{report.raw_chars:,} chars"
        elif report.status == "truncated":
            detail = f"{report.raw_chars:,} chars, {report.injected_chars:,} injected"
        elif report.status == "withheld":
            detail = "private, not loaded outside the owner's DM"
        else:
            detail = report.note
        lines.append(f"  {item.name.ljust(width)}  {report.status:<11} {detail}".rstrip())
    prompt_chars = len(system.stable) + len(system.volatile) + len(system.now)
    specs = parts.tools_for(route).specs()
    tool_chars = tool_schema_chars(specs)
    history_tokens = sum(estimate_tokens(m.text) for m in session.history)
    prompt = ctx.settings.prompt
    lines += [
        f"System prompt: {prompt_chars:,} chars (~{estimate_tokens('x' * prompt_chars):,} tokens), "
        f"of which workspace files {sum(i.report.injected_chars for i in files):,}",
        f"Tools: {len(specs)} ({tool_chars:,} chars of schema); "
        f"history: ~{history_tokens:,} tokens",
        f"Budgets: {prompt.file_max_chars:,} chars per file, {prompt.total_max_chars:,} in total",
    ]
    lines += parts.capability_lines(route)  # skills and MCP tool servers
    lines += standing_lines(files)
    return "\n".join(lines)


def standing_lines(files: list[ContextFile]) -> list[str]:
    """The standing instructions in this prompt, each with where it was said (private
    contexts only: a group never loads INSTRUCTIONS.md)."""
    from memory.instructions import parse_instructions
    from memory.layout import INSTRUCTIONS_FILE

    text = next((item.text for item in files if item.name == INSTRUCTIONS_FILE), "")
    rules = [rule for rule in parse_instructions(text) if not rule.struck]
    if not rules:
        return []
    return [
        f"Standing instructions ({INSTRUCTIONS_FILE}, followed in every private context):",
        *(
            f"  - {rule.text}" + (f" ({rule.provenance})" if rule.provenance else "")
            for rule in rules
        ),
    ]


async def _reminders(ctx: CommandContext) -> str:
    return await reminders_command(ctx.schedule_desk, ctx.route, ctx.args)


async def _usage(ctx: CommandContext) -> str:
    return await usage_command(ctx)


async def _tasks(ctx: CommandContext) -> str:
    return await tasks_command(ctx.tasks, ctx.route, ctx.args)


async def _voice(ctx: CommandContext) -> str:
    if ctx.voice is None:
        return "Voice replies are not available here."
    return await ctx.voice.command(ctx.route.workspace, ctx.args, private=ctx.route.private)


COMMANDS: dict[str, CommandSpec] = {
    "help": CommandSpec(_help),
    "new": CommandSpec(_new_session, queued=True),
    "reset": CommandSpec(_new_session, queued=True),
    "compact": CommandSpec(_compact, queued=True),
    "status": CommandSpec(_status),
    "context": CommandSpec(_context),
    "reminders": CommandSpec(_reminders),
    "tasks": CommandSpec(_tasks),
    "usage": CommandSpec(_usage),
    "voice": CommandSpec(_voice),
}
