"""Recent warnings and errors of this process, for the overview's "Needs attention".

A bounded in-memory log handler: attached to the root logger while the panel runs, detached
when it stops. It keeps the last records at WARNING or above (already masked of secrets by
the log files' formatter is not assumed: each message is masked here with the same secrets,
gateway/ops/redaction.py, and shown HTML-escaped).
"""

from __future__ import annotations

import logging
import re
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass

from gateway.ops.redaction import Redactor

KEPT = 100

# Warnings that are part of normal running, not something for the owner to fix: a stranger
# asking to pair (the overview lists the request itself, with Approve and Deny), and a
# transient failure being retried (one that does not recover ends in an ERROR line: "given
# up", "failed"). Matched on the logger and the start of the message.
ROUTINE = (
    ("gateway.pipeline.pairing", re.compile(r"pairing request on ")),
    ("", re.compile(r".*(; retrying\b|retrying in |rate limited, waiting )")),
)


@dataclass(frozen=True, slots=True)
class LogLine:
    at: float
    level: str
    logger: str
    message: str


@dataclass(slots=True)
class Notice:
    at: float  # the newest time it came
    level: str
    logger: str
    message: str
    count: int = 1


def is_routine(line: LogLine) -> bool:
    if line.level not in ("WARNING",):
        return False
    return any(
        line.logger.startswith(logger) and pattern.match(line.message)
        for logger, pattern in ROUTINE
    )


class RecentErrors(logging.Handler):
    def __init__(self, secrets: Iterable[str] = (), capacity: int = KEPT) -> None:
        super().__init__(logging.WARNING)
        self.secrets = [s for s in secrets if s]
        self._redact = Redactor(self.secrets)
        self.lines: deque[LogLine] = deque(maxlen=capacity)

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = record.getMessage()
        except Exception:  # a bad format string must not break logging
            message = str(record.msg)
        self.lines.append(
            LogLine(record.created, record.levelname, record.name, self._redact(message)[:500])
        )

    def newest(self, count: int = 10) -> list[LogLine]:
        return list(self.lines)[-count:][::-1]

    def attention(self, count: int = 10) -> tuple[list[Notice], int]:
        """What needs the owner's eye, newest first, the same message counted once with how
        often it came; and how many routine lines were left out."""
        found: dict[tuple[str, str, str], Notice] = {}
        routine = 0
        for line in reversed(self.lines):
            if is_routine(line):
                routine += 1
                continue
            key = (line.level, line.logger, line.message)
            if key in found:
                found[key].count += 1
            else:
                found[key] = Notice(line.at, line.level, line.logger, line.message)
        return list(found.values())[:count], routine

    def attach(self) -> None:
        logging.getLogger().addHandler(self)

    def detach(self) -> None:
        logging.getLogger().removeHandler(self)
