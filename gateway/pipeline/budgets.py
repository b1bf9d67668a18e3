"""Budgets: a daily and a monthly cap per person, a daily cap per group chat, the accounting.

- Every model call made for a person, whatever asked for it (a conversation turn and its tool
  rounds, a flush, a compaction, a heartbeat, a reminder's task, tidying, a capture), passes
  `Accounting.admit` in the metered provider (gateway/agent/metrics.py): a call for a person or
  group at a cap is refused there (`BudgetExceeded`), so no caller can skip the check.
- Checked against what is billed, one call at a time per capped person and per capped group
  (serialized, not reserved): a call's cost is known only when it returns, and a reservation
  would need an upper bound before it (the tokenizer, the output length, a fallback model's
  price) that we do not have; one too low lets a burst through, one too high refuses calls
  that fit. So a cap is passed by at most one call, however many turns are in flight. People
  without caps (the owner by default) are never held.
- A message for a person or group at a cap gets a polite reply instead of a turn, when it
  arrives and again when its turn would start (it may have waited behind others); a turn
  stopped by a refused call ends with the same reply. Their commands (/usage) still answer.
- Group turns are billed to the owner, whose default caps never limit: each group chat has a
  daily token cap of its own (`[budget] group_daily_tokens`), whoever speaks in it.
- After each model call the owner gets a note, once per cap and period, when a person passes
  `warn_at` (80%) of a cap and when they reach it (a group: when it reaches its cap), through
  the one delivery path.
- The owner is capped only by their own `[budget.workspaces.<owner>]` entry, if any.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from datetime import date

from gateway.agent.conversation import Usage
from gateway.agent.metrics import GatewayMetrics
from gateway.agent.providers.base import BudgetExceeded
from gateway.agent.scope import NO_PERSON, UsageScope
from gateway.config.settings import Settings
from gateway.pipeline.keyed_locks import KeyedLocks
from gateway.stores.usage import Periods, Totals, UsageLedger
from memory.layout import parse_group_session_key

log = logging.getLogger(__name__)

REFUSAL = {
    "daily": (
        "I've reached today's usage limit for our conversations, so I can't answer "
        "again until tomorrow. Your message was received; send it again then. "
        "(/usage shows what was used.)"
    ),
    "monthly": (
        "I've reached this month's usage limit for our conversations, so I can't "
        "answer again until {reset}. Your message was received; send it again "
        "then. (/usage shows what was used.)"
    ),
    "group": (
        "This group has used today's allowance for the assistant, so I can't answer "
        "here again until tomorrow. Your message was received; send it again then."
    ),
}

Notify = Callable[[str, str], Awaitable[object]]  # (text, idempotency key)


@dataclass(frozen=True, slots=True)
class Cap:
    period: str  # daily | monthly
    unit: str  # tokens | usd
    limit: float

    def used(self, totals: Totals) -> float:
        return float(totals.tokens) if self.unit == "tokens" else totals.cost

    def show(self, amount: float) -> str:
        return f"{amount:,.0f} tokens" if self.unit == "tokens" else f"${amount:,.2f}"


@dataclass(frozen=True, slots=True)
class CapStatus:
    cap: Cap
    used: float

    @property
    def share(self) -> float:
        return self.used / self.cap.limit if self.cap.limit else 0.0

    @property
    def reached(self) -> bool:
        return self.used >= self.cap.limit

    def describe(self) -> str:
        cap = self.cap
        return (
            f"{cap.period} cap: {cap.show(self.used)} of {cap.show(cap.limit)} ({self.share:.0%})"
        )


def caps_for(settings: Settings, person: str) -> list[Cap]:
    """The person's caps (none for the owner unless their own entry sets some)."""
    budget = settings.budget
    own = budget.workspaces.get(person)
    defaults = person != settings.owner
    caps = []
    for period in ("daily", "monthly"):
        for unit in ("tokens", "usd"):
            name = f"{period}_{unit}"
            value = getattr(own, name, None) if own is not None else None
            if value is None:
                value = getattr(budget, name) if defaults else 0
            if value:
                caps.append(Cap(period, unit, float(value)))
    return caps


def group_caps(settings: Settings) -> list[Cap]:
    """Every group chat's own cap (none when `group_daily_tokens` is 0)."""
    limit = settings.budget.group_daily_tokens
    return [Cap("daily", "tokens", float(limit))] if limit else []


def group_name(key: str) -> str:
    """A group chat as the owner's note names it (`telegram chat -1001`)."""
    parsed = parse_group_session_key(key)
    return f"{parsed[0]} chat {parsed[1]}" if parsed else key


class Budgets:
    """Checks a person's and a group's caps against the usage ledger; notes to the owner."""

    def __init__(self, settings: Settings, ledger: UsageLedger, notify: Notify) -> None:
        self.settings = settings
        self.ledger = ledger
        self.notify = notify
        self._noted: set[str] = set()

    def caps(self, person: str) -> list[Cap]:
        return caps_for(self.settings, person) if person != NO_PERSON else []

    async def status(self, person: str) -> list[CapStatus]:
        caps = self.caps(person)
        if not caps:
            return []
        periods = self.ledger.periods()
        spent: dict[str, Totals] = {}
        for period in {cap.period for cap in caps}:
            since = periods.today if period == "daily" else periods.month
            spent[period] = await self.ledger.spent(person, since)
        return [CapStatus(cap, cap.used(spent[cap.period])) for cap in caps]

    async def group_status(self, group: str) -> list[CapStatus]:
        caps = group_caps(self.settings) if group else []
        if not caps:
            return []
        spent = await self.ledger.group_spent(group, self.ledger.periods().today)
        return [CapStatus(cap, cap.used(spent)) for cap in caps]

    def cap_keys(self, scope: UsageScope) -> list[str]:
        """What a call in `scope` is checked against, in the one order every call takes them:
        the person (if capped), then the group (if capped)."""
        keys = [f"person:{scope.person}"] if self.caps(scope.person) else []
        if scope.group and group_caps(self.settings):
            keys.append(f"group:{scope.group}")
        return keys

    async def refusal(self, person: str, group: str = "") -> str | None:
        """The polite reply when `person` (or the group chat `group`) is at a cap, else None
        (costs nothing without caps)."""
        reached = [s for s in await self.status(person) if s.reached]
        if reached:
            periods = self.ledger.periods()
            if any(s.cap.period == "monthly" for s in reached):
                return REFUSAL["monthly"].format(reset=_day(periods.next_month))
            return REFUSAL["daily"]
        if any(s.reached for s in await self.group_status(group)):
            return REFUSAL["group"]
        return None

    async def after_usage(self, person: str, group: str = "") -> None:
        """Note to the owner when `person` passed the warning share of a cap, or reached it,
        and when `group` reached its cap."""
        warn_at = self.settings.budget.warn_at
        if not warn_at:
            return
        periods = self.ledger.periods()
        for status in await self.status(person):
            level = "reached" if status.reached else "warn" if status.share >= warn_at else ""
            if not level:
                continue
            period = (
                periods.today.isoformat()
                if status.cap.period == "daily"
                else periods.month.isoformat()[:7]
            )
            key = f"budget:{person}:{status.cap.period}:{status.cap.unit}:{period}:{level}"
            await self._note_once(key, self._note(person, status, periods), person)
        for status in await self.group_status(group):
            if status.reached:
                key = f"budget-of-group {group}:{periods.today.isoformat()}:reached"
                await self._note_once(key, self._group_note(group, status), group)

    async def _note_once(self, key: str, text: str, about: str) -> None:
        if key in self._noted:
            return
        if len(self._noted) > 10_000:  # only saves outbox look-ups: the key dedupes too
            self._noted.clear()
        self._noted.add(key)
        try:
            await self.notify(text, key)
        except Exception:
            log.exception("budget note about %s not delivered", about)

    def _group_note(self, group: str, status: CapStatus) -> str:
        cap = status.cap
        return (
            f"Budget: the group {group_name(group)} reached its daily cap of "
            f"{cap.show(cap.limit)} ({cap.show(status.used)} used). I answer there again "
            f"tomorrow; [budget] group_daily_tokens in clawgate.toml sets the cap."
        )

    def _note(self, person: str, status: CapStatus, periods: Periods) -> str:
        who = "You have" if person == self.settings.owner else f"{person} has"
        cap = status.cap
        until = "tomorrow" if cap.period == "daily" else _day(periods.next_month)
        if status.reached:
            return (
                f"Budget: {who} reached the {cap.period} cap of {cap.show(cap.limit)} "
                f"({cap.show(status.used)} used). Their messages get a polite refusal "
                f"until {until}; [budget] in clawgate.toml sets the caps."
            )
        return (
            f"Budget: {who} used {status.share:.0%} of the {cap.period} cap "
            f"({cap.show(status.used)} of {cap.show(cap.limit)})."
        )


def _day(day: date) -> str:
    return f"{day:%B} {day.day}"


class Accounting:
    """The metered provider's usage sink: ledger, Prometheus, budget guard and notes."""

    def __init__(self, ledger: UsageLedger, budgets: Budgets, metrics: GatewayMetrics) -> None:
        self.ledger = ledger
        self.budgets = budgets
        self.metrics = metrics
        self._checks: set[asyncio.Task[None]] = set()
        self._held = KeyedLocks()  # one call at a time per capped person and group

    @contextlib.asynccontextmanager
    async def admit(self, scope: UsageScope) -> AsyncIterator[None]:
        """Around one model call and its `after_call`: refused (BudgetExceeded) when its
        person or group is at a cap; otherwise made while no other call billed to the same
        capped person or group is, so each check sees every call before it billed."""
        keys = self.budgets.cap_keys(scope) if scope.person != NO_PERSON else []
        if not keys:
            yield
            return
        async with self._held.hold(keys):
            refusal = await self.budgets.refusal(scope.person, scope.group)
            if refusal is not None:
                self.metrics.budget_refusals.inc(kind=scope.kind)
                log.info(
                    "%s call for %s%s refused: budget cap reached",
                    scope.kind,
                    scope.person,
                    f" in {scope.group}" if scope.group else "",
                )
                raise BudgetExceeded(refusal)
            yield

    async def after_call(self, scope: UsageScope, model: str, usage: Usage) -> None:
        """Counted at once, written and checked against the caps in the background: the
        answer goes on to the transcript without waiting for the state database (the next
        check waits for the write, `UsageLedger._written`)."""
        counted = self.ledger.record_soon(scope.person, scope.kind, model, usage, scope.group)
        self.metrics.usage(scope.kind, model, usage, counted.cost)
        if self.budgets.cap_keys(scope):
            task = asyncio.create_task(self._check_caps(scope), name="budget-check")
            self._checks.add(task)
            task.add_done_callback(self._checks.discard)

    async def _check_caps(self, scope: UsageScope) -> None:
        try:
            await self.budgets.after_usage(scope.person, scope.group)
        except Exception:  # a note not sent is logged; the turn is not the place to fail
            log.exception("checking %s's budget after a call failed", scope.person)

    async def settled(self) -> None:
        """Usage written and budget notes sent (before the state database closes)."""
        await self.ledger.settled()
        while self._checks:
            await asyncio.gather(*self._checks, return_exceptions=True)
