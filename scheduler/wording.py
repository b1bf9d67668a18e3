"""Times in words, for confirmations, listings and the late marker.

The tools echo a resolved run as words and ISO together ("Tue 1 Dec 2026 at 09:00
(Europe/Berlin), in 23 hours; 2026-12-01T09:00:00+01:00") so the model can confirm it with
the person in their own terms, and a program can still read the exact moment.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

__all__ = ["from_now", "in_words", "late_marker", "when_words"]


def from_now(moment: datetime, now: datetime) -> str:
    """'in 23 hours', 'in 5 minutes', 'in 39 s', '2 days ago' (rounded, for people); "now"
    only within the second."""
    delta = moment - now
    past = delta < timedelta(0)
    seconds = abs(delta.total_seconds())
    if seconds < 60:
        whole = int(seconds)
        if whole == 0:
            return "now"
        return f"{whole} s ago" if past else f"in {whole} s"
    sizes = ((86400, "day"), (3600, "hour"), (60, "minute"))
    found = next((size, unit) for size, unit in sizes if seconds >= size)
    count, unit = round(seconds / found[0]), found[1]
    words = f"{count} {unit}{'s' if count != 1 else ''}"
    return f"{words} ago" if past else f"in {words}"


def when_words(moment: datetime, zone: ZoneInfo) -> str:
    """'Tue 1 Dec 2026 at 09:00 (Europe/Berlin)': a form the time language reads back to the
    same instant (seconds when there are any; the UTC offset when that wall time happens
    twice, on the night the clocks go back)."""
    local = moment.astimezone(zone)
    clock = f"{local:%H:%M:%S}" if local.second else f"{local:%H:%M}"
    twice = local.replace(fold=1 - local.fold).utcoffset() != local.utcoffset()
    raw = local.strftime("%z")  # +0100
    offset = f" {raw[:3]}:{raw[3:]}" if twice else ""
    return f"{local:%a} {local.day} {local:%b %Y} at {clock}{offset} ({zone.key})"


def in_words(moment: datetime, zone: ZoneInfo, now: datetime) -> str:
    local = moment.astimezone(zone)
    return (
        f"{when_words(moment, zone)}, {from_now(moment, now)}; "
        f"{local.isoformat(timespec='seconds')}"
    )


def late_marker(due: datetime, zone: ZoneInfo, now: datetime) -> str:
    """'(late: due 14:00)', with the date when it was not today."""
    local, today = due.astimezone(zone), now.astimezone(zone).date()
    if local.date() == today:
        return f"(late: due {local:%H:%M})"
    return f"(late: due {local:%a} {local.day} {local:%b} {local:%H:%M})"
