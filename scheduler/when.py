"""The small language of "when": what the tools, the CLI and the schedule file accept.

Kept deliberately small; anything else is refused with an error that shows the forms:

One-shot (relative forms are resolved against `now` in the workspace zone):
    2026-12-01 15:00 | 2026-12-01T15:00+01:00   an ISO date and time (offset optional)
    in 2 hours | in 30 minutes | in 90 seconds   elapsed time from now
    at 15:00 | at 9pm                            today, or tomorrow if that time has passed
    today at 9 | tomorrow at 9:30                a day and a time
    monday at 9 | on friday at 17:00             the next such day (today if still ahead)
    on 2026-12-01 at 9                           a date and a time
Recurring (wall-clock rules stay local across daylight-saving changes):
    every day at 08:30 | every weekday at 08:30 | every weekend at 10
    every monday at 9 | every mon, wed and fri at 18:00
    every 2 hours | every 30 minutes | every hour   elapsed time, counted from creation
    cron 30 8 * * 1-5                             any five-field cron expression
Times: 9, 09:30, 9am, 9:30pm, noon, midnight (24-hour unless am/pm is given).
"""

from __future__ import annotations

import functools
import re
from datetime import date, datetime, time, timedelta
from zoneinfo import ZoneInfo

from scheduler.recurrence import (
    MIN_INTERVAL,
    Cron,
    Every,
    Once,
    Schedule,
    ScheduleError,
    resolve_local,
)

__all__ = ["FORMS", "MAX_WHEN_CHARS", "parse_when"]

# Longer than any form above; a longer text (a hand edit, a model's) is refused unread, so a
# megabyte of "when" never reaches the regexes or the caches below.
MAX_WHEN_CHARS = 200

FORMS = (
    "'tomorrow at 9', 'monday at 17:30', 'at 15:00', 'in 2 hours', '2026-12-01 15:00', "
    "'every day at 08:30', 'every weekday at 08:30', 'every mon and thu at 9', "
    "'every 2 hours', 'cron 30 8 * * 1-5'"
)
_DAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_CRON_DOW = ("1", "2", "3", "4", "5", "6", "0")  # Monday..Sunday in cron numbering
_UNITS = {
    "second": timedelta(seconds=1), "sec": timedelta(seconds=1), "s": timedelta(seconds=1),
    "minute": timedelta(minutes=1), "min": timedelta(minutes=1), "m": timedelta(minutes=1),
    "hour": timedelta(hours=1), "hr": timedelta(hours=1), "h": timedelta(hours=1),
    "day": timedelta(days=1), "d": timedelta(days=1),
    "week": timedelta(weeks=1), "w": timedelta(weeks=1),
}
_TIME = re.compile(r"(\d{1,2})(?::(\d{2}))?\s*(am|pm)?|noon|midnight")
_AT = re.compile(r"\bat\b")
_AMOUNT = re.compile(r"(?:(\d+)|an?)?\s*([a-z]+?)s?")


def _day_index(word: str) -> int | None:
    word = word.strip().rstrip(".")
    if len(word) < 2:
        return None
    for index, name in enumerate(_DAYS):
        if name.startswith(word) and (len(word) >= 3 or word in ("mo", "tu", "we", "th", "fr",
                                                                  "sa", "su")):
            return index
    return None


def _clock(text: str) -> time:
    text = text.strip()
    match = _TIME.fullmatch(text)
    if not match:
        raise ScheduleError(f"not a time of day: {text!r} (try 9, 09:30, 9am, 9:30pm, noon)")
    if text == "noon":
        return time(12, 0)
    if text == "midnight":
        return time(0, 0)
    hour, minute = int(match.group(1)), int(match.group(2) or 0)
    half = match.group(3)
    if half:
        if not 1 <= hour <= 12:
            raise ScheduleError(f"not a time of day: {text!r} (12-hour clock with am/pm)")
        hour = hour % 12 + (12 if half == "pm" else 0)
    if hour > 23 or minute > 59:
        raise ScheduleError(f"not a time of day: {text!r}")
    return time(hour, minute)


def _amount(text: str) -> timedelta:
    match = _AMOUNT.fullmatch(text.strip())
    unit = _UNITS.get(match.group(2)) if match else None
    if match is None or unit is None:
        raise ScheduleError(f"not an amount of time: {text!r} (try '2 hours', '30 minutes')")
    count = int(match.group(1)) if match.group(1) else 1
    if count <= 0:
        raise ScheduleError(f"not an amount of time: {text!r}")
    return count * unit


def _iso(text: str) -> datetime | None:
    if not re.match(r"\d{4}-\d{2}-\d{2}[ t]\d", text):
        return None
    try:
        return datetime.fromisoformat(text.upper().replace(" ", "T", 1))
    except ValueError as exc:
        raise ScheduleError(f"not a valid date and time: {text!r} ({exc})") from None


def _on_day(day: date, at: time, zone: ZoneInfo) -> datetime:
    return resolve_local(datetime.combine(day, at), zone)


def _one_shot(text: str, zone: ZoneInfo, now: datetime) -> Once:
    stamp = _iso(text)
    if stamp is not None:
        return Once(stamp)
    if text.startswith("in "):
        return Once(now + _amount(text[3:]))
    today = now.astimezone(zone).date()
    if _TIME.fullmatch(text):
        text = f"at {text}"
    parts = _AT.split(text, maxsplit=1)
    if len(parts) != 2:
        raise ScheduleError(f"when is {text!r}? Say a time of day")
    day_part = parts[0].strip().removeprefix("on ").strip()
    at = _clock(parts[1])
    if day_part in ("", "today"):
        moment = _on_day(today, at, zone)
        if not day_part and moment <= now:  # "at 9" after nine: tomorrow
            moment = _on_day(today + timedelta(days=1), at, zone)
        return Once(moment)
    if day_part == "tomorrow":
        return Once(_on_day(today + timedelta(days=1), at, zone))
    if re.fullmatch(r"\d{4}-\d{2}-\d{2}", day_part):
        try:
            return Once(_on_day(date.fromisoformat(day_part), at, zone))
        except ValueError as exc:
            raise ScheduleError(f"not a valid date: {day_part!r} ({exc})") from None
    index = _day_index(day_part.removeprefix("next ").strip())
    if index is None:
        raise ScheduleError(f"not a day: {day_part!r} (today, tomorrow, a weekday, a date)")
    ahead = (index - today.weekday()) % 7
    moment = _on_day(today + timedelta(days=ahead), at, zone)
    if moment <= now:
        moment = _on_day(today + timedelta(days=ahead or 7), at, zone)
    return Once(moment)


def _day_set(text: str) -> tuple[str, str]:
    """(cron weekday field, canonical words) for 'day', 'weekday', 'mon, wed and fri'..."""
    text = text.strip()
    if text in ("day", "days", "daily"):
        return "*", "day"
    if text in ("weekday", "weekdays"):
        return "1-5", "weekday"
    if text in ("weekend", "weekends", "weekend day"):
        return "6,0", "weekend"
    indexes: list[int] = []
    for word in re.split(r"\s*(?:,|\band\b|&)\s*", text):
        if not word:
            continue
        index = _day_index(word.removesuffix("s") if word.endswith("days") else word)
        if index is None:
            raise ScheduleError(f"not a day: {word!r} (day, weekday, weekend, monday...)")
        if index not in indexes:
            indexes.append(index)
    if not indexes:
        raise ScheduleError(f"which days? {text!r}")
    indexes.sort()
    names = [_DAYS[i] for i in indexes]
    words = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
    return ",".join(_CRON_DOW[i] for i in indexes), words


@functools.lru_cache(maxsize=4096)
def _recurring(text: str) -> Schedule:
    """Cached: a recurring rule does not depend on the zone or the time it is read, so every
    job with the same words shares one (immutable) schedule; loading 100,000 jobs parses each
    distinct rule once."""
    rest = text.removeprefix("every").strip()
    days, sep, time_part = rest.partition(" at ")
    if not sep and rest.endswith(" at"):
        raise ScheduleError(f"every ... at what time? {text!r}")
    if sep:
        at = _clock(time_part)
        field, words = _day_set(days)
        expr = f"{at.minute} {at.hour} * * {field}"
        return Cron(expr, f"every {words} at {at:%H:%M}")
    interval = _amount(rest)
    if interval < MIN_INTERVAL or interval % MIN_INTERVAL:
        raise ScheduleError("an interval is a whole number of minutes or hours (at least 1 "
                            "minute)")
    if interval % timedelta(days=1) == timedelta(0):
        raise ScheduleError(
            f"{text!r}: say the time of day, e.g. 'every day at 09:00' (a whole-day interval "
            "would drift by an hour at daylight-saving changes)"
        )
    minutes = int(interval.total_seconds() // 60)
    if minutes % 60 == 0:
        hours = minutes // 60
        phrase = "every hour" if hours == 1 else f"every {hours} hours"
    else:
        phrase = "every minute" if minutes == 1 else f"every {minutes} minutes"
    return Every(interval, phrase)


@functools.lru_cache(maxsize=4096)
def _cron(expr: str) -> Cron:
    return Cron(expr, f"cron {expr}")


def parse_when(text: str, zone: ZoneInfo, now: datetime) -> Schedule:
    """Parse `text` (see the module doc) in `zone`; relative forms count from `now` (aware).

    Raises ScheduleError with a one-line reason and the accepted forms."""
    if now.tzinfo is None:
        raise ValueError("now must be timezone-aware")
    if len(text) > MAX_WHEN_CHARS:
        raise ScheduleError(f"a schedule is at most {MAX_WHEN_CHARS} characters; say when, "
                            f"e.g. {FORMS}")
    try:
        schedule = _parse(text, zone, now)
        if isinstance(schedule, Once):
            schedule.moment(zone)  # a time that cannot be placed in UTC fails here, not later
    except ScheduleError:
        raise
    except (OverflowError, ValueError) as exc:  # "in 99999999999999 days", year 9999-14:00
        raise ScheduleError(f"{' '.join(text.split())!r} is out of range ({exc})") from None
    return schedule


def _parse(text: str, zone: ZoneInfo, now: datetime) -> Schedule:
    raw = " ".join(text.split())
    if not raw:
        raise ScheduleError(f"empty schedule; say when, e.g. {FORMS}")
    lowered = raw.lower()
    if lowered.startswith("cron "):
        return _cron(" ".join(raw.split()[1:]))
    if re.fullmatch(r"[\d*/,\-LW#?]+( [\w*/,\-#?]+){4}", raw) and _iso(raw) is None:
        return _cron(raw)
    if lowered.startswith("every ") or lowered == "every":
        return _recurring(lowered)
    try:
        return _one_shot(lowered, zone, now)
    except ScheduleError as exc:
        raise ScheduleError(f"{exc}. Accepted forms: {FORMS}") from None
