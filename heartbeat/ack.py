"""HEARTBEAT_OK: the model's way of saying "nothing needs attention", never shown to a person.

A reply that starts or ends with the token (Markdown emphasis or code marks around it and
trailing punctuation tolerated, any case, `HEARTBEAT\\_OK` too) and has at most
`max_other_chars` of other text is an acknowledgement and is dropped. A longer reply is a real
alert: it is delivered with the token removed. `scrub_token` removes the token from anything
else the gateway sends, so it cannot reach a person in any channel.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

TOKEN = "HEARTBEAT_OK"
DEFAULT_ACK_MAX_CHARS = 300

_MARKS = r"[*_~`]{0,3}"
_TOKEN_RE = r"HEARTBEAT\\?_OK(?![A-Za-z0-9])"
_AT_START = re.compile(rf"^\s*{_MARKS}{_TOKEN_RE}{_MARKS}[.!,;:\-–—]*", re.IGNORECASE)
_AT_END = re.compile(rf"{_MARKS}{_TOKEN_RE}{_MARKS}[.!]*\s*$", re.IGNORECASE)
_ANYWHERE = re.compile(rf"{_MARKS}{_TOKEN_RE}{_MARKS}", re.IGNORECASE)
# What is left around a removed token that is not text: marks, punctuation, space.
_DECORATION = re.compile(r"^[\s*_~`.!,;:\-–—]*$")


@dataclass(frozen=True, slots=True)
class AckCheck:
    acknowledged: bool  # True: drop the reply, nothing needs attention
    text: str  # otherwise: what to deliver, with the token removed


def check_reply(reply: str, max_other_chars: int = DEFAULT_ACK_MAX_CHARS) -> AckCheck:
    text = reply.strip()
    found = False
    start = _AT_START.match(text)
    if start:
        text, found = text[start.end() :], True
    end = _AT_END.search(text)
    if end:
        text, found = text[: end.start()], True
    rest = scrub_token(text).strip()
    if _DECORATION.match(rest):
        return AckCheck(True, "")  # nothing but the token (or nothing at all)
    if found and len(rest) <= max_other_chars:
        return AckCheck(True, "")
    return AckCheck(False, rest)


def scrub_token(text: str) -> str:
    """`text` without any HEARTBEAT_OK in it (and without the gap it leaves)."""
    if "heartbeat" not in text.lower():
        return text
    cleaned = _ANYWHERE.sub("", text)
    cleaned = re.sub(r"[ \t]{2,}", " ", cleaned)
    return cleaned.strip()
