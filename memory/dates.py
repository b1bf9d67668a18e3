"""Dates a question names, as windows of daily-note dates to look in.

A daily note is dated by its file name (`memory/2023-05-08.md`), so "what did Maria share on
16 June, 2023?" or "what did John host in May 2023?" can be narrowed to the notes written
around then. What happened on a day is usually written down that day or within the week after
("yesterday", "last weekend"), so a named day looks at the notes from DAY_BEFORE days before
it to DAY_AFTER days after; a named month at that month and MONTH_AFTER days after it; a year
at that year and YEAR_AFTER days after. A date without a year is left alone (which year would
be a guess). `memory.search` gives the chunks of the notes inside a window a say in the line
leg and raises their fused score (DATE_BOOST there).
"""

from __future__ import annotations

import calendar
import re
from datetime import date, timedelta

__all__ = ["DateWindow", "query_windows"]

DAY_BEFORE = 1
DAY_AFTER = 7
MONTH_AFTER = 14
YEAR_AFTER = 14

DateWindow = tuple[date, date]  # first and last note date, inclusive

_MONTHS = {name.lower(): number for number, name in enumerate(calendar.month_name) if name}
_MONTHS |= {name.lower(): number for number, name in enumerate(calendar.month_abbr) if name}
_MONTH = r"(?P<month>" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
_DAY = r"(?P<day>[0-3]?\d)(?:st|nd|rd|th)?"
_YEAR = r"(?P<year>(?:19|20)\d\d)"
_PATTERNS = [
    re.compile(rf"\b{_DAY}(?:\s+of)?\s+{_MONTH},?\s+{_YEAR}\b", re.IGNORECASE),  # 9 November, 2022
    re.compile(rf"\b{_MONTH}\s+{_DAY},?\s+{_YEAR}\b", re.IGNORECASE),  # November 9, 2022
    re.compile(r"\b(?P<year>(?:19|20)\d\d)-(?P<month>\d\d)-(?P<day>\d\d)\b"),  # 2022-11-09
    re.compile(rf"\b{_MONTH},?\s+{_YEAR}\b", re.IGNORECASE),  # November 2022
    re.compile(rf"\b{_YEAR}\b"),  # 2022
]


def _window(year: int, month: int | None, day: int | None) -> DateWindow | None:
    try:
        if month is None:
            return date(year, 1, 1), date(year, 12, 31) + timedelta(days=YEAR_AFTER)
        if day is None:
            last = calendar.monthrange(year, month)[1]
            return date(year, month, 1), date(year, month, last) + timedelta(days=MONTH_AFTER)
        named = date(year, month, day)
    except ValueError:  # 31 February, month 13
        return None
    return named - timedelta(days=DAY_BEFORE), named + timedelta(days=DAY_AFTER)


def query_windows(query: str) -> list[DateWindow]:
    """The windows of the dates `query` names, most precise first; [] when it names none."""
    windows: list[DateWindow] = []
    taken: list[tuple[int, int]] = []  # spans already read as a more precise date
    for pattern in _PATTERNS:
        for found in pattern.finditer(query):
            if any(a < found.end() and found.start() < b for a, b in taken):
                continue
            parts = found.groupdict()
            month = parts.get("month")
            number = (
                None
                if month is None
                else int(month)
                if month.isdigit()
                else _MONTHS[month.lower().rstrip(".")]
            )
            window = _window(
                int(parts["year"]), number, int(parts["day"]) if parts.get("day") else None
            )
            if window is not None:
                taken.append(found.span())
                windows.append(window)
    return windows
