"""The small language of "when": what the tools, the CLI and the schedule file accept.

The forms people type; anything else is refused with an error that shows the forms.

One-shot (relative forms are resolved against `now` in the workspace zone):
    2026-12-01 15:00 | 2026-12-01T15:00+01:00     an ISO date and time (offset optional)
    in 2 hours | in 90 minutes | in an hour and a half | in 1h30   elapsed time from now
    at 15:00 | at 9pm | 9pm | noon                today, or tomorrow if that time has passed
    today at 9 | tomorrow 9am | tomorrow at 9:30  a day and a time ("at" optional)
    tonight at 8 | this evening at 7 | tomorrow morning at 8   a part of the day: a bare
                                                  hour 1-11 in the afternoon/evening/night
                                                  is pm
    friday 17:00 | on friday at 17:00             the next such day (today if still ahead)
    next monday at 10                             the next such day after today
    in 3 days at 18:00 | 18:00 in 3 days | in a week at 9   whole days from today, at a time
    day after tomorrow at 9 | next week at 10     two days from today; a week from today
    on dec 24 at 18:00 | 24 december 18:00 | 24/12 at 18:00 | the 24th at 9   a date (this
                                                  year, or next if it has passed); numeric
                                                  dates are day/month, month/day in US zones
    on 2026-12-01 at 9 | Tue 1 Dec 2026 at 09:00 (Europe/Berlin)   a date with its year
                                                  (the form the listings print: a zone in
                                                  parentheses reads the time there)
    9am tomorrow | 17:00 on friday                the time first works too
Recurring (wall-clock rules stay local across daylight-saving changes):
    every day at 08:30 | daily at 8:30 | every morning at 8 | every evening at 7
    every weekday at 08:30 | every weekend at 10 | every monday at 9
    every mon, wed and fri at 18:00
    every 2 hours | every 90 minutes | every hour | hourly   elapsed time, from creation
    cron 30 8 * * 1-5                             any five-field cron expression
Times of day: heartbeat/timeofday.py (9, 09:30, 9am, 9:30pm, noon, midnight; 24-hour unless
am/pm is given), the same reader as the heartbeat's active hours.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta, timezone
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from heartbeat.timeofday import TIME_OF_DAY, parse_time_of_day
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
    "'tomorrow 9am', 'friday 17:00', 'tonight at 8', 'on dec 24 at 18:00', "
    "'next monday at 10', 'in 3 days at 18:00', 'at 15:00', 'in 90 minutes', "
    "'2026-12-01 15:00', "
    "'every day at 08:30', 'every weekday at 8:30', 'every mon and thu at 9', "
    "'every 2 hours', 'cron 30 8 * * 1-5'"
)
_DAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_CRON_DOW = ("1", "2", "3", "4", "5", "6", "0")  # Monday..Sunday in cron numbering
_MONTHS = (
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
)
_UNITS = {
    "second": timedelta(seconds=1),
    "sec": timedelta(seconds=1),
    "s": timedelta(seconds=1),
    "minute": timedelta(minutes=1),
    "min": timedelta(minutes=1),
    "m": timedelta(minutes=1),
    "hour": timedelta(hours=1),
    "hr": timedelta(hours=1),
    "h": timedelta(hours=1),
    "day": timedelta(days=1),
    "d": timedelta(days=1),
    "week": timedelta(weeks=1),
    "w": timedelta(weeks=1),
}
# Parts of the day as typed: (the part, the day they mean when no other day is given).
_PERIODS = {
    "tonight": ("night", "today"),
    "this evening": ("evening", "today"),
    "this afternoon": ("afternoon", "today"),
    "this morning": ("morning", "today"),
    "morning": ("morning", ""),
    "afternoon": ("afternoon", ""),
    "evening": ("evening", ""),
    "night": ("night", ""),
}
# Zones whose people write numeric dates month first (3/4 is March 4th); elsewhere day first.
_MONTH_FIRST = (
    "US/",
    "America/New_York",
    "America/Chicago",
    "America/Denver",
    "America/Los_Angeles",
    "America/Phoenix",
    "America/Anchorage",
    "America/Boise",
    "America/Detroit",
    "America/Indiana/",
    "America/Kentucky/",
    "America/Juneau",
    "America/North_Dakota/",
    "America/Menominee",
    "America/Nome",
    "America/Sitka",
    "America/Yakutat",
    "America/Metlakatla",
    "America/Adak",
    "Pacific/Honolulu",
)

_TIME_AT_END = re.compile(rf"^(?P<rest>.*?)(?:^|\s)(?:at\s+|@\s*)?(?P<time>{TIME_OF_DAY})$")
_TIME_AT_START = re.compile(rf"^(?:at\s+|@\s*)?(?P<time>{TIME_OF_DAY})(?:\s+(?P<rest>.+))?$")
_AMOUNT = re.compile(r"(?:(\d+(?:\.\d+)?)|an?|one)?\s*([a-z]+?)s?")
_COMPACT = re.compile(r"(\d+)h(\d+)m?")  # 1h30
_ZONE = re.compile(r"\s*\((?P<zone>[A-Za-z][A-Za-z0-9_+\-]*(?:/[A-Za-z0-9_+\-]+)*)\)\s*$")
# Five cron fields without the word "cron": names (JAN, MON) only in the last two, so a date
# in words ("24 december 2026 at 8am") is not taken for one.
_BARE_CRON = re.compile(r"[\d*/,\-LW?]+ [\d*/,\-?]+ [\d*/,\-LW?]+ [\w*/,\-]+ [\w*/,\-#?]+")
_ORDINAL = re.compile(r"\b(\d{1,2})(?:st|nd|rd|th)\b")


def _day_index(word: str) -> int | None:
    word = word.strip().rstrip(".")
    if len(word) < 2:
        return None
    for index, name in enumerate(_DAYS):
        if name.startswith(word) and (
            len(word) >= 3 or word in ("mo", "tu", "we", "th", "fr", "sa", "su")
        ):
            return index
    return None


def _month_index(word: str) -> int | None:
    word = word.strip().rstrip(".")
    if len(word) < 3:
        return None
    for index, name in enumerate(_MONTHS, start=1):
        if name.startswith(word) or (word == "sept" and index == 9):
            return index
    return None


def _clock(text: str, *, afternoon: bool = False) -> time:
    try:
        return parse_time_of_day(text, afternoon=afternoon)
    except ValueError as exc:
        raise ScheduleError(str(exc)) from None


_NUMBER_WORDS = {
    word: str(n)
    for n, word in enumerate(
        (
            "two",
            "three",
            "four",
            "five",
            "six",
            "seven",
            "eight",
            "nine",
            "ten",
            "eleven",
            "twelve",
        ),
        start=2,
    )
}


def _count_and_unit(text: str) -> tuple[float, timedelta]:
    """(2.0, one hour) for '2 hours' or 'two hours'; (1.0, one minute) for 'a minute'."""
    first, _, rest = text.strip().partition(" ")
    if first in _NUMBER_WORDS and rest:
        text = f"{_NUMBER_WORDS[first]} {rest}"
    match = _AMOUNT.fullmatch(text.strip())
    unit = _UNITS.get(match.group(2)) if match else None
    if match is None or unit is None:
        raise ScheduleError(
            f"not an amount of time: {text.strip()!r} (try '2 hours', "
            "'90 minutes', 'an hour and a half')"
        )
    count = float(match.group(1)) if match.group(1) else 1.0
    if count <= 0:
        raise ScheduleError(f"not an amount of time: {text.strip()!r}")
    return count, unit


def _one_amount(text: str) -> timedelta:
    count, unit = _count_and_unit(text)
    return count * unit


def _amount(text: str) -> timedelta:
    """'2 hours', '90 minutes', 'an hour and a half', 'half an hour', '1h30', '2 hours and
    15 minutes', '1.5 hours'."""
    text = text.strip()
    compact = _COMPACT.fullmatch(text)
    if compact:
        return timedelta(hours=int(compact[1]), minutes=int(compact[2]))
    if text.startswith(("half an ", "half a ")):
        return _one_amount(text.split(" ", 2)[2]) / 2
    and_a_half = text.endswith(" and a half")
    text = text.removesuffix(" and a half")
    parts = [part for part in re.split(r"\s*(?:,|\band\b)\s*", text) if part]
    if not parts or (and_a_half and len(parts) != 1):
        raise ScheduleError(f"not an amount of time: {text!r} (try '2 hours', '90 minutes')")
    total = sum((_one_amount(part) for part in parts), timedelta())
    if and_a_half:  # "2 hours and a half": half of one more unit
        total += _count_and_unit(parts[0])[1] / 2
    return total


def _iso(text: str) -> datetime | None:
    """An ISO date and time; None for anything else ("2026-12-01 9pm" is read as a date and a
    time of day, and an impossible date is reported there)."""
    if not re.match(r"\d{4}-\d{2}-\d{2}[ t]\d", text):
        return None
    try:
        return datetime.fromisoformat(text.upper().replace(" ", "T", 1))
    except ValueError as exc:
        if " " in text:
            return None
        raise ScheduleError(f"not a valid date and time: {text!r} ({exc})") from None


def _on_day(day: date, at: time, zone: ZoneInfo) -> datetime:
    return resolve_local(datetime.combine(day, at), zone)


@dataclass(frozen=True, slots=True)
class _Day:
    """A day part, resolved: a fixed date, or a weekday, or neither (today, or tomorrow once
    the time has passed)."""

    fixed: date | None = None
    weekday: int | None = None
    after_today: bool = False  # "next monday": never today
    strict_today: bool = False  # "today", "tonight": never rolled over to tomorrow
    roll: str = ""  # a date written without its year ("year") or month ("month")
    period: str = ""  # morning, afternoon, evening, night


def _valid(year: int, month: int, day: int) -> bool:
    try:
        date(year, month, day)
    except ValueError:
        return False
    return True


def _upcoming(today: date, month: int, day: int, text: str) -> _Day:
    """A date without its year: this year's (the next one that has it, for 29 February)."""
    for year in range(today.year, today.year + 9):
        if _valid(year, month, day):
            return _Day(fixed=date(year, month, day), roll="year")
    raise ScheduleError(f"not a valid date: {text!r}")


def _month_first(zone: ZoneInfo) -> bool:
    return zone.key.startswith(_MONTH_FIRST)


def _numeric_date(text: str, zone: ZoneInfo, today: date) -> _Day | None:
    """'24/12', '12/24', '24.12.', '24/12/2026': day first, or month first in US zones; a
    number above 12 settles it either way."""
    match = re.fullmatch(r"(\d{1,2})[/.](\d{1,2})(?:[/.](\d{4}|\d{2}))?\.?", text)
    if match is None:
        return None
    a, b = int(match[1]), int(match[2])
    if a > 12 >= b or (b <= 12 and a <= 12 and not _month_first(zone)):
        day, month = a, b
    else:
        month, day = a, b
    if match[3] is None:
        return _upcoming(today, month, day, text)
    year = int(match[3]) + (2000 if len(match[3]) == 2 else 0)
    if not _valid(year, month, day):
        raise ScheduleError(f"not a valid date: {text!r}")
    return _Day(fixed=date(year, month, day))


def _word_date(text: str, today: date) -> _Day | None:
    """'dec 24', 'december 24 2026', '24 dec', 'the 24 of december', 'tue 1 dec 2026'."""
    words = [w for w in text.replace(",", " ").split() if w not in ("of", "the")]
    weekday = _day_index(words[0]) if len(words) >= 3 else None
    if weekday is not None:
        words = words[1:]
    if len(words) not in (2, 3):
        return None
    if _month_index(words[0]) is not None and words[1].isdigit():
        month, day = _month_index(words[0]), int(words[1])
    elif words[0].isdigit() and _month_index(words[1]) is not None:
        day, month = int(words[0]), _month_index(words[1])
    else:
        return None
    assert month is not None
    if len(words) == 2:
        found = _upcoming(today, month, day, text)
    elif re.fullmatch(r"\d{4}", words[2]) and _valid(int(words[2]), month, day):
        found = _Day(fixed=date(int(words[2]), month, day))
    else:
        raise ScheduleError(f"not a valid date: {text!r}")
    if weekday is not None and found.fixed is not None and found.fixed.weekday() != weekday:
        raise ScheduleError(
            f"{found.fixed:%d %b %Y} is a {_DAYS[found.fixed.weekday()]}, not a {_DAYS[weekday]}"
        )
    return found


def _month_day(start: date, number: int) -> date:
    """The first date from `start` on whose day of the month is `number`."""
    year, month = start.year, start.month
    for _ in range(13):
        if _valid(year, month, number) and date(year, month, number) >= start:
            return date(year, month, number)
        year, month = (year + 1, 1) if month == 12 else (year, month + 1)
    raise ScheduleError(f"no month has a day {number}")


def _day(text: str, zone: ZoneInfo, today: date) -> _Day:
    """A day part as typed (lowercased): '', 'today', 'tonight', 'tomorrow morning',
    'friday', 'next monday', 'dec 24', '24/12', '2026-12-24', 'the 24th'."""
    text = _ORDINAL.sub(r"\1", text.strip().removeprefix("on ").strip())
    period = ""
    for words, (part, day_word) in _PERIODS.items():
        if text == words or text.endswith(" " + words):
            period = part
            text = text.removesuffix(words).strip() or day_word
            break
    text = text.removeprefix("on ").strip()
    if text in ("", "today"):
        return _Day(strict_today=text == "today", period=period)
    if text == "tomorrow":
        return _Day(fixed=today + timedelta(days=1), period=period)
    if text in ("the day after tomorrow", "day after tomorrow", "after tomorrow", "overmorrow"):
        return _Day(fixed=today + timedelta(days=2), period=period)
    if text in (
        "next week",
        "a week from today",
        "a week from now",
        "in a week",
        "this time next week",
    ):
        return _Day(fixed=today + timedelta(weeks=1), period=period)
    if text.startswith("in "):  # "in 3 days" (at a time): whole days from today
        return _Day(fixed=today + timedelta(days=_whole_days(text)), period=period)
    if re.fullmatch(r"\d{4}-\d{2}-\d{2}", text):
        try:
            return _Day(fixed=date.fromisoformat(text), period=period)
        except ValueError as exc:
            raise ScheduleError(f"not a valid date: {text!r} ({exc})") from None
    found = _numeric_date(text, zone, today) or _word_date(text, today)
    if found is not None:
        return _Day(fixed=found.fixed, roll=found.roll, period=period)
    match = re.fullmatch(r"(?:the )?(\d{1,2})", text)
    if match:
        number = int(match[1])
        if not 1 <= number <= 31:
            raise ScheduleError(f"not a day of the month: {number}")
        return _Day(fixed=_month_day(today, number), roll="month", period=period)
    after_today = text.startswith("next ")
    index = _day_index(text.removeprefix("next ").removeprefix("this ").strip())
    if index is None:
        raise ScheduleError(
            f"not a day: {text!r} (today, tomorrow, a weekday, a date such as dec 24 or 2026-12-24)"
        )
    return _Day(weekday=index, after_today=after_today, period=period)


def _whole_days(text: str) -> int:
    """3 for "in 3 days", 14 for "in 2 weeks"; a ScheduleError for an amount that is not
    whole days ("in 2 hours at 9" names two different moments)."""
    amount = _amount(text.removeprefix("in "))
    if amount % timedelta(days=1) or amount < timedelta(days=1):
        raise ScheduleError(
            f"{text!r} with a time of day: say whole days ('in 3 days at "
            "18:00'), or leave the time out ('in 2 hours')"
        )
    return amount // timedelta(days=1)


def _resolve(day: _Day, at: time, zone: ZoneInfo, now: datetime, shift: int) -> datetime:
    """The moment; `shift` days later for a small hour of the night ("tonight at 1")."""
    today = now.astimezone(zone).date()
    later = timedelta(days=shift)
    if day.fixed is not None:
        moment = _on_day(day.fixed + later, at, zone)
        if moment <= now and day.roll == "year":
            target = day.fixed
            year = next(
                y
                for y in range(target.year + 1, target.year + 9)
                if _valid(y, target.month, target.day)
            )
            moment = _on_day(date(year, target.month, target.day) + later, at, zone)
        elif moment <= now and day.roll == "month":
            following = (day.fixed.replace(day=1) + timedelta(days=32)).replace(day=1)
            moment = _on_day(_month_day(following, day.fixed.day) + later, at, zone)
        return moment
    if day.weekday is not None:
        ahead = (day.weekday - today.weekday()) % 7
        if day.after_today and ahead == 0:
            ahead = 7
        moment = _on_day(today + timedelta(days=ahead) + later, at, zone)
        if moment <= now:
            moment = _on_day(today + timedelta(days=ahead + 7) + later, at, zone)
        return moment
    moment = _on_day(today + later, at, zone)
    if moment <= now and not day.strict_today:  # "at 9" after nine: tomorrow
        moment = _on_day(today + later + timedelta(days=1), at, zone)
    return moment


def _time_in_period(text: str, period: str) -> tuple[time, int]:
    """The time of day, read in a part of the day, and how many days after the day it falls:
    a bare hour is pm in the afternoon and evening, and at night from 5 to 11; a small hour
    of the night (midnight to 4) is the next morning."""
    plain = _clock(text)
    if period in ("", "morning"):
        return plain, 0
    shifted = _clock(text, afternoon=True)
    bare = shifted != plain  # an hour 1-11 written without am/pm
    if period != "night":
        return (shifted if bare else plain), 0
    if bare and plain.hour >= 5:
        return shifted, 0
    return plain, 1 if plain.hour < 5 else 0


_AFTER_AT = re.compile(
    rf"(?P<time>{TIME_OF_DAY})(?P<offset>\s*[+-]\d{{2}}:\d{{2}})?"
    rf"(?:\s+(?P<rest>.+))?"
)


def _split_time(text: str) -> tuple[str, str]:
    """(day part, time part) of a one-shot phrase: 'friday at 17:00', 'at 8 tonight',
    'tomorrow 9am', '9am tomorrow'; the time part "" when there is none."""
    padded = f" {text}"
    index = padded.rfind(" at ")
    if index >= 0:
        before, after = padded[:index].strip(), padded[index + 4 :].strip()
        match = _AFTER_AT.fullmatch(after)
        if match is None:
            return before, after  # not a time: the clock says what is wrong with it
        day = " ".join(part for part in (before, match["rest"] or "") if part)
        return day, match["time"] + (match["offset"] or "")
    match = _TIME_AT_END.fullmatch(text)
    if match and _looks_like_time(match["time"], match["rest"]):
        return match["rest"].strip(), match["time"]
    match = _TIME_AT_START.fullmatch(text)
    if match and _looks_like_time(match["time"], match["rest"] or ""):
        return (match["rest"] or "").strip(), match["time"]
    return text, ""


def _looks_like_time(candidate: str, rest: str) -> bool:
    """A bare number is a time only next to a day word ("tomorrow 9", "friday 17"), not the
    day or year of a date ("dec 24", "24 dec 2026")."""
    if not re.fullmatch(r"\d{1,2}", candidate.strip()):
        return True
    words = rest.strip().split()
    return not words or (
        _month_index(words[-1]) is None
        and _month_index(words[0]) is None
        and not words[-1].isdigit()
    )


def _one_shot(text: str, zone: ZoneInfo, now: datetime) -> Once:
    stamp = _iso(text)
    if stamp is not None:
        return Once(stamp)
    day_part, time_part = _split_time(text)
    if text.startswith("in ") and not (time_part and day_part.startswith("in ")):
        return Once(now + _amount(text[3:]))  # elapsed time: "in 90 minutes", "in 3 days"
    offset = None
    found = re.search(r"\s*([+-]\d{2}):(\d{2})$", time_part)
    if found:
        sign = -1 if found[1][0] == "-" else 1
        span = timedelta(hours=int(found[1][1:]), minutes=int(found[2]))
        if span >= timedelta(hours=24):
            raise ScheduleError(f"not a UTC offset: {found[0].strip()!r}")
        offset, time_part = timezone(sign * span), time_part[: found.start()]
    if not time_part:
        raise ScheduleError(
            f"when is {text!r}? Say a time of day too (tomorrow at 9, friday 17:00, tonight at 8)"
        )
    day = _day(day_part, zone, now.astimezone(zone).date())
    at, shift = _time_in_period(time_part, day.period)
    if offset is not None:  # the listings' form for a time that happens twice
        if day.fixed is None:
            raise ScheduleError(f"{text!r}: a UTC offset goes with a date")
        return Once(datetime.combine(day.fixed, at, tzinfo=offset))
    return Once(_resolve(day, at, zone, now, shift))


def _day_set(text: str) -> tuple[str, str]:
    """(cron weekday field, canonical words) for 'day', 'weekday', 'mon, wed and fri'..."""
    text = text.strip()
    if text in ("day", "days", "daily", ""):
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


def _recurring_words(rest: str) -> tuple[str, str, str]:
    """(days, time, part of the day) of 'weekday at 8:30', 'day 9am', 'evening at 7',
    'monday evening at 7'; time "" when none is given."""
    days, sep, time_part = rest.partition(" at ")
    if not sep:
        match = _TIME_AT_END.fullmatch(rest)
        days, time_part = (match["rest"], match["time"]) if match else (rest, "")
    days, period = days.strip(), ""
    for word in ("morning", "afternoon", "evening", "night"):
        if days == word or days.endswith(" " + word):
            period = word
            days = days.removesuffix(word).strip() or "day"
            break
    return days, time_part.strip(), period


@functools.lru_cache(maxsize=4096)
def _recurring(text: str) -> Schedule:
    """Cached: a recurring rule does not depend on the zone or the time it is read, so every
    job with the same words shares one (immutable) schedule; loading 100,000 jobs parses each
    distinct rule once."""
    if text in ("hourly",):
        return Every(timedelta(hours=1), "every hour")
    if text.startswith("daily"):
        text = "every day " + text.removeprefix("daily").strip()
    rest = text.removeprefix("every").strip()
    if rest.endswith(" at") or rest == "at":
        raise ScheduleError(f"every ... at what time? {text!r}")
    days, time_part, period = _recurring_words(rest)
    if time_part:
        at = _time_in_period(time_part, period)[0]
        if at.second:
            raise ScheduleError(f"{text!r}: a repeating time is whole minutes")
        field, words = _day_set(days)
        expr = f"{at.minute} {at.hour} * * {field}"
        return Cron(expr, f"every {words} at {at:%H:%M}")
    try:
        interval = _amount(rest)
    except ScheduleError:
        _day_set(rest)  # a day word without a time says which is missing
        raise ScheduleError(f"{text!r}: at what time of day? e.g. 'every {rest} at 9'") from None
    if interval < MIN_INTERVAL or interval % MIN_INTERVAL:
        raise ScheduleError("an interval is a whole number of minutes or hours (at least 1 minute)")
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
        raise ScheduleError(
            f"a schedule is at most {MAX_WHEN_CHARS} characters; say when, e.g. {FORMS}"
        )
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
    if _BARE_CRON.fullmatch(raw) and _iso(raw) is None:
        return _cron(raw)
    if lowered.startswith(("every ", "daily")) or lowered in ("every", "hourly"):
        return _recurring(lowered.rstrip("."))
    named = _ZONE.search(raw)
    if named is not None:  # "... (Europe/Berlin)": the listing's own form
        try:
            zone = ZoneInfo(named["zone"])
        except (ZoneInfoNotFoundError, ValueError):
            raise ScheduleError(f"unknown time zone {named['zone']!r}") from None
        lowered = raw[: named.start()].lower()
    try:
        return _one_shot(lowered.rstrip(".").strip(), zone, now)
    except ScheduleError as exc:
        raise ScheduleError(f"{exc}. Accepted forms: {FORMS}") from None
