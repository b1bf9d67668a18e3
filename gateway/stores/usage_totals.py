"""Sums of usage: what one call counted (`Totals`), the periods a cap counts over, and the
running sums a budget check reads.

`RunningTotals`: what each person and group chat spent today and this month, kept as calls
are counted. A budget check runs before every model call of a capped person or group; a
query (and a wait for the last call's write) each time would put the state database on
every call's path. So the ledger keeps these sums in memory: read from its table the first
time a period is asked for, then added to as each call is counted, synchronously, so a
check made right after a call sees it even before its row is written. Only today and this
month are kept; a new day drops the rest. The table stays the record (/usage, the panel and
a restart read it).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, fields
from datetime import date, timedelta

from gateway.agent.conversation import Usage


@dataclass(frozen=True, slots=True)
class Totals:
    calls: int = 0
    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    cost: float = 0.0

    @property
    def tokens(self) -> int:
        """Everything the provider processed: what token caps count."""
        return self.input + self.output + self.cache_read + self.cache_write

    @property
    def prompt_tokens(self) -> int:
        return self.input + self.cache_read + self.cache_write

    @property
    def cache_share(self) -> float:
        """The share of prompt tokens read from the cache."""
        return self.cache_read / self.prompt_tokens if self.prompt_tokens else 0.0

    def __add__(self, other: Totals) -> Totals:
        return Totals(*(getattr(self, f.name) + getattr(other, f.name) for f in fields(self)))

    @classmethod
    def of(cls, usage: Usage, cost: float) -> Totals:
        return cls(
            1,
            usage.input_tokens,
            usage.output_tokens,
            usage.cache_read_tokens,
            usage.cache_write_tokens,
            cost,
        )


def totals_of_row(row: Iterable[object]) -> Totals:
    """Totals from a row of (calls, input, output, cache_read, cache_write, cost)."""
    numbers = [value if isinstance(value, int | float) else 0 for value in row]  # NULL: 0
    calls, inp, out, read, write, cost = numbers
    return Totals(int(calls), int(inp), int(out), int(read), int(write), float(cost))


@dataclass(frozen=True, slots=True)
class Periods:
    """The first days of today, this week (Monday) and this month, in the gateway's zone."""

    today: date

    @property
    def week(self) -> date:
        return self.today - timedelta(days=self.today.weekday())

    @property
    def month(self) -> date:
        return self.today.replace(day=1)

    @property
    def next_month(self) -> date:
        return (self.month + timedelta(days=32)).replace(day=1)


class RunningTotals:
    def __init__(self) -> None:
        self._spent: dict[tuple[str, date], Totals] = {}
        self._changes: dict[str, int] = {}  # calls counted per `who` today: a read's guard
        self._day: date | None = None

    def _turn_of_day(self, periods: Periods) -> None:
        if periods.today != self._day:
            self._day = periods.today
            self._changes.clear()
            kept = (periods.today, periods.month)
            self._spent = {key: t for key, t in self._spent.items() if key[1] in kept}

    def add(self, who: str, counted: Totals, periods: Periods) -> None:
        """One call counted for `who` (a person, or a group chat's key)."""
        self._turn_of_day(periods)
        self._changes[who] = self._changes.get(who, 0) + 1
        for since in {periods.today, periods.month}:
            if (who, since) in self._spent:
                self._spent[(who, since)] += counted

    def get(self, who: str, since: date) -> Totals | None:
        return self._spent.get((who, since))

    def changes(self, who: str) -> int:
        return self._changes.get(who, 0)

    def keep(
        self, who: str, since: date, totals: Totals, changes_before: int, periods: Periods
    ) -> None:
        """`totals` read from the table for `who` since `since`, kept unless a call was
        counted for `who` while it was read (the read may not include it: read again next
        time) or the period is over."""
        self._turn_of_day(periods)
        if self.changes(who) == changes_before and since in (periods.today, periods.month):
            self._spent[(who, since)] = totals
