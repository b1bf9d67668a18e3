"""Budgets: a daily and a monthly cap per person, in tokens or dollars, and the accounting.

- Before a conversation turn (gateway/pipeline/gateway.py) a person at a cap gets a polite
  reply instead, and no model is called. Their commands (/usage) still answer.
- A turn nobody asked for just now (heartbeat, a reminder's task, tidying) is not started for
  a person at a cap (`Accounting.before_call` raises BudgetExceeded).
- After each model call the owner gets a note, once per cap and period, when a person passes
  `warn_at` (80%) of a cap and when they reach it, through the one delivery path.
- The owner is capped only by their own `[budget.workspaces.<owner>]` entry, if any.

A turn already running when a cap is reached finishes (stopping it halfway would waste what
it already cost); so a cap can be passed by at most one turn.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import date

from gateway.agent.conversation import Usage
from gateway.agent.providers.base import BudgetExceeded
from gateway.agent.scope import NO_PERSON, UNASKED_KINDS, UsageScope
from gateway.config.settings import Settings
from gateway.ops.metrics import GatewayMetrics
from gateway.ops.usage import Periods, Totals, UsageLedger

log = logging.getLogger(__name__)

REFUSAL = {
    "daily": ("I've reached today's usage limit for our conversations, so I can't answer "
              "again until tomorrow. Your message was received; send it again then. "
              "(/usage shows what was used.)"),
    "monthly": ("I've reached this month's usage limit for our conversations, so I can't "
                "answer again until {reset}. Your message was received; send it again "
                "then. (/usage shows what was used.)"),
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
        return (f"{cap.period} cap: {cap.show(self.used)} of {cap.show(cap.limit)} "
                f"({self.share:.0%})")


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


class Budgets:
    """Checks a person's caps against the usage ledger; notes to the owner."""

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
            spent[period] = await self.ledger.total(person, since)
        return [CapStatus(cap, cap.used(spent[cap.period])) for cap in caps]

    async def refusal(self, person: str) -> str | None:
        """The polite reply when `person` is at a cap, else None (costs nothing without caps)."""
        reached = [s for s in await self.status(person) if s.reached]
        if not reached:
            return None
        periods = self.ledger.periods()
        if any(s.cap.period == "monthly" for s in reached):
            return REFUSAL["monthly"].format(reset=_day(periods.next_month))
        return REFUSAL["daily"]

    async def after_usage(self, person: str) -> None:
        """Note to the owner when `person` passed the warning share of a cap, or reached it."""
        warn_at = self.settings.budget.warn_at
        if not warn_at:
            return
        periods = self.ledger.periods()
        for status in await self.status(person):
            level = "reached" if status.reached else "warn" if status.share >= warn_at else ""
            if not level:
                continue
            period = periods.today.isoformat() if status.cap.period == "daily" \
                else periods.month.isoformat()[:7]
            key = f"budget:{person}:{status.cap.period}:{status.cap.unit}:{period}:{level}"
            if key in self._noted:
                continue
            if len(self._noted) > 10_000:  # only saves outbox look-ups: the key dedupes too
                self._noted.clear()
            self._noted.add(key)
            try:
                await self.notify(self._note(person, status, periods), key)
            except Exception:
                log.exception("budget note about %s not delivered", person)

    def _note(self, person: str, status: CapStatus, periods: Periods) -> str:
        who = "You have" if person == self.settings.owner else f"{person} has"
        cap = status.cap
        until = "tomorrow" if cap.period == "daily" else _day(periods.next_month)
        if status.reached:
            return (f"Budget: {who} reached the {cap.period} cap of {cap.show(cap.limit)} "
                    f"({cap.show(status.used)} used). Their messages get a polite refusal "
                    f"until {until}; [budget] in clawgate.toml sets the caps.")
        return (f"Budget: {who} used {status.share:.0%} of the {cap.period} cap "
                f"({cap.show(status.used)} of {cap.show(cap.limit)}).")


def _day(day: date) -> str:
    return f"{day:%B} {day.day}"


class Accounting:
    """The metered provider's usage sink: ledger, Prometheus, budget guard and notes."""

    def __init__(self, ledger: UsageLedger, budgets: Budgets, metrics: GatewayMetrics) -> None:
        self.ledger = ledger
        self.budgets = budgets
        self.metrics = metrics
        self._checks: set[asyncio.Task[None]] = set()

    async def before_call(self, scope: UsageScope) -> None:
        if scope.kind not in UNASKED_KINDS or scope.person == NO_PERSON:
            return
        refusal = await self.budgets.refusal(scope.person)
        if refusal is not None:
            self.metrics.budget_refusals.inc(kind=scope.kind)
            log.info("%s turn for %s not started: budget cap reached", scope.kind,
                     scope.person)
            raise BudgetExceeded(refusal)

    async def after_call(self, scope: UsageScope, model: str, usage: Usage) -> None:
        """Counted at once, written and checked against the caps in the background: the
        answer goes on to the transcript without waiting for the state database."""
        counted = self.ledger.record_soon(scope.person, scope.kind, model, usage)
        self.metrics.usage(scope.kind, model, usage, counted.cost)
        if self.budgets.caps(scope.person):
            task = asyncio.create_task(self._check_caps(scope.person), name="budget-check")
            self._checks.add(task)
            task.add_done_callback(self._checks.discard)

    async def _check_caps(self, person: str) -> None:
        try:
            await self.budgets.after_usage(person)
        except Exception:  # a note not sent is logged; the turn is not the place to fail
            log.exception("checking %s's budget after a call failed", person)

    async def settled(self) -> None:
        """Usage written and budget notes sent (before the state database closes)."""
        await self.ledger.settled()
        while self._checks:
            await asyncio.gather(*self._checks, return_exceptions=True)
