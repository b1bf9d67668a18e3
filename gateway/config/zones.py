"""The machine's time zone, named.

A person's day (their reminders, the nightly memory passes, the "current time" line of a
prompt) follows their zone: `Settings.zone_of(person)`. Where nothing names one, it is the
machine's, and that must be an IANA zone, not the offset it has today: a gateway started in
winter still runs in summer, and a fixed offset would not follow daylight-saving time.
"""

from __future__ import annotations

import functools
import os
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

__all__ = ["machine_zone"]


def machine_zone() -> ZoneInfo:
    """The machine's IANA zone (TZ, then /etc/localtime), UTC when it cannot be named."""
    return _named_zone(os.environ.get("TZ", ""))


@functools.lru_cache(maxsize=8)
def _named_zone(tz_variable: str) -> ZoneInfo:
    # Cached per TZ value: asked on every turn, and /etc/localtime is not changed under a
    # running gateway (a restart picks a new one up).
    candidates = [tz_variable.lstrip(":")]
    try:
        target = os.path.realpath("/etc/localtime")
        if "zoneinfo/" in target:
            candidates.append(target.split("zoneinfo/", 1)[1])
    except OSError:
        pass
    for name in candidates:
        if name:
            try:
                return ZoneInfo(name)
            except (ZoneInfoNotFoundError, ValueError):
                continue
    return ZoneInfo("UTC")
