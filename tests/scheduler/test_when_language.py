"""The time language as people type it, and its promise: whatever it accepts, the
listing shows in a form it reads back to the same runs."""

from __future__ import annotations

import re
import tempfile
from datetime import UTC, datetime, time, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from heartbeat.timeofday import parse_time_of_day
from scheduler import Once, ScheduleError, create, list_jobs, parse_when, render_list
from scheduler.wording import from_now

BERLIN = ZoneInfo("Europe/Berlin")
NEW_YORK = ZoneInfo("America/New_York")
# Friday 27 March 2026, 11:00 in Berlin (CET, UTC+1); Berlin springs forward on Sunday 29th.
NOW = datetime(2026, 3, 27, 10, 0, tzinfo=UTC)


def first_local(text: str, zone: ZoneInfo = BERLIN, now: datetime = NOW) -> str:
    schedule = parse_when(text, zone, now)
    moment = schedule.first(now, zone)
    assert moment is not None
    return f"{moment.astimezone(zone):%a %Y-%m-%d %H:%M}"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # The phrases of the issue: each was refused or misread before.
        ("tomorrow 9am", "Sat 2026-03-28 09:00"),
        ("friday 17:00", "Fri 2026-03-27 17:00"),
        ("tonight at 8", "Fri 2026-03-27 20:00"),
        ("on dec 24 at 18:00", "Thu 2026-12-24 18:00"),
        ("next monday at 10", "Mon 2026-03-30 10:00"),
        ("in 90 minutes", "Fri 2026-03-27 12:30"),
        ("every weekday at 8:30", "Mon 2026-03-30 08:30"),
        # Around them.
        ("at 8 tonight", "Fri 2026-03-27 20:00"),
        ("this evening at 7", "Fri 2026-03-27 19:00"),
        ("tomorrow morning at 8", "Sat 2026-03-28 08:00"),
        ("tomorrow night at 1", "Sun 2026-03-29 01:00"),  # the small hours after that evening
        ("tonight at midnight", "Sat 2026-03-28 00:00"),
        ("friday evening at 6", "Fri 2026-03-27 18:00"),
        ("9am tomorrow", "Sat 2026-03-28 09:00"),
        ("noon tomorrow", "Sat 2026-03-28 12:00"),
        ("17:00 on friday", "Fri 2026-03-27 17:00"),
        ("next friday at 10", "Fri 2026-04-03 10:00"),
        ("fri 9.30", "Fri 2026-04-03 09:30"),  # today's has passed
        ("24 december 18:00", "Thu 2026-12-24 18:00"),
        ("december 24th at 6pm", "Thu 2026-12-24 18:00"),
        ("the 24th of december at 18:00", "Thu 2026-12-24 18:00"),
        ("24/12 at 18:00", "Thu 2026-12-24 18:00"),
        ("3/4 at 9", "Fri 2026-04-03 09:00"),  # day first in Berlin
        ("on jan 2 at 9", "Sat 2027-01-02 09:00"),  # passed this year: next year's
        ("the 24th at 9", "Fri 2026-04-24 09:00"),
        ("on 29 feb at 9", "Tue 2028-02-29 09:00"),
        ("24 december 2026 at 8am", "Thu 2026-12-24 08:00"),
        ("2026-12-01 9pm", "Tue 2026-12-01 21:00"),
        ("Tue 1 Dec 2026 at 09:00 (Europe/Berlin)", "Tue 2026-12-01 09:00"),
        ("Tue 1 Dec 2026 at 09:00 (America/New_York)", "Tue 2026-12-01 15:00"),
        ("in an hour and a half", "Fri 2026-03-27 12:30"),
        ("in 2 hours and a half", "Fri 2026-03-27 13:30"),
        ("in half an hour", "Fri 2026-03-27 11:30"),
        ("in 1h30", "Fri 2026-03-27 12:30"),
        ("in 2 hours and 15 minutes", "Fri 2026-03-27 13:15"),
        ("daily at 9", "Sat 2026-03-28 09:00"),
        ("every evening at 7", "Fri 2026-03-27 19:00"),
        ("every monday evening at 6", "Mon 2026-03-30 18:00"),
        ("every day 9am", "Sat 2026-03-28 09:00"),
        ("every weekday 8:30", "Mon 2026-03-30 08:30"),
    ],
)
def test_the_forms_people_type(text: str, expected: str) -> None:
    assert first_local(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # Issue 38: a relative day with a time, refused ("not an amount of time") everywhere this
        # reader is used (the reminder tool, `clawgate schedule add`, the panel's form).
        ("in 3 days at 18:00", "Mon 2026-03-30 18:00"),  # across the change to summer time
        ("18:00 in 3 days", "Mon 2026-03-30 18:00"),
        ("in three days at 6pm", "Mon 2026-03-30 18:00"),
        ("in a week at 9", "Fri 2026-04-03 09:00"),
        ("in 2 weeks at 8:30", "Fri 2026-04-10 08:30"),
        ("next week at 10", "Fri 2026-04-03 10:00"),
        ("day after tomorrow at 9", "Sun 2026-03-29 09:00"),
        ("the day after tomorrow 9am", "Sun 2026-03-29 09:00"),
        ("after tomorrow at noon", "Sun 2026-03-29 12:00"),
        ("in 3 days", "Mon 2026-03-30 12:00"),  # no time: elapsed, 72 hours (one of them skipped)
    ],
)
def test_a_relative_day_with_a_time(text: str, expected: str) -> None:
    assert first_local(text) == expected


def test_a_time_of_day_goes_with_whole_days_only() -> None:
    with pytest.raises(ScheduleError, match="say whole days"):
        parse_when("in 2 hours at 9", BERLIN, NOW)


def test_numeric_dates_follow_the_zone_where_they_are_ambiguous() -> None:
    # March 4th (this year's has passed), where Berlin reads 3 April.
    assert first_local("3/4 at 9", NEW_YORK) == "Thu 2027-03-04 09:00"
    assert first_local("24/12 at 9", NEW_YORK) == "Thu 2026-12-24 09:00"  # only one reading
    assert first_local("12/24 at 9") == "Thu 2026-12-24 09:00"


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("tomorrow", "time of day"),
        ("dec 24", "time of day"),
        ("every weekday", "at what time"),
        ("on 31 apr at 9", "not a valid date"),
        ("Mon 1 Dec 2026 at 09:00", "is a tuesday, not a monday"),
        ("at 9 (Mars/Olympus)", "unknown time zone"),
        ("in 99999999999999 days", "out of range"),
    ],
)
def test_what_it_refuses_it_says_why(text: str, reason: str) -> None:
    with pytest.raises(ScheduleError, match=reason):
        parse_when(text, BERLIN, NOW)


def test_a_date_in_words_is_not_a_cron_line() -> None:
    schedule = parse_when("24 december 2026 at 8am", BERLIN, NOW)
    assert isinstance(schedule, Once)


def test_the_heartbeat_and_the_scheduler_read_a_time_the_same_way() -> None:
    for text, expected in (
        ("10pm", time(22)),
        ("9:30", time(9, 30)),
        ("noon", time(12)),
        ("7 a.m.", time(7)),
        ("21.15", time(21, 15)),
    ):
        assert parse_time_of_day(text) == expected
        assert first_local(f"every day at {text}").endswith(f"{expected:%H:%M}")


def test_a_run_seconds_away_is_not_now() -> None:
    assert from_now(NOW + timedelta(seconds=39), NOW) == "in 39 s"
    assert from_now(NOW - timedelta(seconds=5), NOW) == "5 s ago"
    assert from_now(NOW + timedelta(milliseconds=300), NOW) == "now"
    assert from_now(NOW + timedelta(minutes=5), NOW) == "in 5 minutes"


def test_the_listing_says_in_39_s_and_what_an_overdue_job_waits_for(tmp_path: Path) -> None:
    create(tmp_path, BERLIN, "in 39 seconds", "Drink water", "message", NOW)
    views, problems = list_jobs(tmp_path, BERLIN)
    listing = render_list(views, problems, BERLIN, NOW)
    assert "in 39 s" in listing and "now" not in listing, listing
    later = render_list(views, problems, BERLIN, NOW + timedelta(minutes=2))
    assert "overdue" in later and "ago" in later and "gateway runs" in later, later


# -- the property: every accepted phrase round-trips through the listing ---------------------

ZONES = [
    BERLIN,
    NEW_YORK,
    ZoneInfo("UTC"),
    ZoneInfo("Asia/Tokyo"),
    ZoneInfo("Asia/Kolkata"),
    ZoneInfo("Australia/Lord_Howe"),
]
WEEKDAYS = ["monday", "tue", "wednesday", "thu", "fri", "saturday", "sun"]
MONTHS = [
    "jan",
    "february",
    "mar",
    "april",
    "may",
    "jun",
    "july",
    "aug",
    "sept",
    "oct",
    "november",
    "dec",
]


@st.composite
def times_of_day(draw: st.DrawFn) -> str:
    hour, minute = draw(st.integers(0, 23)), draw(st.integers(0, 59))
    half = hour % 12 or 12
    return draw(
        st.sampled_from(
            [
                f"{hour}",
                f"{hour:02d}:{minute:02d}",
                f"{hour}:{minute:02d}",
                f"{half}am",
                f"{half}pm",
                f"{half}:{minute:02d} pm",
                f"{half} a.m.",
                "noon",
                "midnight",
                f"{hour}.{minute:02d}",
            ]
        )
    )


@st.composite
def days(draw: st.DrawFn) -> str:
    day, month = draw(st.integers(1, 28)), draw(st.integers(1, 12))
    weekday = draw(st.sampled_from(WEEKDAYS))
    return draw(
        st.sampled_from(
            [
                "",
                "today",
                "tomorrow",
                "tonight",
                "this evening",
                "tomorrow morning",
                "tomorrow night",
                weekday,
                f"next {weekday}",
                f"on {weekday}",
                f"{weekday} evening",
                f"{MONTHS[month - 1]} {day}",
                f"{day} {MONTHS[month - 1]}",
                f"on the {day}th",
                f"{day}/{month}",
                f"2027-{month:02d}-{day:02d}",
                f"{MONTHS[month - 1]} {day}, 2028",
                "the day after tomorrow",
            ]
        )
    )


@st.composite
def phrases(draw: st.DrawFn) -> str:
    kind = draw(st.sampled_from(["day time", "relative", "recurring", "interval"]))
    if kind == "day time":
        day, at = draw(days()), draw(times_of_day())
        shape = draw(st.sampled_from(["{d} at {t}", "{d} {t}", "{t} {d}", "at {t} {d}"]))
        return " ".join(shape.format(d=day, t=at).split())
    if kind == "relative":
        amount = draw(st.integers(1, 5000))
        unit = draw(st.sampled_from(["seconds", "minutes", "min", "hours", "h", "days", "weeks"]))
        return draw(
            st.sampled_from(
                [
                    f"in {amount} {unit}",
                    "in an hour and a half",
                    "in half an hour",
                    f"in {amount % 9 + 1}h{amount % 60}",
                ]
            )
        )
    if kind == "recurring":
        which = draw(
            st.sampled_from(
                [
                    "day",
                    "weekday",
                    "weekend",
                    "morning",
                    "evening",
                    "night",
                    *WEEKDAYS,
                    "mon, wed and fri",
                    "tue and sat",
                ]
            )
        )
        at = draw(times_of_day())
        return draw(
            st.sampled_from([f"every {which} at {at}", f"every {which} {at}", f"daily at {at}"])
        )
    amount = draw(st.integers(1, 600))
    return draw(
        st.sampled_from(
            [f"every {amount} minutes", f"every {amount % 23 + 1} hours", "every hour", "hourly"]
        )
    )


_NEXT = re.compile(r" - next: (?P<words>.+?\([A-Za-z_/]+\))")
_RULE = re.compile(r"\((?P<rule>every [^()]+|cron [^()]+)\)$")


def _runs(schedule, anchor: datetime, zone: ZoneInfo, count: int = 4) -> list[datetime]:  # type: ignore[no-untyped-def]
    found = [schedule.first(anchor, zone)]
    while len(found) < count and found[-1] is not None:
        found.append(schedule.next_after(found[-1], zone, anchor))
    return found


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    phrase=phrases(),
    zone=st.sampled_from(ZONES),
    now=st.datetimes(
        min_value=datetime(2025, 1, 1), max_value=datetime(2030, 12, 31), timezones=st.just(UTC)
    ),
)
def test_every_accepted_phrase_round_trips_through_the_listing(
    phrase: str, zone: ZoneInfo, now: datetime
) -> None:
    try:
        schedule = parse_when(phrase, zone, now)
    except ScheduleError:
        assume(False)  # refused with a reason; the forms above say what must be accepted
        return
    first = schedule.first(now, zone)
    assume(first is not None and first > now)
    with tempfile.TemporaryDirectory() as folder:
        workspace = Path(folder)
        job, _ = create(workspace, zone, phrase, "Round trip", "message", now)
        views, problems = list_jobs(workspace, zone)
        listing = render_list(views, problems, zone, now)
    assert problems == [] and len(views) == 1
    view = views[0]
    if not job.recurring:
        words = _NEXT.search(listing)
        assert words is not None, listing
        again = parse_when(words["words"], zone, now)
        assert isinstance(again, Once)
        assert again.moment(zone) == view.next_run, (phrase, listing)
    else:
        rule = _RULE.search(listing)
        assert rule is not None, listing
        again = parse_when(rule["rule"], zone, now)
        assert _runs(again, job.created, zone) == _runs(job.schedule, job.created, zone), (
            phrase,
            rule["rule"],
        )
