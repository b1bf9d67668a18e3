"""The words about tasks shown in a chat: durations, states, a shortened goal."""

from __future__ import annotations

STATE_WORDS = {
    "queued": "queued",
    "running": "running",
    "waiting_approval": "waiting for your approval",
    "done": "done",
    "failed": "failed",
    "cancelled": "cancelled",
    "timed_out": "stopped at its deadline",
    "capped": "stopped at its token cap",
    "over_budget": "stopped: usage limit reached",
}


def when_text(seconds: float) -> str:
    """ "45 s", "12 min", "1 h 30 min"."""
    seconds = max(0.0, seconds)
    if seconds < 90:
        return f"{seconds:.0f} s"
    minutes = round(seconds / 60)
    if minutes < 90:
        return f"{minutes} min"
    hours, rest = divmod(minutes, 60)
    return f"{hours} h {rest} min" if rest else f"{hours} h"


def shorten(text: str, limit: int = 60) -> str:
    """One line of at most `limit` characters."""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1].rstrip() + "…"


def listing_line(
    number: int,
    state: str,
    elapsed: float,
    tokens: int,
    cost: float,
    goal: str,
) -> str:
    money = f", ${cost:.2f}" if cost >= 0.005 else ""
    return (
        f"#{number} {STATE_WORDS.get(state, state)}, {when_text(elapsed)}, "
        f"{tokens:,} tokens{money}: {shorten(goal)}"
    )
