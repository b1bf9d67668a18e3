"""When a job runs: a one-shot moment, a fixed interval, or a wall-clock rule (cron).

Every schedule answers two questions: `first(anchor, zone)`, its first run (the anchor is the
job's creation), and `next_after(moment, zone, anchor)`, the first run strictly after
`moment`; both as aware UTC datetimes, or None when there is none. Everything else (late runs,
missed runs, the heap) is built on those.

Wall-clock rules ("every weekday at 08:30", cron expressions) are evaluated by cronsim in the
workspace's zone, so a daily 08:30 stays 08:30 local across daylight-saving changes. Intervals
("every 2 hours") are elapsed time: two real hours apart, whatever the clocks on the wall do.

Local times that do not exist or exist twice follow one rule everywhere (cronsim's rule for
fixed-time cron lines, which mimics Debian cron, and `resolve_local` below for one-shot times):
- a time skipped when the clocks jump forward runs at the first minute that exists after it
  (in Europe/Berlin, 02:30 on the last Sunday of March runs at 03:00);
- a time that happens twice when the clocks go back runs once, at the first of the two.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from cronsim import CronSim, CronSimError

__all__ = ["Cron", "Every", "Once", "Schedule", "ScheduleError", "resolve_local"]

MIN_INTERVAL = timedelta(minutes=1)


class ScheduleError(ValueError):
    """A schedule that cannot be understood or never runs; `str()` says why, in one line."""


def resolve_local(naive: datetime, zone: ZoneInfo) -> datetime:
    """A wall-clock time in `zone` as an aware datetime, by the module's DST rule."""
    moment = naive.replace(tzinfo=zone, fold=0)
    # A skipped time does not survive a round trip through UTC: step to the first real minute.
    for _ in range(24 * 60):
        if moment.astimezone(UTC).astimezone(zone).replace(tzinfo=None) == moment.replace(
            tzinfo=None
        ):
            return moment
        moment = (moment.replace(tzinfo=None) + timedelta(minutes=1)).replace(tzinfo=zone)
    raise ScheduleError(f"{naive:%Y-%m-%d %H:%M} does not exist in {zone.key}")


@functools.lru_cache(maxsize=4096)
def _cron_problem(expr: str) -> str:
    """Why `expr` is not a usable cron line ("" when it is). Cached: a gateway's jobs share
    few distinct lines, and checking one costs a cronsim parse."""
    fields = expr.split()
    if len(fields) != 5:
        return (
            f"a cron expression has 5 fields (minute hour day month weekday), "
            f"not {len(fields)}: {expr!r}"
        )
    try:
        CronSim(expr, datetime(2000, 1, 1, tzinfo=UTC))
    except CronSimError as exc:
        return f"bad cron expression {expr!r}: {exc}"
    except (ValueError, OverflowError) as exc:  # cronsim's own check missed it
        return f"bad cron expression {expr!r}: {type(exc).__name__}"
    return ""


def _utc(moment: datetime) -> datetime:
    return moment.astimezone(UTC)


@dataclass(frozen=True, slots=True)
class Once:
    """A single run. `at` aware: that instant. `at` naive: that wall time in the workspace zone
    (only hand-written entries are naive; the tools always write the offset)."""

    at: datetime

    recurring = False

    def moment(self, zone: ZoneInfo) -> datetime:
        at = self.at if self.at.tzinfo is not None else resolve_local(self.at, zone)
        return _utc(at)

    def first(self, anchor: datetime, zone: ZoneInfo) -> datetime | None:
        return self.moment(zone)  # even before `anchor`: a hand-written past time runs late

    def next_after(self, moment: datetime, zone: ZoneInfo, anchor: datetime) -> datetime | None:
        at = self.moment(zone)
        return at if at > moment else None

    def canonical(self, zone: ZoneInfo) -> str:
        if self.at.tzinfo is None:
            return self.at.isoformat(timespec="minutes")
        return self.at.astimezone(zone).isoformat(timespec="seconds")


@dataclass(frozen=True, slots=True)
class Every:
    """Every `interval` of elapsed time, counted from `anchor` (the job's creation)."""

    interval: timedelta
    phrase: str

    recurring = True

    def first(self, anchor: datetime, zone: ZoneInfo) -> datetime | None:
        return _utc(anchor + self.interval)

    def next_after(self, moment: datetime, zone: ZoneInfo, anchor: datetime) -> datetime | None:
        if moment < anchor:
            return _utc(anchor + self.interval)
        steps = (moment - anchor) // self.interval + 1
        return _utc(anchor + steps * self.interval)

    def canonical(self, zone: ZoneInfo) -> str:
        return self.phrase


@dataclass(frozen=True, slots=True)
class Cron:
    """A five-field cron expression in the workspace zone (cronsim does the calendar work).

    `phrase` is the words it came from ("every weekday at 08:30"), kept for display and for
    the file; a raw expression's phrase is "cron <expr>"."""

    expr: str
    phrase: str

    recurring = True

    def __post_init__(self) -> None:
        problem = _cron_problem(self.expr)
        if problem:
            raise ScheduleError(problem)

    def first(self, anchor: datetime, zone: ZoneInfo) -> datetime | None:
        return self.next_after(anchor, zone, anchor)

    def next_after(self, moment: datetime, zone: ZoneInfo, anchor: datetime) -> datetime | None:
        start = moment.astimezone(zone)
        try:
            runs = CronSim(self.expr, start)
            # cronsim works on wall time for fixed-time lines; in the hour that happens twice
            # its next wall time can lie before `moment` in real time: step past it.
            for _ in range(4):
                candidate = _utc(next(runs))
                if candidate > moment:
                    return candidate
        except StopIteration:  # no run within cronsim's 50-year horizon
            return None
        return None

    def canonical(self, zone: ZoneInfo) -> str:
        return self.phrase


Schedule = Once | Every | Cron
