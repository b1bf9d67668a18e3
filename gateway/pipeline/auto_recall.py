"""Auto-recall: the most confident memory hits for the person's message, before the model sees it.

A model that has to remember to call `memory_search` often does not, and answers "I don't
know" about something written down months ago. So before each turn of a private session (a
DM whose sender owns the workspace: `Route.private`, decided once by the router; never a
group, never another person's memory) the message is searched in the recall index and the
few hits at least `auto_recall_min_similarity` alike are given to the model in a small block,
within `auto_recall_max_tokens`. A block is given only when it is likely to help
(gateway/pipeline/recall_gate.py): small talk ("thanks", "ok", "👍") is not searched, a hit
must name whom the message names, and one sharing a topic word with the message is trusted
AGREEMENT_MARGIN under the threshold. Weak hits add nothing.

The block travels with the current-time note after the history (`SystemPrompt.now`,
providers/caching.py): request-only, never in the transcript, and the cached prefix (tools,
system prompt, history) stays byte-identical. What is already in front of the model is left
out: workspace files loaded whole into the system prompt (MEMORY.md, USER.md, today's note)
and the part of the current conversation still in the history.

Figures (bench/auto_recall.py): cost in prompt tokens per turn and benefit (questions
answered from the block without a `memory_search` call), on scripted questions and on the
LoCoMo development conversations.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Coroutine, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gateway.agent.context_files import ContextFile
from gateway.agent.conversation import SystemPrompt
from gateway.agent.sessions import Session, transcript_path
from gateway.pipeline.recall_gate import Message
from memory.layout import MEMORY_DIR, PRIVATE_FILES, SESSIONS_DIR

if TYPE_CHECKING:
    from gateway.agent.metrics import Registry
    from gateway.config.memory import MemorySettings
    from gateway.pipeline.routing import Route
    from memory.search import SearchResult
    from memory.service import MemoryService

log = logging.getLogger(__name__)

HEADING = (
    "Recalled from memory for this message (automatic; the closest notes, possibly "
    "incomplete or out of date; memory_search finds more):"
)
# A search that takes longer (the first one of a workspace loads the embedder) is left to
# finish in the background; this turn goes on without a block.
SEARCH_TIMEOUT_SECONDS = 2.0
CHARS_PER_TOKEN = 4  # the estimate used for every budget (gateway/agent/sessions.py)
MIN_HIT_CHARS = 120  # a hit shown in less than this is not worth its heading
# Below the threshold by at most this, a hit is shown when it shares a topic word with the
# message (the keyword side agreeing with the vector side; see `agrees`).
AGREEMENT_MARGIN = 0.03


@dataclass(frozen=True, slots=True)
class RecallBlock:
    text: str = ""
    hits: int = 0

    @property
    def tokens(self) -> int:
        return -(-len(self.text) // CHARS_PER_TOKEN) if self.text else 0


NO_BLOCK = RecallBlock()


@dataclass(frozen=True, slots=True)
class RecallOptions:
    min_similarity: float  # the query's cosine with the hit's chunk (see `confident`)
    max_hits: int
    max_tokens: int

    @classmethod
    def from_settings(cls, settings: MemorySettings) -> RecallOptions:
        return cls(
            settings.auto_recall_min_similarity,
            settings.auto_recall_max_hits,
            settings.auto_recall_max_tokens,
        )


class AutoRecall:
    """Builds the block for one turn; counted in /metrics (`clawgate_auto_recall_*`)."""

    def __init__(
        self, memory: MemoryService, options: RecallOptions, registry: Registry | None = None
    ) -> None:
        self.memory = memory
        self.options = options
        self._pending: set[asyncio.Task[object]] = set()
        self.turns = (
            registry.counter(
                "clawgate_auto_recall_turns_total",
                "Private turns by auto-recall outcome: added (a block was given), none (small "
                "talk, or no hit was confident and about the message), late (the search was too "
                "slow), error.",
                ["outcome"],
            )
            if registry is not None
            else None
        )
        self.tokens = (
            registry.counter(
                "clawgate_auto_recall_tokens_total",
                "Estimated prompt tokens of the auto-recall blocks given (chars / 4).",
            )
            if registry is not None
            else None
        )

    def _count(self, outcome: str, block: RecallBlock = NO_BLOCK) -> None:
        if self.turns is not None:
            self.turns.inc(outcome=outcome)
        if self.tokens is not None and block.tokens:
            self.tokens.inc(block.tokens)

    async def add_to(
        self, system: SystemPrompt, route: Route, session: Session, files: Sequence[ContextFile]
    ) -> SystemPrompt:
        """`system` with the block for the person's latest message; `system` unchanged when
        the route is not private, nothing is confident enough, or recall fails."""
        if not route.private:
            return system
        question = latest_question(session)
        if not question:
            return system
        if not Message(question).worth_searching:
            self._count("none")  # small talk: nothing to look up, not even a file listing
            return system
        skip = in_view(route, session, files)
        if not await asyncio.to_thread(has_recallable, route.workspace, skip, session):
            self._count("none")  # nothing outside the prompt: no index, no model to load
            return system
        try:
            block = await self._bounded(self.block(route, question, skip))
        except TimeoutError:
            log.info(
                "auto-recall skipped in %s: the search took over %.1f s",
                route.session_key,
                SEARCH_TIMEOUT_SECONDS,
            )
            self._count("late")
            return system
        except Exception as exc:  # recall is a help: its failure never costs the answer
            log.warning(
                "auto-recall failed in %s: %s: %s",
                route.session_key,
                type(exc).__name__,
                str(exc)[:200],
            )
            self._count("error")
            return system
        self._count("added" if block.hits else "none", block)
        if not block.hits:
            return system
        now = f"{system.now}\n\n{block.text}" if system.now else block.text
        return replace(system, now=now)

    async def _bounded(self, work: Coroutine[Any, Any, RecallBlock]) -> RecallBlock:
        """The block, or TimeoutError after SEARCH_TIMEOUT_SECONDS; a late search finishes
        in the background (cancelling it mid-way could leave the index's model half-loaded)."""
        task: asyncio.Task[RecallBlock] = asyncio.ensure_future(work)
        try:
            return await asyncio.wait_for(asyncio.shield(task), SEARCH_TIMEOUT_SECONDS)
        except TimeoutError:
            self._pending.add(task)
            task.add_done_callback(self._forget)
            raise

    def _forget(self, task: asyncio.Task[object]) -> None:
        self._pending.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.debug("a late auto-recall search failed: %s", task.exception())

    async def block(
        self, route: Route, question: str, skip: dict[str, int] | None = None
    ) -> RecallBlock:
        """The block for `question` in the route's workspace. `skip`: path -> first line
        already in front of the model (0: the whole file). Small talk is not searched."""
        message = Message(question)
        if not message.worth_searching:
            return NO_BLOCK
        found = await self.candidates(route.workspace, question)
        return render(found, self.options, skip or {}, message)

    async def candidates(self, workspace: Path, question: str) -> list[SearchResult]:
        """The search behind a block: a few more hits than shown (some may be in view), each
        shown in at most its share of the budget."""
        opts = self.options
        response = await self.memory.search(
            workspace, question, max_results=opts.max_hits + 2, snippet_chars=hit_chars(opts)
        )
        return response.results


def hit_chars(opts: RecallOptions) -> int:
    """What one hit may show: its share of the budget, less its heading."""
    budget = opts.max_tokens * CHARS_PER_TOKEN - len(HEADING) - 1
    return max(MIN_HIT_CHARS, budget // opts.max_hits - 40)


def render(
    results: Sequence[SearchResult], opts: RecallOptions, skip: dict[str, int], message: Message
) -> RecallBlock:
    """The block's text: confident hits that agree with the message (recall_gate), best
    first, while they fit in the budget."""
    budget = opts.max_tokens * CHARS_PER_TOKEN
    used = len(HEADING)
    parts = [HEADING]
    for result in results:
        if len(parts) > opts.max_hits:
            break
        if not confident(result, opts) or _shown_already(result, skip):
            continue
        body = (
            " ".join(result.snippet.split())
            if result.source == "sessions"
            else "\n".join(line.rstrip() for line in result.snippet.splitlines() if line.strip())
        )
        head = f"\n[{result.path} lines {result.start_line}-{result.end_line}]\n"
        room = budget - used - len(head)
        if room < MIN_HIT_CHARS:
            break
        if len(body) > room:
            body = body[: room - 1].rstrip() + "…"
        if not agrees(result, body, message, opts):
            continue  # about someone or something else
        parts.append(head + body)
        used += len(head) + len(body)
    if len(parts) == 1:
        return NO_BLOCK
    return RecallBlock("".join(parts), len(parts) - 1)


def confident(result: SearchResult, opts: RecallOptions) -> bool:
    """Worth showing unasked: the query's cosine with the chunk reaches the threshold less
    AGREEMENT_MARGIN (where only a hit sharing a topic word with the message is shown:
    `agrees`).

    The result's `score` ranks (reciprocal rank fusion): some chunk is always first, however
    unrelated, so it says nothing about whether memory holds an answer at all. The cosine
    does. Measured on the LoCoMo development conversations with the local embedder
    (bench/auto_recall.py locomo): hits holding an answer score 0.82-0.89 (10th-90th
    percentile), hits for a question asked in a workspace that cannot answer it 0.76-0.81.
    A hit found by keywords only (no cosine: keyword-only mode, not yet embedded) is not
    shown unasked.
    """
    return result.cosine is not None and result.cosine >= opts.min_similarity - AGREEMENT_MARGIN


def agrees(result: SearchResult, shown: str, message: Message, opts: RecallOptions) -> bool:
    """The text a hit shows is about the message (gateway/pipeline/recall_gate.py): it names
    whom the message names, and a hit between the threshold less AGREEMENT_MARGIN and the
    threshold shares a topic word with it too. Measured on the LoCoMo development
    conversations (bench/auto_recall.py locomo, tuning figures): the names take the blocks
    for questions asked in the wrong workspace from 10% to 1%; the margin, taken only with a
    shared word, keeps most of what a lower threshold would add."""
    if not message.names_agree(shown):
        return False
    cosine = result.cosine if result.cosine is not None else -1.0  # confident() said no
    return cosine >= opts.min_similarity or message.topic_agrees(shown)


def _shown_already(result: SearchResult, skip: dict[str, int]) -> bool:
    first = skip.get(result.path)
    if first is None:
        return False
    return first == 0 or result.start_line >= first


def latest_question(session: Session) -> str:
    """The person's latest message (a resumed turn may end in a tool result)."""
    for message in reversed(session.history):
        if message.role == "user":
            return message.text.strip()
    return ""


def has_recallable(workspace: Path, skip: dict[str, int], session: Session) -> bool:
    """Is there memory outside what the model already has? A new person's workspace (seeded
    files loaded whole, today's note, this conversation) has none: then no index is opened
    and no model loaded for them. A few directory listings."""
    root = Path(os.path.realpath(workspace))
    for name in PRIVATE_FILES:
        if name not in skip and (root / name).is_file():
            return True
    notes = root / MEMORY_DIR
    if notes.is_dir():
        for folder, dirs, names in os.walk(notes):
            dirs[:] = [d for d in dirs if not d.startswith(".")]
            for name in names:
                rel = (Path(folder) / name).relative_to(root).as_posix()
                if name.endswith(".md") and rel not in skip:
                    return True
    if session.compactions:  # this conversation's older part is out of the history
        return True
    # Earlier conversations of this DM: its transcripts archived by /new.
    current = transcript_path(root, session.key)
    try:
        return any(
            entry.name.startswith(f"{current.stem}.")
            and entry.name.endswith(".jsonl")
            and entry.name != current.name
            for entry in os.scandir(root / SESSIONS_DIR)
        )
    except OSError:
        return False


def in_view(route: Route, session: Session, files: Sequence[ContextFile]) -> dict[str, int]:
    """What the model already has: files loaded whole into the system prompt (the whole
    file), and the current transcript from the oldest line still in the history."""
    skip = {item.name: 0 for item in files if item.report.status == "loaded"}
    entries = [entry for entry in session.entry_ids if entry >= 0]
    if entries:
        workspace = os.path.realpath(route.workspace)
        path = os.path.realpath(transcript_path(route.workspace, session.key))
        rel = os.path.relpath(path, workspace).replace(os.sep, "/")
        skip[rel] = min(entries) + 1  # entry n is the transcript's line n + 1
    return skip
