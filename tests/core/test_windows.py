"""Maintenance-window arithmetic: inside or not, the next opening, DST transitions, midnight."""

from __future__ import annotations

import datetime as dt
from zoneinfo import ZoneInfo

import pytest

from pulsar_rebalance.core.windows import describe, parse_cron, parse_setting, window_state
from pulsar_rebalance.errors import ConfigError

BERLIN = ZoneInfo("Europe/Berlin")
UTC = dt.UTC


def berlin(*args: int, fold: int = 0) -> dt.datetime:
    return dt.datetime(*args, tzinfo=BERLIN, fold=fold)  # type: ignore[misc]


def setting(cron: str, minutes: int, tz: str = "Europe/Berlin"):
    return parse_setting({"timezone": tz, "windows": [{"cron": cron, "duration_minutes": minutes}]})


def test_inside_and_outside_a_nightly_window():
    s = setting("0 2 * * *", 120)
    inside = window_state(s, berlin(2026, 6, 10, 3, 15))
    assert inside.open and inside.closes_at == berlin(2026, 6, 10, 4, 0)
    at_open = window_state(s, berlin(2026, 6, 10, 2, 0))
    assert at_open.open  # the opening minute belongs to the window
    at_close = window_state(s, berlin(2026, 6, 10, 4, 0))
    assert not at_close.open and at_close.opens_at == berlin(2026, 6, 11, 2, 0)  # the end does not
    before = window_state(s, berlin(2026, 6, 10, 1, 59, 59))
    assert not before.open and before.opens_at == berlin(2026, 6, 10, 2, 0)


def test_window_spanning_midnight():
    s = setting("0 23 * * 1-5", 180)  # weeknights 23:00-02:00; Friday's runs into Saturday
    assert window_state(s, berlin(2026, 6, 13, 1, 30)).open  # Saturday 01:30, Friday's window
    sat_night = window_state(s, berlin(2026, 6, 13, 23, 30))
    assert not sat_night.open and sat_night.opens_at == berlin(2026, 6, 15, 23, 0)  # next: Monday
    assert window_state(s, berlin(2026, 6, 16, 0, 10)).closes_at == berlin(2026, 6, 16, 2, 0)


def test_spring_forward_skipped_opening_opens_after_the_jump():
    # 2026-03-29: Berlin goes 02:00 CET -> 03:00 CEST; 02:30 does not exist that night
    s = setting("30 2 * * *", 60)
    state = window_state(s, berlin(2026, 3, 29, 1, 0))
    assert state.opens_at == dt.datetime(2026, 3, 29, 1, 30, tzinfo=UTC)  # = 03:30 CEST
    assert state.opens_at.astimezone(BERLIN).hour == 3
    inside = window_state(s, dt.datetime(2026, 3, 29, 2, 0, tzinfo=UTC))  # 04:00 CEST
    assert inside.open and inside.closes_at == dt.datetime(2026, 3, 29, 2, 30, tzinfo=UTC)
    # the duration is elapsed time: a window opening at 01:30 CET spans the jump, 120 real minutes
    across = setting("30 1 * * *", 120)
    assert window_state(across, dt.datetime(2026, 3, 29, 2, 29, tzinfo=UTC)).open  # 04:29 CEST
    assert not window_state(across, dt.datetime(2026, 3, 29, 2, 30, tzinfo=UTC)).open


def test_fall_back_repeated_opening_opens_once():
    # 2026-10-25: Berlin goes 03:00 CEST -> 02:00 CET; 02:30 happens twice
    s = setting("30 2 * * *", 30)
    # (compared in UTC: PEP 495 makes == across zones False for a repeated wall-clock time)
    first = dt.datetime(2026, 10, 25, 0, 30, tzinfo=UTC)  # 02:30 CEST, the first 02:30
    assert window_state(s, berlin(2026, 10, 25, 1, 0)).opens_at == first
    second_pass = berlin(2026, 10, 25, 2, 45, fold=1)  # the second 02:45 (CET)
    state = window_state(s, second_pass)
    assert not state.open
    assert state.opens_at == berlin(2026, 10, 26, 2, 30)
    assert window_state(s, berlin(2026, 10, 25, 2, 45, fold=0)).open


def test_next_opening_in_utc_and_other_zones():
    s = setting("0 2 * * *", 60, tz="America/New_York")
    now = dt.datetime(2026, 1, 5, 12, 0, tzinfo=UTC)
    assert window_state(s, now).opens_at == dt.datetime(2026, 1, 6, 7, 0, tzinfo=UTC)  # 02:00 EST
    july = dt.datetime(2026, 7, 5, 12, 0, tzinfo=UTC)
    assert window_state(s, july).opens_at == dt.datetime(2026, 7, 6, 6, 0, tzinfo=UTC)  # 02:00 EDT


def test_several_windows_and_overlaps():
    s = parse_setting(
        {
            "timezone": "UTC",
            "windows": [
                {"cron": "0 1 * * *", "duration_minutes": 60},
                {"cron": "30 1 * * 0", "duration_minutes": 120},
            ],
        }
    )
    sunday = dt.datetime(2026, 6, 14, 1, 45, tzinfo=UTC)
    assert window_state(s, sunday).closes_at == dt.datetime(2026, 6, 14, 3, 30, tzinfo=UTC)  # the later end
    monday = dt.datetime(2026, 6, 15, 3, 0, tzinfo=UTC)
    assert window_state(s, monday).opens_at == dt.datetime(2026, 6, 16, 1, 0, tzinfo=UTC)
    assert describe(s) == "UTC: 0 1 * * * for 60 min; 30 1 * * 0 for 120 min"


def test_cron_fields_steps_ranges_and_day_semantics():
    spec = parse_cron("*/15 8-18/2 * * 1-5")
    assert spec.minutes == (0, 15, 30, 45) and spec.hours == (8, 10, 12, 14, 16, 18)
    assert parse_cron("0 0 * * 7").weekdays == frozenset({0})  # 7 is Sunday too
    # both day fields restricted: either matches (cron's rule); 2026-06-13 is a Saturday
    either = parse_cron("0 0 1 * 6")
    assert either.matches_day(dt.date(2026, 6, 13)) and either.matches_day(dt.date(2026, 7, 1))
    assert not either.matches_day(dt.date(2026, 6, 14))
    leap = setting("0 0 29 2 *", 10, tz="UTC")
    assert window_state(leap, dt.datetime(2026, 3, 1, tzinfo=UTC)).opens_at == dt.datetime(2028, 2, 29, tzinfo=UTC)
    never = setting("0 0 31 2 *", 10, tz="UTC")
    assert window_state(never, dt.datetime(2026, 3, 1, tzinfo=UTC)).opens_at is None


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"timezone": "Mars/Olympus", "windows": [{"cron": "0 2 * * *", "duration_minutes": 5}]}, "unknown timezone"),
        ({"windows": []}, "non-empty list"),
        ({"windows": [{"cron": "0 2 * *", "duration_minutes": 5}]}, "five fields"),
        ({"windows": [{"cron": "0 25 * * *", "duration_minutes": 5}]}, "cron hour: '25' is outside 0-23"),
        ({"windows": [{"cron": "0 2 * * MON", "duration_minutes": 5}]}, "names are not supported"),
        ({"windows": [{"cron": "*/0 2 * * *", "duration_minutes": 5}]}, "step must be at least 1"),
        ({"windows": [{"cron": "0 2 * * *", "duration_minutes": 0}]}, "duration_minutes must be an integer"),
        ({"windows": [{"cron": "0 2 * * *", "duration_minutes": True}]}, "duration_minutes must be an integer"),
        ({"windows": [{"cron": "0 2 * * *"}]}, "exactly cron and duration_minutes"),
        ({"windows": [{"cron": "0 2 * * *", "duration_minutes": 5}], "zone": "UTC"}, "unknown maintenance-window key"),
    ],
)
def test_bad_settings_are_refused_naming_the_problem(raw, message):
    with pytest.raises(ConfigError, match=message.replace("*", r"\*")):
        parse_setting(raw)


def test_naive_now_is_refused():
    with pytest.raises(ValueError, match="timezone-aware"):
        window_state(setting("0 2 * * *", 60), dt.datetime(2026, 1, 1))
