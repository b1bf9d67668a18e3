"""The `[heartbeat]` settings section (see docs/heartbeats.md)."""

from __future__ import annotations

from datetime import timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, ConfigDict, Field, field_validator

from heartbeat.checklist import parse_interval
from heartbeat.hours import parse_clock


def _check_interval(value: str | None) -> str | None:
    if value is not None:
        every = parse_interval(value)
        if every is not None and every < timedelta(minutes=1):
            raise ValueError(f"interval {value!r} is too short: use at least 1m, or 0 to disable")
    return value


def _check_clock(value: str | None) -> str | None:
    if value is not None:
        parse_clock(value)
    return value


def check_zone(value: str | None) -> str | None:
    """An IANA zone name, or a ValueError that says so (shared with gateway.config)."""
    if value:
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError) as exc:
            close = closest_zone(value)
            hint = f" (did you mean {close}?)" if close else " (e.g. Europe/Berlin)"
            raise ValueError(f"unknown time zone {value!r}, use an IANA name{hint}") from exc
    return value


def closest_zone(value: str) -> str:
    """The IANA zone nearest to a misspelt one ("Europe/Berlim" -> "Europe/Berlin"), or "".
    Read only when a zone was refused: listing every zone reads the zone database."""
    import difflib
    from zoneinfo import available_timezones

    if len(value) > 64:
        return ""
    zones = {zone.lower(): zone for zone in available_timezones()}
    if value.strip().lower() in zones:
        return zones[value.strip().lower()]  # "europe/berlin": the case is what is wrong
    close = difflib.get_close_matches(value.strip().lower(), list(zones), n=1, cutoff=0.75)
    return zones[close[0]] if close else ""


class HeartbeatOverride(BaseModel):
    """Per-workspace values; anything left unset comes from the `[heartbeat]` section."""

    model_config = ConfigDict(extra="forbid")

    every: str | None = None
    active_start: str | None = None
    active_end: str | None = None
    timezone: str | None = None
    daily_token_cap: int | None = Field(None, ge=0)

    _every = field_validator("every")(_check_interval)
    _clock = field_validator("active_start", "active_end")(_check_clock)
    _zone = field_validator("timezone")(check_zone)


class HeartbeatSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    every: str = "30m"  # 0 disables heartbeats
    active_start: str = "08:00"
    active_end: str = "22:00"  # equal to start: all day; earlier than start: across midnight
    timezone: str = ""  # empty: the top-level timezone setting
    daily_token_cap: int = Field(150_000, ge=0)  # per workspace and day; 0: no cap
    busy_retry_seconds: float = Field(60.0, gt=0)
    max_tool_rounds: int = Field(5, ge=1, le=50)
    timeout_seconds: float = Field(120.0, gt=0)
    ack_max_chars: int = Field(300, ge=0)
    repeat_window_hours: float = Field(24.0, ge=0)
    jitter_fraction: float = Field(0.1, ge=0, le=0.5)
    # Keyed by person id (the workspace directory name).
    workspaces: dict[str, HeartbeatOverride] = Field(default_factory=dict)

    _every = field_validator("every")(_check_interval)
    _clock = field_validator("active_start", "active_end")(_check_clock)
    _zone = field_validator("timezone")(check_zone)
