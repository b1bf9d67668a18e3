"""Slash commands, answered by the gateway itself without calling the model."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gateway.agent.prompt import request_overhead_chars, tool_schema_chars
from gateway.agent.sessions import estimate_tokens

if TYPE_CHECKING:
    from gateway.pipeline.gateway import Gateway
    from gateway.pipeline.routing import Route

# Telegram-style: "/name" or "/name@bot", then arguments. "/etc/passwd?" is not a command.
_COMMAND = re.compile(r"^/([A-Za-z0-9_]{1,32})(?:@\S+)?(?:\s+(.*))?$", re.DOTALL)

HELP = """\
Commands:
/help - this list
/new or /reset - start a fresh session (the old transcript stays on disk)
/compact [focus] - summarize the older part of this session now (optional focus for the summary)
/status - model, session size in tokens, context window, compactions, workspace
/context - which workspace files are in the prompt, and how big it is
/reminders [cancel N] - your reminders and scheduled tasks, or cancel number N"""

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


# Commands that change the session wait for the running turn, in the session's lane.
QUEUED_COMMANDS = frozenset({"new", "reset", "compact"})


async def run_command(gateway: Gateway, route: Route, command: Command) -> str:
    if command.name == "help":
        return HELP
    if command.name in ("new", "reset"):
        return await _new_session(gateway, route)
    if command.name == "compact":
        return await _compact(gateway, route, command.args)
    if command.name == "status":
        return await _status(gateway, route)
    if command.name == "context":
        return await _context(gateway, route)
    if command.name == "reminders":
        from gateway.pipeline.reminders import reminders_command

        return await reminders_command(gateway.schedules, route, command.args)
    return UNKNOWN.format(name=command.name)


async def _new_session(gateway: Gateway, route: Route) -> str:
    archived = gateway.sessions.reset(route.workspace, route.session_key)
    if archived is None:
        return "Started a fresh session."
    kept = archived.relative_to(route.workspace)
    return f"Started a fresh session. The previous conversation is kept in {kept}."


async def _compact(gateway: Gateway, route: Route, focus: str) -> str:
    session = await gateway.sessions.get(route.workspace, route.session_key)
    tools = gateway.tools_for(route)
    system = gateway.system_prompt(route, gateway.context_files(route))
    await gateway.compactor.flush(session, system, gateway.tool_context(route))
    result = await gateway.compactor.compact(
        session, request_overhead_chars(system, tools.specs()), reason="manual", focus=focus
    )
    if not result.compacted:
        return "Nothing to compact yet: the whole session fits in what is kept verbatim."
    if result.fallback:
        return result.notice
    return (
        f"Compacted: {result.messages} older messages summarized, "
        f"~{result.tokens_before:,} -> ~{result.tokens_after:,} tokens. "
        "The full transcript stays on disk."
    )


async def _status(gateway: Gateway, route: Route) -> str:
    session = await gateway.sessions.get(route.workspace, route.session_key)
    llm = gateway.settings.llm
    used = session.context_tokens()
    share = used / llm.context_window
    lines = [
        f"Model: {gateway.provider.name} / {gateway.provider.model}",
        f"Session: {route.session_key} ({'private' if route.private else 'shared'}), "
        f"{len(session.history)} messages",
        f"Context: ~{used:,} of {llm.context_window:,} tokens ({share:.0%}), "
        f"compactions: {session.compactions}",
        # A group is shown only its own area: no absolute path, nothing of the owner's.
        f"Workspace: {route.workspace}" if route.private
        else f"Workspace: shared with this group; its notes are in {route.access.area}/",
    ]
    if session.last_usage is not None:
        usage = session.last_usage
        lines.append(
            f"Last request: {usage.input_tokens:,} tokens in, {usage.output_tokens:,} out"
            + (f", {usage.cache_read_tokens:,} from cache" if usage.cache_read_tokens else "")
        )
    return "\n".join(lines)


async def _context(gateway: Gateway, route: Route) -> str:
    files = gateway.context_files(route)
    system = gateway.system_prompt(route, files)
    session = await gateway.sessions.get(route.workspace, route.session_key)
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
    prompt_chars = len(system.stable) + len(system.volatile)
    specs = gateway.tools_for(route).specs()
    tool_chars = tool_schema_chars(specs)
    history_tokens = sum(estimate_tokens(m.text) for m in session.history)
    prompt = gateway.settings.prompt
    lines += [
        f"System prompt: {prompt_chars:,} chars (~{estimate_tokens('x' * prompt_chars):,} tokens), "
        f"of which workspace files {sum(i.report.injected_chars for i in files):,}",
        f"Tools: {len(specs)} ({tool_chars:,} chars of schema); "
        f"history: ~{history_tokens:,} tokens",
        f"Budgets: {prompt.file_max_chars:,} chars per file, {prompt.total_max_chars:,} in total",
    ]
    lines += gateway.capability_lines(route)  # skills and MCP tool servers (issue 17)
    return "\n".join(lines)
