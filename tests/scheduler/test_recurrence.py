"""The time language and next-run computation: DST both ways, month ends, leap days."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from scheduler import Cron, Every, Once, ScheduleError, parse_when, resolve_local

BERLIN = ZoneInfo("Europe/Berlin")
NEW_YORK = ZoneInfo("America/New_York")
# Friday 27 March 2026, 11:00 in Berlin (CET, UTC+1); Berlin springs forward on Sunday 29th.
NOW = datetime(2026, 3, 27, 10, 0, tzinfo=UTC)


def runs(text: str, zone: ZoneInfo, now: datetime, count: int) -> list[datetime]:
    schedule = parse_when(text, zone, now)
    found = [schedule.first(now, zone)]
    while len(found) < count and found[-1] is not None:
        found.append(schedule.next_after(found[-1], zone, now))
    return [moment.astimezone(zone) for moment in found if moment is not None]


def local(moments: list[datetime]) -> list[str]:
    return [f"{m:%Y-%m-%d %H:%M %Z}" for m in moments]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("tomorrow at 9", "2026-03-28 09:00 CET"),
        ("tomorrow at 9:30pm", "2026-03-28 21:30 CET"),
        ("today at 15:00", "2026-03-27 15:00 CET"),
        ("at 15:00", "2026-03-27 15:00 CET"),
        ("at 9", "2026-03-28 09:00 CET"),  # nine has passed today: tomorrow
        ("9pm", "2026-03-27 21:00 CET"),
        ("at noon", "2026-03-27 12:00 CET"),
        ("in 2 hours", "2026-03-27 13:00 CET"),
        ("in 30 minutes", "2026-03-27 11:30 CET"),
        ("in an hour", "2026-03-27 12:00 CET"),
        ("in 90 seconds", "2026-03-27 11:01 CET"),
        ("monday at 9", "2026-03-30 09:00 CEST"),
        ("on friday at 17:00", "2026-03-27 17:00 CET"),  # today, still ahead
        ("friday at 10", "2026-04-03 10:00 CEST"),  # today's has passed: next week
        ("on 2026-12-01 at 9", "2026-12-01 09:00 CET"),
        ("2026-12-01 15:00", "2026-12-01 15:00 CET"),
        ("2026-12-01T15:00:00+00:00", "2026-12-01 16:00 CET"),
        ("2026-12-01T15:00Z", "2026-12-01 16:00 CET"),
        ("  Tomorrow   AT 9AM ", "2026-03-28 09:00 CET"),
    ],
)
def test_one_shot_forms(text: str, expected: str) -> None:
    schedule = parse_when(text, BERLIN, NOW)
    assert isinstance(schedule, Once)
    assert local(runs(text, BERLIN, NOW, 3)) == [expected]  # exactly one run


@pytest.mark.parametrize(
    ("text", "phrase"),
    [
        ("every weekday at 8:30", "every weekday at 08:30"),
        ("every day at 7am", "every day at 07:00"),
        ("every weekend at 10", "every weekend at 10:00"),
        ("every mon, wed and fri at 18:00", "every monday, wednesday and friday at 18:00"),
        ("every Thursday at 9", "every thursday at 09:00"),
        ("every 2 hours", "every 2 hours"),
        ("every hour", "every hour"),
        ("every 90 minutes", "every 90 minutes"),
        ("cron 30 8 * * 1-5", "cron 30 8 * * 1-5"),
        ("0 9 1 * *", "cron 0 9 1 * *"),
    ],
)
def test_recurring_forms_are_canonical(text: str, phrase: str) -> None:
    schedule = parse_when(text, BERLIN, NOW)
    assert schedule.recurring
    assert schedule.canonical(BERLIN) == phrase
    # The canonical words mean the same schedule.
    again = parse_when(phrase, BERLIN, NOW)
    assert runs(phrase, BERLIN, NOW, 5) == runs(text, BERLIN, NOW, 5)
    assert type(again) is type(schedule)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "empty"),
        ("tomorrow", "time of day"),
        ("whenever you like", "time of day"),
        ("at 25:00", "not a time of day"),
        ("at 13pm", "12-hour"),
        ("every 2 days", "time of day"),
        ("every week", "time of day"),
        ("every 10 seconds", "whole number of minutes"),
        ("every 90 seconds", "whole number of minutes"),
        ("in 10 fortnights", "amount of time"),
        ("every blursday at 9", "not a day"),
        ("cron 1 2 3", "5 fields"),
        ("cron 0 9 31 2 *", "bad cron"),
        ("cron 0 0 0 0 0 0", "5 fields"),
        ("2026-02-30 10:00", "not a valid date"),
    ],
)
def test_bad_input_is_a_clear_error(text: str, reason: str) -> None:
    with pytest.raises(ScheduleError, match=reason):
        parse_when(text, BERLIN, NOW)


def test_weekday_phrase_equals_its_cron_line() -> None:
    words = runs("every weekday at 08:30", BERLIN, NOW, 10)
    cron = runs("cron 30 8 * * 1-5", BERLIN, NOW, 10)
    assert words == cron
    assert {m.weekday() for m in words} == {0, 1, 2, 3, 4}


@pytest.mark.parametrize(
    ("zone", "start", "spring"),
    [
        (BERLIN, datetime(2026, 3, 27, 12, tzinfo=UTC), "2026-03-29"),
        (NEW_YORK, datetime(2026, 3, 6, 18, tzinfo=UTC), "2026-03-08"),
    ],
)
def test_daily_time_stays_local_when_clocks_spring_forward(
    zone: ZoneInfo, start: datetime, spring: str
) -> None:
    found = runs("every day at 08:30", zone, start, 4)
    assert [f"{m:%H:%M}" for m in found] == ["08:30"] * 4
    utc = [m.astimezone(UTC) for m in found]
    # 24 h apart, except the 23-hour day the clocks spring forward.
    gaps = {f"{b.astimezone(zone):%Y-%m-%d}": b - a for a, b in itertools.pairwise(utc)}
    assert gaps[spring] == timedelta(hours=23)
    assert sorted(set(gaps.values())) == [timedelta(hours=23), timedelta(hours=24)]


@pytest.mark.parametrize(
    ("zone", "start", "fall"),
    [
        (BERLIN, datetime(2026, 10, 23, 12, tzinfo=UTC), "2026-10-25"),
        (NEW_YORK, datetime(2026, 10, 30, 18, tzinfo=UTC), "2026-11-01"),
    ],
)
def test_daily_time_stays_local_when_clocks_fall_back(
    zone: ZoneInfo, start: datetime, fall: str
) -> None:
    found = runs("every weekday at 08:30", zone, start, 3) + runs(
        "every day at 08:30", zone, start, 4
    )
    assert {f"{m:%H:%M}" for m in found} == {"08:30"}
    daily = [m.astimezone(UTC) for m in runs("every day at 08:30", zone, start, 4)]
    gaps = {f"{b.astimezone(zone):%Y-%m-%d}": b - a for a, b in itertools.pairwise(daily)}
    assert gaps[fall] == timedelta(hours=25)


def test_a_skipped_time_runs_at_the_first_minute_that_exists() -> None:
    # 29 March 2026 in Berlin: 02:00 CET jumps to 03:00 CEST; 02:30 does not exist.
    found = runs("every day at 02:30", BERLIN, datetime(2026, 3, 27, 12, tzinfo=UTC), 4)
    assert local(found) == [
        "2026-03-28 02:30 CET",
        "2026-03-29 03:00 CEST",
        "2026-03-30 02:30 CEST",
        "2026-03-31 02:30 CEST",
    ]
    # The one-shot rule is the same.
    once = parse_when("on 2026-03-29 at 2:30", BERLIN, NOW)
    assert local([once.first(NOW, BERLIN).astimezone(BERLIN)]) == ["2026-03-29 03:00 CEST"]
    assert resolve_local(datetime(2026, 3, 29, 2, 59), BERLIN).astimezone(UTC) == datetime(
        2026, 3, 29, 1, 0, tzinfo=UTC
    )


def test_a_time_that_happens_twice_runs_once_at_the_first() -> None:
    # 25 October 2026 in Berlin: 03:00 CEST falls back to 02:00 CET; 02:30 happens twice.
    start = datetime(2026, 10, 23, 12, tzinfo=UTC)
    found = runs("every day at 02:30", BERLIN, start, 4)
    assert local(found) == [
        "2026-10-24 02:30 CEST",
        "2026-10-25 02:30 CEST",
        "2026-10-26 02:30 CET",
        "2026-10-27 02:30 CET",
    ]
    once = parse_when("on 2026-10-25 at 2:30", BERLIN, NOW)
    assert once.first(NOW, BERLIN) == datetime(2026, 10, 25, 0, 30, tzinfo=UTC)


def test_counting_from_inside_the_repeated_hour_never_goes_back_in_time() -> None:
    # Created at 02:15 CET (the second 02:15): today's 02:30 CEST is already in the past.
    created = datetime(2026, 10, 25, 1, 15, tzinfo=UTC)
    schedule = parse_when("every day at 02:30", BERLIN, created)
    first = schedule.first(created, BERLIN)
    assert first is not None and first > created
    assert local([first.astimezone(BERLIN)]) == ["2026-10-26 02:30 CET"]


def test_an_interval_is_elapsed_time_across_dst() -> None:
    start = datetime(2026, 3, 28, 22, 0, tzinfo=UTC)  # Saturday 23:00 CET
    found = runs("every 2 hours", BERLIN, start, 4)
    assert local(found) == [
        "2026-03-29 01:00 CET",
        "2026-03-29 04:00 CEST",
        "2026-03-29 06:00 CEST",
        "2026-03-29 08:00 CEST",
    ]
    utc = [m.astimezone(UTC) for m in found]
    assert {b - a for a, b in itertools.pairwise(utc)} == {timedelta(hours=2)}


def test_an_interval_counts_from_its_anchor_not_from_the_last_run() -> None:
    anchor = datetime(2026, 1, 1, 9, 0, tzinfo=UTC)
    every = Every(timedelta(hours=2), "every 2 hours")
    # Asked at an odd moment, it still lands on the anchor's grid.
    assert every.next_after(datetime(2026, 1, 3, 10, 17, tzinfo=UTC), UTC_ZONE, anchor) == datetime(
        2026, 1, 3, 11, 0, tzinfo=UTC
    )
    assert every.next_after(datetime(2026, 1, 3, 11, 0, tzinfo=UTC), UTC_ZONE, anchor) == datetime(
        2026, 1, 3, 13, 0, tzinfo=UTC
    )


UTC_ZONE = ZoneInfo("UTC")


def test_month_ends() -> None:
    start = datetime(2026, 1, 15, tzinfo=UTC)
    on_31st = runs("cron 0 9 31 * *", UTC_ZONE, start, 4)
    assert [f"{m:%Y-%m-%d}" for m in on_31st] == [
        "2026-01-31",
        "2026-03-31",
        "2026-05-31",
        "2026-07-31",
    ]
    last = runs("cron 0 9 L * *", UTC_ZONE, start, 4)
    assert [f"{m:%Y-%m-%d}" for m in last] == [
        "2026-01-31",
        "2026-02-28",
        "2026-03-31",
        "2026-04-30",
    ]
    late_night = runs("every day at 23:30", BERLIN, datetime(2026, 1, 30, 12, tzinfo=UTC), 3)
    assert local(late_night) == [
        "2026-01-30 23:30 CET",
        "2026-01-31 23:30 CET",
        "2026-02-01 23:30 CET",
    ]


def test_leap_days() -> None:
    start = datetime(2026, 1, 1, tzinfo=UTC)
    leap = runs("cron 0 9 29 2 *", UTC_ZONE, start, 3)
    assert [f"{m:%Y-%m-%d}" for m in leap] == ["2028-02-29", "2032-02-29", "2036-02-29"]
    ends = runs("cron 0 12 L 2 *", UTC_ZONE, start, 3)
    assert [f"{m:%Y-%m-%d}" for m in ends] == ["2026-02-28", "2027-02-28", "2028-02-29"]
    with pytest.raises(ScheduleError, match="valid date"):
        parse_when("2027-02-29 10:00", UTC_ZONE, start)
    assert parse_when("2028-02-29 10:00", UTC_ZONE, start).first(start, UTC_ZONE) == datetime(
        2028, 2, 29, 10, tzinfo=UTC
    )


def test_one_shot_without_offset_follows_the_zone_and_with_offset_keeps_its_instant() -> None:
    floating = parse_when("2026-12-01 09:00", BERLIN, NOW)
    pinned = parse_when("2026-12-01T09:00:00+01:00", BERLIN, NOW)
    assert floating.first(NOW, BERLIN) == pinned.first(NOW, BERLIN)
    assert floating.first(NOW, NEW_YORK) == datetime(2026, 12, 1, 14, tzinfo=UTC)
    assert pinned.first(NOW, NEW_YORK) == datetime(2026, 12, 1, 8, tzinfo=UTC)


def test_cron_is_checked_when_parsed() -> None:
    assert Cron("*/15 9-17 * * 1-5", "cron */15 9-17 * * 1-5").recurring
    with pytest.raises(ScheduleError):
        Cron("61 * * * *", "x")
