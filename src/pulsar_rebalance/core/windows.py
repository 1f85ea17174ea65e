"""Maintenance windows: when a cluster's approved plans may start executing (pure; no I/O).

A cluster's setting is a time zone and a list of windows, each a cron expression for the moments it
opens (five fields, in the zone's wall-clock time) and a duration in minutes::

    {"timezone": "Europe/Berlin", "windows": [{"cron": "0 2 * * *", "duration_minutes": 120}]}

The cron subset is the classic one: ``minute hour day-of-month month day-of-week`` with ``*``, numbers,
ranges ``a-b``, lists ``a,b`` and steps ``*/n`` / ``a-b/n``; day-of-week 0-7 (0 and 7 are Sunday); when
both day fields are restricted a day matches if either does (as in cron). No names, no ``L``/``W``/``#``.

Daylight-saving time, decided once here:

* a window that opens at a wall-clock time skipped by the spring-forward jump (02:30 on the night
  clocks go 02:00 → 03:00) opens when the jump ends, at the same offset into the new hour (03:30);
* a wall-clock time that happens twice (the autumn fall-back) opens the window once, at the first;
* the duration is elapsed time: a 120-minute window is open 120 real minutes whatever the clock does.

A window may span midnight (``0 23 * * *`` for 180 minutes is open 23:00-02:00).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pulsar_rebalance.errors import ConfigError

MAX_DURATION_MINUTES = 7 * 24 * 60
SEARCH_DAYS = 366 * 5  # far enough for "29 2 *" (a leap day) from any date
_FIELDS = (("minute", 0, 59), ("hour", 0, 23), ("day of month", 1, 31), ("month", 1, 12), ("day of week", 0, 7))


@dataclass(frozen=True)
class CronSpec:
    """A parsed five-field cron expression (the sets of values each field allows)."""

    text: str
    minutes: tuple[int, ...]
    hours: tuple[int, ...]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]  # 0 = Sunday ... 6 = Saturday
    days_restricted: bool
    weekdays_restricted: bool

    def matches_day(self, day: dt.date) -> bool:
        if day.month not in self.months:
            return False
        in_dom = day.day in self.days
        in_dow = (day.isoweekday() % 7) in self.weekdays
        if self.days_restricted and self.weekdays_restricted:
            return in_dom or in_dow
        return in_dom and in_dow


@dataclass(frozen=True)
class Window:
    cron: CronSpec
    duration: dt.timedelta

    def as_json(self) -> dict[str, Any]:
        return {"cron": self.cron.text, "duration_minutes": int(self.duration.total_seconds() // 60)}


@dataclass(frozen=True)
class WindowSetting:
    """A cluster's maintenance windows; ``windows`` is never empty (no setting = no restriction)."""

    timezone: str
    windows: tuple[Window, ...]

    @property
    def zone(self) -> ZoneInfo:
        return ZoneInfo(self.timezone)

    def as_json(self) -> dict[str, Any]:
        return {"timezone": self.timezone, "windows": [w.as_json() for w in self.windows]}


@dataclass(frozen=True)
class WindowState:
    """Where ``now`` stands: inside a window (until ``closes_at``) or waiting for ``opens_at``."""

    open: bool
    opens_at: dt.datetime | None  # the next opening when closed (None: never within the search horizon)
    closes_at: dt.datetime | None  # when open: the end of the window that contains now


def _parse_field(text: str, name: str, lo: int, hi: int) -> tuple[set[int], bool]:
    values: set[int] = set()
    for part in text.split(","):
        base, _, step_text = part.partition("/")
        try:
            step = int(step_text) if step_text else 1
        except ValueError:
            raise ConfigError(f"cron {name}: step {step_text!r} is not a number") from None
        if step < 1:
            raise ConfigError(f"cron {name}: step must be at least 1, got {step}")
        if base == "*":
            first, last = lo, hi
        else:
            start, dash, end = base.partition("-")
            try:
                first = int(start)
                last = int(end) if dash else (hi if step_text else first)
            except ValueError:
                raise ConfigError(
                    f"cron {name}: {part!r} is not a number, range or step (names are not supported)"
                ) from None
            if not (lo <= first <= hi and lo <= last <= hi) or first > last:
                raise ConfigError(f"cron {name}: {part!r} is outside {lo}-{hi}")
        values.update(range(first, last + 1, step))
    return values, text != "*"


def parse_cron(text: str) -> CronSpec:
    """Parse a five-field cron expression; ``ValidationError`` naming the field otherwise."""
    if not isinstance(text, str):
        raise ConfigError(f"cron must be a string, got {type(text).__name__}")
    fields = text.split()
    if len(fields) != 5:
        raise ConfigError(
            f"cron {text!r} must have five fields (minute hour day-of-month month day-of-week), has {len(fields)}"
        )
    parsed = [_parse_field(f, name, lo, hi) for f, (name, lo, hi) in zip(fields, _FIELDS, strict=True)]
    weekdays = frozenset(d % 7 for d in parsed[4][0])
    return CronSpec(
        text=" ".join(fields),
        minutes=tuple(sorted(parsed[0][0])),
        hours=tuple(sorted(parsed[1][0])),
        days=frozenset(parsed[2][0]),
        months=frozenset(parsed[3][0]),
        weekdays=weekdays,
        days_restricted=parsed[2][1],
        weekdays_restricted=parsed[4][1],
    )


def parse_setting(raw: Mapping[str, Any]) -> WindowSetting:
    """Validate a cluster's window setting (the JSON operators write); clear errors for bad input."""
    if not isinstance(raw, Mapping):
        raise ConfigError("the maintenance-window setting must be a JSON object")
    unknown = sorted(set(raw) - {"timezone", "windows"})
    if unknown:
        raise ConfigError(f"unknown maintenance-window key(s): {', '.join(unknown)} (known: timezone, windows)")
    tz = raw.get("timezone", "UTC")
    if not isinstance(tz, str) or not tz:
        raise ConfigError("timezone must be an IANA zone name such as 'Europe/Berlin'")
    try:
        ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError):
        raise ConfigError(f"unknown timezone {tz!r} (an IANA zone name such as 'Europe/Berlin')") from None
    items = raw.get("windows")
    if not isinstance(items, Sequence) or isinstance(items, str) or not items:
        raise ConfigError("windows must be a non-empty list of {cron, duration_minutes}")
    windows = []
    for i, item in enumerate(items):
        if not isinstance(item, Mapping) or set(item) != {"cron", "duration_minutes"}:
            raise ConfigError(f"windows[{i}] must be an object with exactly cron and duration_minutes")
        minutes = item["duration_minutes"]
        if isinstance(minutes, bool) or not isinstance(minutes, int) or not 1 <= minutes <= MAX_DURATION_MINUTES:
            raise ConfigError(
                f"windows[{i}].duration_minutes must be an integer from 1 to {MAX_DURATION_MINUTES}, got {minutes!r}"
            )
        try:
            cron = parse_cron(item["cron"])
        except ConfigError as exc:
            raise ConfigError(f"windows[{i}]: {exc}") from None
        windows.append(Window(cron, dt.timedelta(minutes=minutes)))
    return WindowSetting(tz, tuple(windows))


def _to_utc(local: dt.datetime, zone: ZoneInfo) -> dt.datetime:
    """Wall-clock time in ``zone`` to UTC: the first of a repeated time; a skipped time shifts forward."""
    # PEP 495: fold=0 picks the first of a repeated time, and maps a skipped time with the offset from
    # before the jump, i.e. as far past the jump as it was past the skipped hour's start (02:30 -> 03:30)
    return local.replace(tzinfo=zone, fold=0).astimezone(dt.UTC)


def _day_openings(window: Window, zone: ZoneInfo, day: dt.date) -> Iterator[dt.datetime]:
    if window.cron.matches_day(day):
        for hour in window.cron.hours:
            for minute in window.cron.minutes:
                yield _to_utc(dt.datetime.combine(day, dt.time(hour, minute)), zone)


def _first_opening(window: Window, zone: ZoneInfo, after: dt.datetime) -> dt.datetime | None:
    """The window's first opening (UTC) strictly after ``after``; None within :data:`SEARCH_DAYS`."""
    day = after.astimezone(zone).date() - dt.timedelta(days=1)  # a gap shift may move an opening forward
    for _ in range(SEARCH_DAYS):
        found = [o for o in _day_openings(window, zone, day) if o > after]
        if found:  # a shifted opening of this day may still lie after the next day's first: look at both
            nxt = day + dt.timedelta(days=1)
            return min(found + [o for o in _day_openings(window, zone, nxt) if o > after])
        day += dt.timedelta(days=1)
    return None


def window_state(setting: WindowSetting, now: dt.datetime) -> WindowState:
    """Whether ``now`` (aware) is inside one of the windows, and the next opening if not."""
    if now.tzinfo is None:
        raise ValueError("now must be timezone-aware")
    zone = setting.zone
    now = now.astimezone(dt.UTC)
    closes: list[dt.datetime] = []
    opens: list[dt.datetime] = []
    for window in setting.windows:
        # an opening in (now - duration, now] means the window is open now
        started = _first_opening(window, zone, now - window.duration)
        if started is not None and started <= now:
            closes.append(started + window.duration)
        nxt = _first_opening(window, zone, now)
        if nxt is not None:
            opens.append(nxt)
    if closes:
        return WindowState(open=True, opens_at=None, closes_at=max(closes))
    return WindowState(open=False, opens_at=min(opens, default=None), closes_at=None)


def describe(setting: WindowSetting) -> str:
    """One line for operators: ``Europe/Berlin: 0 2 * * * for 120 min; ...``."""
    parts = [f"{w.cron.text} for {int(w.duration.total_seconds() // 60)} min" for w in setting.windows]
    return f"{setting.timezone}: " + "; ".join(parts)


__all__ = [
    "CronSpec",
    "Window",
    "WindowSetting",
    "WindowState",
    "describe",
    "parse_cron",
    "parse_setting",
    "window_state",
]
