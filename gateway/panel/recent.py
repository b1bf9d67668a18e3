"""Recent warnings and errors of this process, for the overview page.

A bounded in-memory log handler: attached to the root logger while the panel runs, detached
when it stops. It keeps the last records at WARNING or above (already masked of secrets by
the log files' formatter is not assumed: each message is masked here with the same secrets,
gateway/ops/redaction.py, and shown HTML-escaped).
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass

from gateway.ops.redaction import Redactor

KEPT = 50


@dataclass(frozen=True, slots=True)
class LogLine:
    at: float
    level: str
    logger: str
    message: str


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
        self.lines.append(LogLine(record.created, record.levelname, record.name,
                                  self._redact(message)[:500]))

    def newest(self, count: int = 10) -> list[LogLine]:
        return list(self.lines)[-count:][::-1]

    def attach(self) -> None:
        logging.getLogger().addHandler(self)

    def detach(self) -> None:
        logging.getLogger().removeHandler(self)
