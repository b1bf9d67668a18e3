"""The one reader of a time of day, shared by the heartbeat's active hours and the scheduler.

Why one: a person who writes `active_end = "10pm"` in the config and "remind me at 10pm" in
the chat means the same thing, so both must accept the same forms and refuse the same ones.
The scheduler may import this module (its import rule allows `heartbeat.timeofday`); it
imports nothing of ours.

Accepted (case and surrounding spaces do not matter):
    9 | 09 | 9:30 | 09:30 | 9.30 | 21:45:10   24-hour unless am/pm is given
    9am | 9 am | 9:30pm | 9.30 p.m. | 12am (midnight) | 12pm (noon)
    noon | midnight | 8 o'clock
    24:00                     only where an end of day is meant (`end_of_day=True`)
`afternoon=True` reads a bare hour from 1 to 11 without am/pm as the afternoon or evening
("tonight at 8" is 20:00); an hour written with am/pm, or from 12 on, is taken as written.
"""

from __future__ import annotations

import re
from datetime import time

__all__ = ["TIME_OF_DAY", "TIME_OF_DAY_FORMS", "parse_time_of_day"]

TIME_OF_DAY_FORMS = "9, 09:30, 9am, 9:30pm, 21:00, noon, midnight"
# Also used by the scheduler to find a time inside a longer phrase ("friday 17:00").
TIME_OF_DAY = (
    r"(?:noon|midnight"
    r"|\d{1,2}(?:[:.]\d{2}(?::\d{2})?)?\s*(?:[ap]\.?m\.?)?(?:\s*o'?clock)?)"
)
_PARTS = re.compile(
    r"(?P<hour>\d{1,2})(?:[:.](?P<minute>\d{2})(?::(?P<second>\d{2}))?)?"
    r"\s*(?:(?P<half>[ap])\.?m\.?)?(?:\s*o'?clock)?"
)


def parse_time_of_day(text: str, *, end_of_day: bool = False, afternoon: bool = False) -> time:
    """The time of day `text` names, or a ValueError that says what is accepted.

    `end_of_day`: "24:00" is allowed and means the midnight that ends the day (returned as
    00:00, as an exclusive end). `afternoon`: a bare hour 1-11 is pm (see the module doc)."""
    raw = " ".join(text.split()).lower()
    if raw == "noon":
        return time(12, 0)
    if raw == "midnight":
        return time(0, 0)
    match = _PARTS.fullmatch(raw)
    if match is None:
        raise ValueError(f"not a time of day: {text.strip()!r} (try {TIME_OF_DAY_FORMS})")
    hour, half = int(match["hour"]), match["half"]
    minute, second = int(match["minute"] or 0), int(match["second"] or 0)
    if minute > 59 or second > 59:
        raise ValueError(f"not a time of day: {text.strip()!r} (minutes and seconds go to 59)")
    if half is not None:
        if not 1 <= hour <= 12:
            raise ValueError(
                f"not a time of day: {text.strip()!r} (a 12-hour clock with "
                "am/pm goes from 1 to 12)"
            )
        hour = hour % 12 + (12 if half == "p" else 0)
    elif afternoon and 1 <= hour <= 11:
        hour += 12
    if hour == 24 and minute == 0 and second == 0 and end_of_day:
        return time(0, 0)
    if hour > 23:
        hint = "; 24:00 only ends a period" if hour == 24 else ""
        raise ValueError(f"not a time of day: {text.strip()!r} (hours go to 23{hint})")
    return time(hour, minute, second)
