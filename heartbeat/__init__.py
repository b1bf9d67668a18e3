"""Heartbeats: the person's HEARTBEAT.md checklist on a timer, cheap when idle, never spammy.

Pure logic only: this package does not import `channels` or the gateway. The gateway side
(gateway/features/heartbeat_host.py) implements `HeartbeatHost` with the Gateway's parts.
"""

from heartbeat.ack import TOKEN, AckCheck, check_reply, scrub_token
from heartbeat.beat import (
    STANDING_PROMPT,
    BeatOutcome,
    DmTarget,
    Heartbeat,
    HeartbeatHost,
    HeartbeatPolicy,
    LightTurn,
)
from heartbeat.checklist import (
    Checklist,
    Task,
    is_effectively_empty,
    load_checklist,
    parse_checklist,
)
from heartbeat.hours import ActiveHours, parse_clock
from heartbeat.store import HeartbeatState, load_state, save_state
from heartbeat.timer import HeartbeatService, HeartbeatTimer

__all__ = [
    "STANDING_PROMPT",
    "TOKEN",
    "AckCheck",
    "ActiveHours",
    "BeatOutcome",
    "Checklist",
    "DmTarget",
    "Heartbeat",
    "HeartbeatHost",
    "HeartbeatPolicy",
    "HeartbeatService",
    "HeartbeatState",
    "HeartbeatTimer",
    "LightTurn",
    "Task",
    "check_reply",
    "is_effectively_empty",
    "load_checklist",
    "load_state",
    "parse_checklist",
    "parse_clock",
    "save_state",
    "scrub_token",
]
