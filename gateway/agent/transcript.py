"""Append-only JSONL transcripts, one file per session.

Every message, tool call and result is appended before the reply is sent, so a restart
continues the conversation where it stopped. A line torn by a crash is skipped on load (and
fenced off with a newline) rather than failing the whole session.

The file is also hostile input (the owner may edit it; a backup may be someone else's): a line
that is not a usable entry, whatever is wrong with it (nested thousands deep, a number too
long to convert, invalid UTF-8, a tool call that is not an object), is skipped, and one warning
per load says how many were.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

from gateway.agent.conversation import ImagePart, Message, ToolCall
from memory.atomic import BrokenFile, loads_bounded, make_private_dirs

log = logging.getLogger(__name__)

INTERRUPTED_TOOL_RESULT = "(interrupted: the gateway stopped before this tool call finished)"


class Transcript:
    """One session's transcript file. Appends are single `write` calls on an O_APPEND fd."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def append(self, entry: dict[str, Any]) -> None:
        line = json.dumps(entry, ensure_ascii=False, separators=(",", ":")) + "\n"
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        except FileNotFoundError:  # sessions/ was removed by hand: recreate it, never lose
            make_private_dirs(self.path.parent)
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, line.encode("utf-8"))
        finally:
            os.close(fd)

    def load(self) -> list[dict[str, Any]]:
        """All intact entries. Also repairs a torn last line so the next append starts clean."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return []
        if data and not data.endswith(b"\n"):
            log.warning("transcript %s ends in a torn line; it will be skipped", self.path.name)
            with open(self.path, "ab") as handle:
                handle.write(b"\n")
        entries: list[dict[str, Any]] = []
        skipped: list[int] = []
        for number, raw in enumerate(data.splitlines(), start=1):
            if not raw.strip():
                continue
            try:
                entry = loads_bounded(raw)
            except BrokenFile:
                skipped.append(number)
                continue
            if isinstance(entry, dict):
                entries.append(entry)
        if skipped:
            log.warning(
                "skipped %d unreadable line(s) of %s (the first: line %d)",
                len(skipped),
                self.path.name,
                skipped[0],
            )
        return entries


def entry_to_message(entry: dict[str, Any]) -> Message | None:
    """The conversation message an entry stands for, or None for bookkeeping entries.

    Raises ValueError for an entry of a known type whose fields are not what the gateway
    writes (a hand edit): the caller skips it."""
    kind = entry.get("type")
    untrusted = untrusted_field(entry)
    if kind == "user":
        return Message(
            "user",
            _text(entry.get("text", "")),
            images=_images(entry.get("images")),
            untrusted=untrusted,
        )
    if kind == "assistant":
        raw_calls = entry.get("tool_calls") or []
        if not isinstance(raw_calls, list) or not all(isinstance(c, dict) for c in raw_calls):
            raise ValueError("tool_calls is not a list of objects")
        calls = []
        for c in raw_calls:
            arguments = c.get("arguments") or {}
            if not isinstance(arguments, dict):
                raise ValueError("a tool call's arguments are not an object")
            calls.append(ToolCall(_text(c.get("id", "")), _text(c.get("name", "")), arguments))
        return Message("assistant", _text(entry.get("text", "")), tool_calls=tuple(calls))
    if kind == "tool_result":
        return Message(
            "tool",
            _text(entry.get("text", "")),
            tool_call_id=_text(entry.get("tool_call_id", "")),
            tool_name=_text(entry.get("name", "")),
            is_error=bool(entry.get("is_error", False)),
            untrusted=untrusted,
        )
    return None


def untrusted_field(entry: dict[str, Any]) -> str:
    """An entry's outside-text source (gateway/agent/provenance.py). A value the gateway does
    not write (a hand edit) still counts as outside text: dropping the mark would make a
    tainted context look clean."""
    value = entry.get("untrusted")
    if value is None or value == "":
        return ""
    return value if isinstance(value, str) else "outside text (an unreadable record)"


def _images(raw: Any) -> tuple[ImagePart, ...]:
    if not isinstance(raw, list):
        return ()
    found = []
    for item in raw:
        if isinstance(item, dict) and isinstance(item.get("path"), str):
            kind = item.get("media_type")
            found.append(
                ImagePart(
                    item["path"],
                    kind if isinstance(kind, str) else "image/jpeg",
                    _int(item.get("width")),
                    _int(item.get("height")),
                )
            )
    return tuple(found)


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _text(value: Any) -> str:
    """A field the gateway writes as a string; anything else a hand edit left is refused (a
    `str()` of a 5,000-digit number raises anyway, and of a list says nothing useful)."""
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ValueError(f"expected text, found {type(value).__name__}")
    return value


def message_to_entry(message: Message) -> dict[str, Any]:
    marked = {"untrusted": message.untrusted} if message.untrusted else {}
    if message.role == "tool":
        return {
            "type": "tool_result",
            "tool_call_id": message.tool_call_id,
            "name": message.tool_name,
            "text": message.text,
            "is_error": message.is_error,
            **marked,
        }
    entry: dict[str, Any] = {"type": message.role, "text": message.text, **marked}
    if message.images:  # references only: the pixels stay in the workspace file
        entry["images"] = [
            {"path": i.path, "media_type": i.media_type, "width": i.width, "height": i.height}
            for i in message.images
        ]
    if message.tool_calls:
        entry["tool_calls"] = [
            {"id": c.id, "name": c.name, "arguments": c.arguments} for c in message.tool_calls
        ]
    return entry


def repair_history(
    messages: list[Message], entry_ids: list[int]
) -> tuple[list[Message], list[int]]:
    """Give every tool call a result and drop results without a call.

    A crash between a tool call and its result would otherwise leave a history that both
    providers reject, and the session would be stuck for good. `entry_ids` runs parallel to
    `messages`; added results get -1.
    """
    repaired: list[tuple[Message, int]] = []
    pending: dict[str, ToolCall] = {}
    for message, entry_id in zip(messages, entry_ids, strict=True):
        if message.role == "tool":
            if pending.pop(message.tool_call_id, None) is not None:
                repaired.append((message, entry_id))
            continue
        _close_pending(repaired, pending)
        repaired.append((message, entry_id))
        pending = {call.id: call for call in message.tool_calls}
    _close_pending(repaired, pending)
    return [m for m, _ in repaired], [i for _, i in repaired]


def _close_pending(repaired: list[tuple[Message, int]], pending: dict[str, ToolCall]) -> None:
    for call in pending.values():
        interrupted = Message(
            "tool",
            INTERRUPTED_TOOL_RESULT,
            tool_call_id=call.id,
            tool_name=call.name,
            is_error=True,
        )
        repaired.append((interrupted, -1))
    pending.clear()
