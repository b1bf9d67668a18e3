"""Tidying: a daily pass that keeps MEMORY.md short, without duplicates, and true.

MEMORY.md is loaded into every private prompt, so it grows into the prompt budget: the same
fact written three times, a superseded address beside the new one, a day's detail that
belongs in a dated note. Once a day at most per person, and only when MEMORY.md changed since
the last pass and shows a need (duplicate lines, or past `TIDY_FILL` of its prompt budget),
one model call in the private heartbeat context (no person present, no tools, kind `tidying`:
the background model when one is set, skipped when the person is over budget) reads it with
line numbers and answers with edit operations (delete a repeated line, replace one to merge
two, strike a superseded one in memory/corrections.py's format, move detail to today's
note), applied here: the model never retypes the file, so a pass costs about one reading of
MEMORY.md, and a fact it does not name stays word for word.

Guards, because a model's rewrite is how memory gets lost:
- a pass whose request would pass `[memory] tidy_max_tokens` is not made;
- a rewrite that would delete more than `tidy_max_drop_share` of the non-empty lines is
  refused: nothing is written, the refusal is logged, counted and kept in the state file.
  Moved and struck lines count as kept; a replaced line only when its replacement keeps its
  content (at least `KEPT_SHARE` of its words), so "replace every line with `.`" is a pass
  that drops everything, not one that keeps everything;
- MEMORY.md changed while the model worked (a DM turn wrote it): nothing is written;
- the write happens in the person's DM lane (never beside a turn), atomically, and is a
  commit of its own with reason `tidy`, so `clawgate memory undo` takes it back.

State per workspace in `.clawgate-tidy.json` (invisible to the tools, not versioned): the
day of the last pass, its outcome and tokens. Figures: bench/tidying.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import re
import weakref
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import date, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from gateway.agent.conversation import Message, SystemPrompt
from gateway.agent.prompt import build_system_prompt
from gateway.agent.providers.base import BudgetExceeded, ProviderError
from gateway.agent.scope import usage_scope
from gateway.agent.sessions import estimate_tokens
from gateway.features.heartbeat_host import discover_workspaces
from memory.atomic import atomic_write_text, make_private_dirs
from memory.corrections import is_struck, strike
from memory.layout import MEMORY_FILE, TIDY_STATE_FILE, daily_note, dm_session_key

if TYPE_CHECKING:
    from gateway.agent.metrics import Counter, Registry
    from gateway.pipeline.ports import TidyParts

log = logging.getLogger(__name__)

CHECK_SECONDS = 3600.0  # how often the service looks for a workspace due a pass
TIDY_FILL = 0.7  # MEMORY.md past this share of its prompt budget is due a pass
MIN_LINES = 8  # fewer non-empty lines: nothing worth a model call
SIMILAR = 0.8  # two lines sharing this share of their words are duplicate candidates
KEPT_SHARE = 0.5  # a replaced line is kept when its replacement has this share of its words
TIDY_PROMPT = """\
[Memory tidying, not from the person: nobody will see your reply.]
Below is MEMORY.md with line numbers: the durable memory loaded into every private
conversation. It should hold each fact once, only what is still true, and stay under
{budget} characters (now {size}). Answer with edit operations, one per line, and nothing
else:
delete N          line N repeats another line (keep the better one)
replace N: TEXT   line N becomes TEXT (to merge two lines into one: replace one, delete
                  the other)
strike N          line N is contradicted by a later line (it stays, marked superseded)
move N            line N is detail, not a durable fact (one day's events, a long log):
                  it goes to the dated note {note}
Never delete a fact that is not repeated elsewhere. Leave headings alone. If nothing
needs doing, answer NONE.

MEMORY.md:
{numbered}"""
SETTLED = frozenset({"tidied", "unchanged", "refused", "over_budget"})
_OP = re.compile(
    r"^\s*[-*]?\s*(delete|strike|move)\s+(\d+)\s*$|"
    r"^\s*[-*]?\s*replace\s+(\d+)\s*:\s?(.*\S)\s*$",
    re.IGNORECASE,
)
Ops = dict[int, tuple[str, str]]  # line number -> (operation, new text for replace)


@dataclass(frozen=True, slots=True)
class TidyOutcome:
    # tidied, unchanged, not_due, refused, over_budget, unparsed, raced, skipped, failed
    status: str
    note: str = ""
    input_tokens: int = 0
    output_tokens: int = 0
    dropped: int = 0  # lines the rewrite would lose
    moved: int = 0


def content_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


def _words(line: str) -> frozenset[str]:
    return frozenset(re.findall(r"\w+", line.casefold()))


def has_duplicates(text: str) -> bool:
    """Two non-struck lines with the same words, or nearly (cheap: no model)."""
    seen: list[frozenset[str]] = []
    for line in content_lines(text):
        if line.lstrip().startswith("#") or is_struck(line):
            continue
        words = _words(line)
        if len(words) < 2:
            continue
        for other in seen:
            if len(words & other) / len(words | other) >= SIMILAR:
                return True
        seen.append(words)
    return False


def parse_answer(answer: str, text: str) -> Ops | None:
    """The edit operations of the model's answer on `text` (the first one per line wins;
    headings, blank lines and lines out of range are left alone); {} for NONE; None when
    the answer is not in form (no operation, and not NONE)."""
    lines = text.split("\n")
    ops: Ops = {}
    seen_any = False
    for raw in answer.splitlines():
        match = _OP.match(raw)
        if not match:
            continue
        seen_any = True
        kind, number, replaced, new = match.groups()
        line = int(number or replaced)
        if (
            not 1 <= line <= len(lines)
            or not lines[line - 1].strip()
            or lines[line - 1].lstrip().startswith("#")
            or line in ops
        ):
            continue
        ops[line] = ("replace", new) if replaced else (kind.lower(), "")
    if not seen_any:
        return {} if answer.strip().upper().strip(".` ") == "NONE" else None
    return ops


def apply_ops(text: str, ops: Ops, when: str) -> tuple[str, list[str]]:
    """(new MEMORY.md, lines moved out) after the operations."""
    kept: list[str] = []
    moved: list[str] = []
    for number, line in enumerate(text.split("\n"), start=1):
        kind, new = ops.get(number, ("keep", ""))
        if kind == "keep":
            kept.append(line)
        elif kind == "replace":
            kept.append(new)
        elif kind == "strike":
            kept.append(line if is_struck(line) else strike(line, when))
        elif kind == "move":
            moved.append(line)
    return "\n".join(kept), moved


def keeps_content(old: str, new: str) -> bool:
    """Whether the replacement `new` of line `old` keeps what it said: most of its words
    (a merge or a correction does), or, for a line without words, its text."""
    words = _words(old)
    if not words:
        return old.strip() in new
    return len(words & _words(new)) >= KEPT_SHARE * len(words)


def lines_dropped(ops: Ops, text: str) -> int:
    """Lines of `text` the operations lose: deleted ones, and replaced ones whose content the
    replacement does not keep (struck and moved lines are kept)."""
    lines = text.split("\n")
    return sum(
        1
        for number, (kind, new) in ops.items()
        if kind == "delete" or (kind == "replace" and not keeps_content(lines[number - 1], new))
    )


class HasStatus(Protocol):
    @property
    def status(self) -> str: ...


OutcomeT = TypeVar("OutcomeT", bound=HasStatus)


class DailyPass(Generic[OutcomeT]):
    """A background pass over every workspace, looked for every `check_seconds` (a Service:
    start/stop, like the heartbeats). Tidying and consolidation (consolidation.py) are its
    two kinds: each says in `visit` whether a person is due and what the pass did."""

    name = "memory-pass"

    def __init__(self, parts: TidyParts, *, check_seconds: float = CHECK_SECONDS) -> None:
        self.parts = parts
        self.clock, self.all_settings = parts.clock, parts.settings
        self.settings = self.all_settings.memory
        self.model = parts.metered  # counted as the person's
        self.check_seconds = check_seconds
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self._task = asyncio.create_task(self._loop(), name=self.name)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _loop(self) -> None:
        while True:
            await self.run_due()
            await asyncio.sleep(self.check_seconds)

    async def run_due(self) -> dict[str, OutcomeT]:
        """A pass for every workspace due one; what each did."""
        done: dict[str, OutcomeT] = {}
        for person, workspace in discover_workspaces(self.all_settings.workspaces_dir):
            try:
                outcome = await self.visit(person, workspace)
            except Exception:  # one person's broken files never stop the others' passes
                log.exception("%s failed for %s", self.name, person)
                outcome = self.failed()
            if outcome.status != "not_due":
                done[person] = outcome
        return done

    async def visit(self, person: str, workspace: Path) -> OutcomeT:
        """The pass for one person if due (an outcome with status "not_due" if not)."""
        raise NotImplementedError

    def failed(self) -> OutcomeT:
        raise NotImplementedError

    def _now(self, person: str) -> datetime:
        """Now in the person's zone: their night is when their passes run, and their day
        is the one a pass dates its work by."""
        return self.clock.now().astimezone(self.all_settings.zone_of(person))

    def _today(self, person: str) -> date:
        return self._now(person).date()


class Tidier(DailyPass[TidyOutcome]):
    """The daily MEMORY.md tidying for every workspace."""

    name = "memory-tidying"

    def __init__(self, parts: TidyParts, *, check_seconds: float = CHECK_SECONDS) -> None:
        super().__init__(parts, check_seconds=check_seconds)
        self.passes = _passes(parts.metrics.registry)

    async def visit(self, person: str, workspace: Path) -> TidyOutcome:
        return await self.tidy(person, workspace)

    def failed(self) -> TidyOutcome:
        return TidyOutcome("failed")

    def due(self, person: str, workspace: Path, text: str | None) -> str:
        """Why a pass is due ("" when it is not)."""
        if text is None or len(content_lines(text)) < MIN_LINES:
            return ""
        state = read_state(workspace)
        if state.get("day") == self._today(person).isoformat():
            return ""  # at most once a day
        if state.get("after") == _digest(text):
            return ""  # nothing changed since the last pass
        budget = self.all_settings.prompt.file_max_chars
        if len(text) > TIDY_FILL * budget:
            return f"{len(text)} of {budget} characters"
        return "duplicate lines" if has_duplicates(text) else ""

    async def tidy(self, person: str, workspace: Path, *, force: bool = False) -> TidyOutcome:
        path = workspace / MEMORY_FILE
        text = await asyncio.to_thread(_read, path)
        reason = "asked" if force and text is not None else self.due(person, workspace, text)
        if not reason or text is None:
            return TidyOutcome("not_due")
        outcome = await self._pass(person, workspace, text)
        self.passes.inc(outcome=outcome.status)
        level = logging.WARNING if outcome.status in ("refused", "unparsed") else logging.INFO
        log.log(
            level,
            "memory tidying for %s (%s): %s%s",
            person,
            reason,
            outcome.status,
            f" ({outcome.note})" if outcome.note else "",
        )
        # The same text would be judged the same way again: not asked about until it changes.
        # A pass that failed, raced or got garbage tries again on another day.
        after = await asyncio.to_thread(_read, path) if outcome.status in SETTLED else None
        await asyncio.to_thread(
            write_state,
            workspace,
            {
                "day": self._today(person).isoformat(),
                "after": _digest(after) if after else "",
                **asdict(outcome),
            },
        )
        return outcome

    async def _pass(self, person: str, workspace: Path, text: str) -> TidyOutcome:
        today = self._today(person)
        note = daily_note(today)
        budget = self.all_settings.prompt.file_max_chars
        numbered = "\n".join(f"{n}: {line}" for n, line in enumerate(text.split("\n"), start=1))
        prompt = TIDY_PROMPT.format(budget=budget, size=len(text), note=note, numbered=numbered)
        system = self._system(person)
        # The answer is a short list of operations: the request is most of the cost.
        estimate = (
            estimate_tokens(system.joined())
            + estimate_tokens(prompt)
            + len(content_lines(text)) * 4
        )
        if estimate > self.settings.tidy_max_tokens:
            return TidyOutcome(
                "over_budget", f"~{estimate} tokens, the limit is {self.settings.tidy_max_tokens}"
            )
        try:
            with usage_scope(person, "tidying"):
                completion = await self.model.complete(system, [Message("user", prompt)], [])
        except BudgetExceeded:
            return TidyOutcome("skipped", "the person's budget cap is reached")
        except ProviderError as exc:
            return TidyOutcome("failed", f"the model call failed ({exc.kind})")
        usage = completion.usage
        tokens: dict[str, Any] = {
            "input_tokens": usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens,
            "output_tokens": usage.output_tokens,
        }
        ops = parse_answer(completion.text, text)
        if ops is None:
            return TidyOutcome("unparsed", "the answer held no edit operation", **tokens)
        new, moved = apply_ops(text, ops, today.isoformat())
        if new == text:
            return TidyOutcome("unchanged", **tokens)
        dropped = lines_dropped(ops, text)
        total = len(content_lines(text))
        share = dropped / max(1, total)
        if share > self.settings.tidy_max_drop_share:
            return TidyOutcome(
                "refused",
                f"the rewrite would drop {dropped} of {total} lines ({share:.0%}, "
                f"the limit is {self.settings.tidy_max_drop_share:.0%}); nothing "
                "was written",
                dropped=dropped,
                moved=len(moved),
                **tokens,
            )
        applied = await self._apply(person, workspace, text, new, moved, note)
        if not applied:
            return TidyOutcome(
                "raced", "MEMORY.md changed meanwhile; nothing was written", **tokens
            )
        return TidyOutcome(
            "tidied",
            f"{total} -> {len(content_lines(new))} lines, {len(moved)} moved",
            dropped=dropped,
            moved=len(moved),
            **tokens,
        )

    def _system(self, person: str) -> SystemPrompt:
        now = self._now(person)
        return build_system_prompt(
            [],
            private=True,
            now=now,
            run_info=f"Memory tidying for {person}; no one is chatting right now.",
        )

    async def _apply(
        self, person: str, workspace: Path, old: str, new: str, moved: list[str], note: str
    ) -> bool:
        """Write in the DM lane (never beside a turn), if MEMORY.md is still `old`."""
        return await write_in_lane(
            self.parts,
            person,
            workspace,
            {MEMORY_FILE: old},
            lambda: _write(workspace, new, moved, note),
            reason="tidy",
            what="memory tidying",
            note=f"MEMORY.md tidied; {len(moved)} line(s) moved to {note}",
        )


async def write_in_lane(
    parts: TidyParts,
    person: str,
    workspace: Path,
    expected: dict[str, str | None],
    write: Callable[[], None],
    *,
    reason: str,
    what: str,
    note: str,
) -> bool:
    """Run `write` in the person's DM lane (never beside a turn) if every file of `expected`
    still reads as it did when the pass read it; hand edits first are a commit of their
    own, the write one commit with `reason` (so `clawgate memory undo` takes it back).
    Whether it wrote."""
    written: list[bool] = []

    async def job() -> None:
        await parts.versioning.commit(workspace, "hand edit", note=f"before {what}")
        for name, old in expected.items():
            if await asyncio.to_thread(_read, workspace / name) != old:
                written.append(False)
                return
        await asyncio.to_thread(write)
        await parts.versioning.commit(workspace, reason, session=dm_session_key(person), note=note)
        written.append(True)

    await parts.lanes.submit(dm_session_key(person), job)
    return bool(written and written[0])


_COUNTERS: weakref.WeakKeyDictionary[Registry, Counter] = weakref.WeakKeyDictionary()


def _passes(registry: Registry) -> Counter:
    """The passes counter of `registry` (one however many tidiers a gateway had)."""
    counter = _COUNTERS.get(registry)
    if counter is None:
        counter = _COUNTERS[registry] = registry.counter(
            "clawgate_memory_tidy_total",
            "Daily MEMORY.md tidying passes by outcome (tidied, unchanged, refused, "
            "over_budget, unparsed, raced, skipped, failed).",
            ["outcome"],
        )
    return counter


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def _write(workspace: Path, new: str, moved: list[str], note: str) -> None:
    if moved:
        target = workspace / note
        make_private_dirs(target.parent)
        existing = _read(target) or ""
        sep = "" if not existing or existing.endswith("\n") else "\n"
        atomic_write_text(target, existing + sep + "\n".join(moved) + "\n")
    atomic_write_text(workspace / MEMORY_FILE, new)


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def read_state(workspace: Path, name: str = TIDY_STATE_FILE) -> dict[str, object]:
    try:
        data = json.loads((workspace / name).read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return {}
    return data if isinstance(data, dict) else {}


def write_state(workspace: Path, state: dict[str, object], name: str = TIDY_STATE_FILE) -> None:
    try:
        atomic_write_text(workspace / name, json.dumps(state, sort_keys=True))
    except OSError as exc:
        log.warning("could not save %s of %s: %s", name, workspace, exc)


def tidying() -> Callable[[TidyParts], Tidier | Off]:
    """The service factory for GatewayApp (`services=`), or a no-op when turned off."""

    def make(parts: TidyParts) -> Tidier | Off:
        return Tidier(parts) if parts.settings.memory.tidy else Off()

    return make


class Off:
    """A pass turned off: a Service that does nothing."""

    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        return None
