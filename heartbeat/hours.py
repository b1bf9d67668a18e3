"""Active hours: when a person may be messaged, in their own time zone.

`start` is inclusive and `end` exclusive; `end` earlier than `start` means the window crosses
midnight (22:00-06:00 is the night), and equal times mean all day. `24:00` is allowed as an
end.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, time, tzinfo

from heartbeat.timeofday import parse_time_of_day


def parse_clock(text: str) -> time:
    """A start or end of the active hours: any time of day the scheduler accepts too
    (heartbeat/timeofday.py), and `24:00` for the end of the day."""
    return parse_time_of_day(text, end_of_day=True)


@dataclass(frozen=True, slots=True)
class ActiveHours:
    start: time = time(0, 0)
    end: time = time(0, 0)
    zone: tzinfo = UTC

    @property
    def always(self) -> bool:
        return self.start == self.end

    def contains(self, moment: datetime) -> bool:
        if self.always:
            return True
        local = moment.astimezone(self.zone).time().replace(tzinfo=None)
        if self.start < self.end:
            return self.start <= local < self.end
        return local >= self.start or local < self.end

    def local_date(self, moment: datetime) -> date:
        """The person's calendar day (daily budgets reset at their midnight)."""
        return moment.astimezone(self.zone).date()

    def describe(self) -> str:
        if self.always:
            return f"all day ({self.zone})"
        end = "24:00" if self.end == time(0, 0) else self.end.strftime("%H:%M")
        return f"{self.start.strftime('%H:%M')}-{end} {self.zone}"
