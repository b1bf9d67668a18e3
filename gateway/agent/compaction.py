"""Long sessions: a silent memory flush, then compaction of the older history.

What is not written to a file does not survive a compaction. So before the older part of a
session is summarized, the assistant gets one silent turn, once per compaction cycle, to
append what matters to today's daily note. The summary keeps decisions, rules and exact
identifiers under fixed headings, and the standing instructions said in the summarized span
word for word (gateway/agent/instructions.py writes any not yet in INSTRUCTIONS.md first, and
the summary is checked for them: a rule the summarizer dropped is added back under
"Constraints and rules"); if summarizing fails, the oldest turns are dropped with a
one-line notice instead of stalling the session (not when a budget cap refused the call:
then nothing is dropped, and the turn ends with the refusal). The transcript on disk keeps
every original line either way.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from dataclasses import dataclass, field, replace
from datetime import tzinfo
from typing import TYPE_CHECKING

from gateway.agent.conversation import Message, SystemPrompt, Usage
from gateway.agent.loop import AgentLoop
from gateway.agent.metrics import GatewayMetrics
from gateway.agent.providers.base import BudgetExceeded, Provider, ProviderError
from gateway.agent.scope import usage_kind
from gateway.agent.sessions import Session, estimate_tokens, is_compaction_marker
from gateway.agent.tools.base import ToolContext
from gateway.agent.tools.flush import flush_tools
from gateway.clock import Clock
from gateway.config.settings import CompactionSettings, LLMSettings
from gateway.ops.logs import current_turn
from gateway.ops.versioning import Versioning
from memory.instructions import said_in

if TYPE_CHECKING:
    from gateway.agent.instructions import InstructionKeeper

log = logging.getLogger(__name__)

NO_REPLY = "NO_REPLY"
SUMMARY_HEADINGS = (
    "Decisions",
    "Open tasks",
    "Constraints and rules",
    "Pending requests",
    "Exact identifiers",
)
FLUSH_PROMPT = """\
[Silent memory flush, not from the person: nobody will see your reply.]
This session is close to its context limit; its older messages will soon be replaced by a
summary. Append to {note} (use append_file with exactly that path) every durable fact,
preference, decision, rule the person set, open task and exact identifier from this
conversation that is not already written in a file. One item per line, naming people
explicitly. Do not change any other file. If nothing needs saving, reply {no_reply}."""

SUMMARIZER_SYSTEM = """\
You compress conversations between a person and their assistant into a summary the assistant
will read instead of the original messages. Be complete about anything that still matters,
terse about everything else."""

SUMMARY_INSTRUCTIONS = """\
Summarize the conversation above. Use exactly these Markdown headings, in this order, and
write "None" under a heading with nothing to report:
## Decisions
## Open tasks
## Constraints and rules
## Pending requests
## Exact identifiers
Rules:
- Write in the same language as the conversation.
- Copy identifiers, file paths, URLs, numbers, amounts, dates, times and names literally.
- Put every rule or limit the person set (for example "do not act until I confirm") under
  Constraints and rules, in their words.
- Pending requests are things the person asked for that are not done yet."""

CARRY_INSTRUCTIONS = """\
- The person set these standing instructions in this part of the conversation; copy each one
  verbatim, as its own line, under Constraints and rules:"""

FALLBACK_NOTICE = (
    "(This conversation got too long and I could not summarize it, so I set its oldest "
    "messages aside. They are still saved on disk.)"
)
COMPACTED_NOTICE = "(Compacted this conversation: {count} older messages summarized.)"
# Tool arguments and results are cut to this many characters in the text to summarize.
RENDER_TOOL_CHARS = 600


@dataclass(frozen=True, slots=True)
class Thresholds:
    flush_at: int
    compact_at: int
    keep_recent: int


@dataclass(frozen=True, slots=True)
class CompactionResult:
    compacted: bool
    fallback: bool = False
    messages: int = 0
    tokens_before: int = 0
    tokens_after: int = 0
    notice: str = ""
    usage: Usage = field(default_factory=Usage)


class Compactor:
    def __init__(
        self,
        provider: Provider,
        agent: AgentLoop,
        llm: LLMSettings,
        settings: CompactionSettings,
        clock: Clock,
        zone: tzinfo,
        *,
        metrics: GatewayMetrics | None = None,
        versioning: Versioning | None = None,
        instructions: InstructionKeeper | None = None,
    ) -> None:
        self.metrics = metrics
        # Standing instructions: kept in INSTRUCTIONS.md and carried verbatim by summaries.
        self.instructions = instructions
        # A flush that wrote today's note is committed on its own, as "flush".
        self.versioning = versioning
        self.provider = provider
        self.agent = agent
        self.llm = llm
        self.settings = settings
        self.clock = clock
        self.zone = zone

    def thresholds(self) -> Thresholds:
        window = self.llm.context_window
        # A reserve larger than half the window would compact after every message.
        reserve = min(self.settings.reserve_tokens, window // 2)
        compact_at = window - reserve
        flush_at = max(compact_at - self.settings.flush_margin_tokens, compact_at // 2)
        keep_recent = min(self.settings.keep_recent_tokens, compact_at // 2)
        return Thresholds(flush_at, compact_at, keep_recent)

    async def before_turn(
        self,
        session: Session,
        system: SystemPrompt,
        ctx: ToolContext,
        overhead_chars: int,
        *,
        allow_flush: bool = True,
    ) -> list[str]:
        """Flush and compact as the session's size requires; returns notices for the person."""
        limits = self.thresholds()
        tokens = session.context_tokens()
        if tokens < limits.compact_at:
            if allow_flush and tokens >= limits.flush_at:
                await self.flush(session, system, ctx)
            return []
        result = await self.flush_and_compact(
            session, system, ctx, overhead_chars, reason="threshold", flush=allow_flush
        )
        return [result.notice] if result.notice else []

    async def flush(self, session: Session, system: SystemPrompt, ctx: ToolContext) -> bool:
        """One silent turn that may only append to today's note. Runs once per cycle."""
        if not (self.settings.memory_flush and ctx.private and session.flush_due):
            return False
        note = f"memory/{self.clock.now().astimezone(self.zone).date().isoformat()}.md"
        ctx = replace(ctx, attended=False)  # the person did not ask for this turn
        budget = self.thresholds().compact_at // 2
        history = session.history[choose_cut(session.history, budget) :]
        history.append(Message("user", FLUSH_PROMPT.format(note=note, no_reply=NO_REPLY)))
        calls: list[str] = []

        def record(message: Message, usage: Usage | None) -> None:
            history.append(message)
            calls.extend(call.name for call in message.tool_calls)

        try:
            with usage_kind("flush"):
                result = await asyncio.wait_for(
                    self.agent.run(system, history, ctx, flush_tools(note), record),
                    self.settings.timeout_seconds,
                )
        except BudgetExceeded:
            raise  # the flush stays due; the turn ends with the refusal
        except (ProviderError, TimeoutError) as exc:
            log.warning("memory flush failed in %s: %s", session.key, type(exc).__name__)
            session.mark_flushed(ok=False, error=getattr(exc, "kind", "timeout"))
            if self.metrics:
                self.metrics.flushes.inc(outcome="failed")
            return False
        session.mark_flushed(
            ok=True,
            note=note,
            tool_calls=calls,
            reply=result.reply[:200],
            usage=result.usage.as_dict(),
        )
        if self.metrics:
            self.metrics.flushes.inc(outcome="ok")
        if self.versioning:
            await self.versioning.commit(
                ctx.workspace, "flush", session=session.key, turn=current_turn()[1]
            )
        return True

    async def flush_and_compact(
        self,
        session: Session,
        system: SystemPrompt,
        ctx: ToolContext,
        overhead_chars: int,
        *,
        reason: str,
        focus: str = "",
        flush: bool = True,
    ) -> CompactionResult:
        """Save what matters to today's note (if due), then compact: the one place that does
        both in this order (threshold, the /compact command and overflow recovery use it)."""
        if flush:
            await self.flush(session, system, ctx)
        carry = await self._standing_rules(session, ctx) if ctx.private else []
        return await self.compact(session, overhead_chars, reason=reason, focus=focus, carry=carry)

    async def _standing_rules(self, session: Session, ctx: ToolContext) -> list[str]:
        """The standing instructions said in the span about to be summarized, each written
        to INSTRUCTIONS.md first if it is not there yet (never only in the conversation)."""
        if self.instructions is None:
            return []
        older = session.history[: choose_cut(session.history, self.thresholds().keep_recent)]
        try:
            return await self.instructions.before_compaction(ctx.workspace, older, "DM")
        except BudgetExceeded:
            raise  # as the flush: the turn ends with the refusal, nothing is summarized
        except Exception:  # a broken file must not stall the session
            log.exception("standing instructions before compaction failed in %s", session.key)
            return []

    async def compact(
        self,
        session: Session,
        overhead_chars: int,
        *,
        reason: str,
        focus: str = "",
        carry: list[str] | None = None,
    ) -> CompactionResult:
        cut = choose_cut(session.history, self.thresholds().keep_recent)
        older = session.history[:cut]
        if not older or (len(older) == 1 and _is_summary(older[0])):
            return CompactionResult(False)
        before = session.context_tokens()
        summary, usage = await self._summarize(older, focus, carry or [])
        session.compact(
            cut,
            summary,
            overhead_chars,
            reason=reason,
            messages=cut,
            tokens_before=before,
            fallback=summary is None,
            usage=usage.as_dict(),
        )
        after = session.context_tokens()
        if self.metrics:
            self.metrics.compactions.inc(
                reason=reason, result="fallback" if summary is None else "summary"
            )
        log.info(
            "compacted %s: %d messages, ~%d -> ~%d tokens (%s%s)",
            session.key,
            cut,
            before,
            after,
            reason,
            ", fallback" if summary is None else "",
        )
        if summary is None:
            notice = FALLBACK_NOTICE
        else:
            notice = COMPACTED_NOTICE.format(count=cut) if self.settings.notify else ""
        return CompactionResult(True, summary is None, cut, before, after, notice, usage)

    async def _summarize(
        self, older: list[Message], focus: str, carry: list[str]
    ) -> tuple[str | None, Usage]:
        prompt = render_for_summary(older, self._render_budget())
        prompt += "\n\n" + SUMMARY_INSTRUCTIONS
        if carry:
            prompt += "\n" + CARRY_INSTRUCTIONS + "".join(f"\n- {rule}" for rule in carry)
        if focus:
            prompt += f"\nThe person asked to focus on: {focus}"
        total = Usage()
        for attempt in (1, 2):
            try:
                with usage_kind("compaction"):
                    completion = await asyncio.wait_for(
                        self.provider.complete(
                            SystemPrompt(SUMMARIZER_SYSTEM), [Message("user", prompt)], []
                        ),
                        self.settings.timeout_seconds,
                    )
            except BudgetExceeded:
                raise  # at a cap: no crude cut in place of the summary, the session waits
            except (ProviderError, TimeoutError) as exc:
                log.warning("summary attempt %d failed: %s", attempt, type(exc).__name__)
                continue
            total = total + completion.usage
            if summary_is_valid(completion.text):
                return carry_rules(completion.text.strip(), carry), total
            log.warning("summary attempt %d was missing required headings", attempt)
        return None, total

    def _render_budget(self) -> int:
        room = self.llm.context_window - self.llm.max_output_tokens - 2_000
        return max(room, 1_000) * 3  # characters, with room to spare at 4 chars a token


def choose_cut(history: list[Message], keep_tokens: int) -> int:
    """Where the kept tail starts: about `keep_tokens` of the most recent messages.

    The cut lands on a person's message where possible, and never on a tool result, so a
    tool call is never separated from its result. The last message is always kept.
    """
    if not history:
        return 0
    kept = 0
    start = len(history) - 1
    for index in range(len(history) - 1, -1, -1):
        kept += estimate_tokens(_text_of(history[index]))
        if kept > keep_tokens and index < len(history) - 1:
            break
        start = index
    for index in range(start, len(history)):
        if history[index].role == "user" and not _is_summary(history[index]):
            return index
    for index in range(start, len(history)):
        if history[index].role != "tool":
            return index
    for index in range(start, -1, -1):
        if history[index].role != "tool":
            return index
    return 0


def carry_rules(summary: str, rules: list[str]) -> str:
    """The summary with every standing instruction in `rules` in it word for word: one the
    summarizer dropped or reworded is added under the Constraints and rules heading (a
    "None" there is replaced). Compared by normalized text (case and spacing)."""
    missing = [rule for rule in rules if not said_in(rule, summary)]
    if not missing:
        return summary
    lines = summary.split("\n")
    added = [f"- {rule}" for rule in missing]
    for index, line in enumerate(lines):
        if re.match(r"^#{1,6}\s*constraints and rules\s*:?\s*$", line.strip(), re.IGNORECASE):
            rest = index + 1
            if rest < len(lines) and lines[rest].strip().lower() in ("none", "none.", "- none"):
                del lines[rest]
            lines[rest:rest] = added
            return "\n".join(lines)
    return "\n".join([*lines, "## Constraints and rules", *added])


def summary_is_valid(text: str) -> bool:
    headings = re.findall(r"^#{1,6}\s*(.+?)\s*$", text, flags=re.MULTILINE)
    found = {heading.strip().rstrip(":").lower() for heading in headings}
    if not all(name.lower() in found for name in SUMMARY_HEADINGS):
        return False
    body = re.sub(r"^#{1,6}.*$", "", text, flags=re.MULTILINE)
    return bool(body.strip())


def render_for_summary(messages: list[Message], max_chars: int) -> str:
    """The older history as plain text; the most recent part wins if it is too long."""
    lines = [_render(message) for message in messages]
    if sum(len(line) + 1 for line in lines) <= max_chars:
        return "\n".join(lines)
    head = lines[0][: max_chars // 4] if _is_summary(messages[0]) else ""
    tail: list[str] = []
    used = len(head)
    for line in reversed(lines[1:] if head else lines):
        if used + len(line) + 1 > max_chars:
            break
        tail.append(line)
        used += len(line) + 1
    omitted = "[... earlier messages omitted: too long to summarize in one go ...]"
    return "\n".join(part for part in (head, omitted, *reversed(tail)) if part)


def _render(message: Message) -> str:
    if message.role == "tool":
        flag = " (error)" if message.is_error else ""
        return f"Tool result {message.tool_name}{flag}: {message.text[:RENDER_TOOL_CHARS]}"
    if message.role == "user":
        return message.text if _is_summary(message) else f"Person: {message.text}"
    parts = [f"Assistant: {message.text}"] if message.text else []
    for call in message.tool_calls:
        arguments = json.dumps(call.arguments, ensure_ascii=False)[:RENDER_TOOL_CHARS]
        parts.append(f"Assistant called {call.name} {arguments}")
    return "\n".join(parts)


def _text_of(message: Message) -> str:
    return message.text + "".join(str(call.arguments) for call in message.tool_calls)


_is_summary = is_compaction_marker
