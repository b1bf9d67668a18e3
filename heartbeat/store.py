"""Per-workspace heartbeat state, kept in the workspace as `.clawgate-heartbeat.json`.

It lives with the workspace (copying a workspace keeps its budget and repeat memory) and its
name is hidden, so the assistant's file tools cannot read or change it. It holds: the last
beat and its outcome, when the next beat is planned, tokens spent today, which alerts were
delivered recently (as digests, for repeat suppression), and when each task last ran.
Written through a temp file and rename; a missing or damaged file starts fresh. A hand-edited
one is hostile input: read up to `MAX_STATE_BYTES`, parsed with bounded nesting, and any value
that is not what it should be (a naive or out-of-range time, a 5,000-digit count) is dropped,
so a beat never meets it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

from memory.atomic import atomic_write_text, loads_bounded, read_bounded
from memory.layout import HEARTBEAT_STATE_FILE

log = logging.getLogger(__name__)

STATE_FILE = HEARTBEAT_STATE_FILE  # memory.layout
MAX_STATE_BYTES = 1024 * 1024  # a day's alerts and the tasks' last runs: a few KiB


def alert_digest(text: str) -> str:
    """Identity of an alert for repeat suppression: case and spacing do not make it new."""
    normal = re.sub(r"\s+", " ", text).strip().casefold()
    return hashlib.sha256(normal.encode("utf-8")).hexdigest()[:32]


@dataclass
class HeartbeatState:
    last_beat_at: datetime | None = None
    last_status: str = ""
    last_reason: str = ""
    next_beat_at: datetime | None = None
    token_day: str = ""  # ISO date (the person's zone) that tokens_today counts
    tokens_today: int = 0
    cap_notice_day: str = ""  # the day the "budget used up" notice went out
    alerts: dict[str, datetime] = field(default_factory=dict)  # digest -> delivered at
    task_runs: dict[str, datetime] = field(default_factory=dict)  # task name -> last run

    def tokens_on(self, day: date) -> int:
        return self.tokens_today if self.token_day == day.isoformat() else 0

    def add_tokens(self, day: date, tokens: int) -> None:
        self.tokens_today = self.tokens_on(day) + tokens
        self.token_day = day.isoformat()

    def delivered_recently(self, text: str, now: datetime, window: timedelta) -> datetime | None:
        at = self.alerts.get(alert_digest(text))
        return at if at is not None and now - at < window else None

    def remember_alert(self, text: str, now: datetime, window: timedelta) -> None:
        self.alerts = {d: at for d, at in self.alerts.items() if now - at < window}
        self.alerts[alert_digest(text)] = now

    def to_json(self) -> str:
        data: dict[str, Any] = {
            "last_beat_at": _iso(self.last_beat_at),
            "last_status": self.last_status,
            "last_reason": self.last_reason,
            "next_beat_at": _iso(self.next_beat_at),
            "token_day": self.token_day,
            "tokens_today": self.tokens_today,
            "cap_notice_day": self.cap_notice_day,
            "alerts": {d: at.isoformat() for d, at in self.alerts.items()},
            "task_runs": {n: at.isoformat() for n, at in self.task_runs.items()},
        }
        return json.dumps(data, indent=1, sort_keys=True) + "\n"

    @classmethod
    def from_json(cls, text: str | bytes) -> HeartbeatState:
        """Raises ValueError (memory.atomic.BrokenFile) when the text is no state at all;
        fields that are wrong are dropped one by one."""
        data = loads_bounded(text, max_depth=8)
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
        tokens = data.get("tokens_today", 0)
        return cls(
            last_beat_at=_parse(data.get("last_beat_at")),
            last_status=_text(data.get("last_status")),
            last_reason=_text(data.get("last_reason")),
            next_beat_at=_parse(data.get("next_beat_at")),
            token_day=_text(data.get("token_day")),
            tokens_today=tokens if isinstance(tokens, int) and 0 <= tokens < 10**15 else 0,
            cap_notice_day=_text(data.get("cap_notice_day")),
            alerts=_times(data.get("alerts")),
            task_runs=_times(data.get("task_runs")),
        )


def state_path(workspace: Path) -> Path:
    return workspace / STATE_FILE


def load_state(workspace: Path) -> HeartbeatState:
    path = state_path(workspace)
    try:
        return HeartbeatState.from_json(read_bounded(path, MAX_STATE_BYTES))
    except FileNotFoundError:
        return HeartbeatState()
    except Exception as exc:  # damaged or hostile: the next save replaces it
        log.warning("heartbeat state %s is unreadable (%s); starting fresh", path, exc)
        return HeartbeatState()


def save_state(workspace: Path, state: HeartbeatState) -> None:
    atomic_write_text(state_path(workspace), state.to_json())


def _iso(moment: datetime | None) -> str | None:
    return moment.isoformat() if moment is not None else None


def _text(value: Any) -> str:
    return value[:500] if isinstance(value, str) else ""


def _parse(value: Any) -> datetime | None:
    """An aware time that can be placed in UTC, or None (naive or odd times are dropped: a
    beat compares them with aware ones)."""
    if not isinstance(value, str) or not value or len(value) > 64:
        return None
    try:
        moment = datetime.fromisoformat(value)
        if moment.tzinfo is None:
            return None
        moment.astimezone(UTC)
    except (ValueError, OverflowError):
        return None
    return moment


def _times(raw: Any) -> dict[str, datetime]:
    if not isinstance(raw, dict):
        return {}
    parsed = {str(k)[:200]: _parse(v) for k, v in raw.items()}
    return {k: v for k, v in parsed.items() if v is not None}
