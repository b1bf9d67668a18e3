"""Standing instructions: capture a rule the person sets, in the turn they set it.

The cheap detector (memory/instructions.py, one regular expression on the person's message)
decides whether a private message may set a standing rule ("never delete anything without
asking me", "always answer in German", "don't message me before 9"). Only then one short
model call, with no tools, is asked to copy the rules out of the message word for word; a
rule that is not (nearly) the person's own wording is dropped, so neither the model nor text
quoted from elsewhere can invent one. New rules are appended to INSTRUCTIONS.md with their
provenance (day and place), which every private prompt loads: DM turns, the memory flush and
heartbeats.

Compaction asks the same keeper before it summarizes (`before_compaction`): a rule said in
the span about to be summarized and not yet in the file is written first, and the rules said
in that span are handed to the summarizer, which must carry them verbatim (the compactor
checks its output and adds any it dropped). So a rule never lives only in the conversation.

Its model calls count as kind `flush` (a background memory step, on the background model
when one is set). `/metrics`: `clawgate_standing_instructions_total{outcome}` (`kept`: a rule
written; `none`: the detector fired, the model found no rule; `failed`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import tzinfo
from pathlib import Path
from typing import TYPE_CHECKING

import gateway.workspace.paths as paths
from gateway.agent.conversation import Message, SystemPrompt, Usage
from gateway.agent.providers.base import BudgetExceeded, Provider, ProviderError
from gateway.agent.scope import usage_kind
from gateway.agent.sessions import is_compaction_marker
from gateway.clock import Clock
from memory.atomic import atomic_write_text
from memory.instructions import (
    add_instructions,
    grounded,
    looks_like_instruction,
    parse_instructions,
)
from memory.layout import INSTRUCTIONS_FILE

if TYPE_CHECKING:
    from gateway.agent.metrics import Registry

log = logging.getLogger(__name__)

EXTRACT_SYSTEM = """\
You find standing instructions in messages a person wrote to their assistant. A standing
instruction is a rule for how the assistant must act from now on or until the person says
otherwise ("never delete anything without asking me", "always answer in German", "don't
message me before 9"), not a one-off request ("delete that file") and not a question."""
EXTRACT_PROMPT = """\
[Standing-instruction check, not from the person: nobody will see your reply.]
The person's messages:
{messages}

Copy every standing instruction in them exactly in the person's words, one per line, each
line starting with "RULE: ". If there is none, answer NONE."""
TIMEOUT_SECONDS = 60.0
MAX_MESSAGE_CHARS = 2000  # of each message shown to the extractor
MAX_MESSAGES = 20  # per extraction call (compaction's span may hold more: the last ones)


@dataclass(frozen=True, slots=True)
class Kept:
    added: list[str]  # rules newly written to INSTRUCTIONS.md
    usage: Usage


def parse_rules(answer: str, said: Sequence[str]) -> list[str]:
    """The RULE lines of the model's answer that are grounded in one of the messages."""
    rules: list[str] = []
    for line in answer.splitlines():
        stripped = line.strip().lstrip("-* ").strip()
        if not stripped.upper().startswith("RULE:"):
            continue
        rule = stripped[5:].strip().strip('"\u201c\u201d').strip()
        if rule and any(grounded(rule, text) for text in said):
            rules.append(rule)
    return rules


class InstructionKeeper:
    """Detector, extraction and the file write (the person's own rules, with provenance)."""

    def __init__(
        self, provider: Provider, clock: Clock, zone: tzinfo, registry: Registry | None = None
    ) -> None:
        self.provider = provider
        self.clock = clock
        self.zone = zone
        self.outcomes = (
            registry.counter(
                "clawgate_standing_instructions_total",
                "Private messages the standing-instruction detector fired on, by outcome: kept "
                "(a rule was written to INSTRUCTIONS.md), none (no rule in it), failed.",
                ["outcome"],
            )
            if registry is not None
            else None
        )

    def _count(self, outcome: str) -> None:
        if self.outcomes is not None:
            self.outcomes.inc(outcome=outcome)

    @staticmethod
    def due(private: bool, text: str) -> bool:
        """Worth a model call? Only a private message the detector fires on."""
        return private and looks_like_instruction(text)

    def today(self) -> str:
        return self.clock.now().astimezone(self.zone).date().isoformat()

    async def keep(self, workspace: Path, messages: Sequence[str], provenance: str) -> Kept:
        """Extract the rules of `messages` and append the new ones to INSTRUCTIONS.md."""
        try:
            rules, usage = await self._extract(messages)
        except BudgetExceeded:
            raise
        except (ProviderError, TimeoutError) as exc:
            log.warning("standing-instruction check failed: %s", type(exc).__name__)
            self._count("failed")
            return Kept([], Usage())
        added = await asyncio.to_thread(self._write, workspace, rules, provenance) if rules else []
        self._count("kept" if added else "none")
        if added:
            log.info("standing instruction kept: %d new rule(s)", len(added))
        return Kept(added, usage)

    async def before_compaction(
        self, workspace: Path, span: Sequence[Message], where: str
    ) -> list[str]:
        """The rules said in `span` (the messages about to be summarized), after writing to
        INSTRUCTIONS.md any of them the file does not hold yet. No model call unless a
        message fires the detector and is not covered by a rule already in the file."""
        current = [
            item.text
            for item in parse_instructions(
                await asyncio.to_thread(_read, workspace / INSTRUCTIONS_FILE)
            )
            if not item.struck
        ]
        texts = [m.text for m in span if m.role == "user" and m.text]
        # An earlier summary is not the person's words: it carries rules, it sets none.
        said = [m.text for m in span if m.role == "user" and m.text and not is_compaction_marker(m)]
        # A rule is the message's when (nearly) all its words are in it: the extraction may
        # have fixed a typo, so a literal match would ask the model again for nothing.
        uncovered = [
            text
            for text in said
            if looks_like_instruction(text) and not any(grounded(rule, text) for rule in current)
        ]
        added: list[str] = []
        if uncovered:
            added = (
                await self.keep(
                    workspace,
                    uncovered[-MAX_MESSAGES:],
                    f"kept at compaction {self.today()}, {where}",
                )
            ).added
        carried = [rule for rule in current if any(grounded(rule, text) for text in texts)]
        return carried + [rule for rule in added if rule not in carried]

    async def _extract(self, messages: Sequence[str]) -> tuple[list[str], Usage]:
        shown = [text[:MAX_MESSAGE_CHARS] for text in messages[-MAX_MESSAGES:]]
        listing = "\n".join(f"- {' '.join(text.split())}" for text in shown)
        prompt = EXTRACT_PROMPT.format(messages=listing)
        with usage_kind("flush"):  # a background memory step, like the flush and capture
            completion = await asyncio.wait_for(
                self.provider.complete(SystemPrompt(EXTRACT_SYSTEM), [Message("user", prompt)], []),
                TIMEOUT_SECONDS,
            )
        return parse_rules(completion.text, shown), completion.usage

    def _write(self, workspace: Path, rules: list[str], provenance: str) -> list[str]:
        try:
            # Attended: the text is the owner's own words (`grounded`), said in their DM.
            target = paths.resolve_in_workspace(
                workspace, INSTRUCTIONS_FILE, private=True, write=True, attended=True
            )
            text = target.read_text(encoding="utf-8") if target.exists() else ""
        except (paths.PathRefused, OSError, UnicodeDecodeError) as exc:
            # Never overwrite a file we could not read: the rules stay in the conversation
            # and compaction tries again.
            log.warning(
                "could not read %s to add a standing instruction: %s", INSTRUCTIONS_FILE, exc
            )
            return []
        new, added = add_instructions(text, rules, provenance)
        if added:
            atomic_write_text(target, new)
        return added


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return ""
