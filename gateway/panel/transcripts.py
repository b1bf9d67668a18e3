"""Reading session transcripts for people to look at: lists, one conversation, daily figures.

Transcripts are append-only JSONL (gateway/agent/transcript.py); this module only reads them,
off the event loop, and turns entries into display items: a message, a folded tool call with
its result, a compaction marker, an event. A transcript's session key is in its first line
(`{"type": "session", "key": ...}`); heartbeat transcripts lack it and show their file name.
"""

from __future__ import annotations

import json
import os
import re
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from statistics import median
from typing import Any

from gateway.agent.transcript import Transcript
from gateway.workspace.paths import PathRefused, resolve_in_workspace
from gateway.workspace.seed import SESSIONS_DIR

_FILE = re.compile(r"^[A-Za-z0-9_.-]{1,200}\.jsonl$")
MAX_SHOWN = 400  # entries shown of one transcript (the newest)


@dataclass(frozen=True, slots=True)
class SessionFile:
    name: str  # file name under sessions/
    key: str  # session key, or "" if the file does not say
    lines: int
    modified: float
    archived: bool  # an older conversation kept by /new


@dataclass(slots=True)
class Item:
    kind: str  # user | assistant | tool | compaction | event
    ts: str
    text: str = ""
    calls: list[dict[str, Any]] = field(default_factory=list)  # name, arguments, result, error
    detail: dict[str, Any] = field(default_factory=dict)
    note: str = ""  # an event's particulars, in words
    problem: bool = False  # an event worth the reader's eye (a failed delivery, an error)


def _first_key(path: Path) -> str:
    try:
        with open(path, "rb") as handle:
            first = json.loads(handle.readline() or b"{}")
    except (OSError, ValueError):
        return ""
    if isinstance(first, dict) and first.get("type") == "session":
        return str(first.get("key", ""))
    return ""


def _count_lines(path: Path) -> int:
    count = 0
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 16):
            count += chunk.count(b"\n")
    return count


def list_sessions(workspace: Path) -> list[SessionFile]:
    """Every transcript of the workspace, newest first."""
    directory = workspace / SESSIONS_DIR
    found: list[SessionFile] = []
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return []
    for entry in entries:
        if not _FILE.match(entry.name) or not entry.is_file(follow_symlinks=False):
            continue
        path = Path(entry.path)
        archived = entry.name.count(".") > 1  # <stem>.<stamp>.jsonl
        found.append(
            SessionFile(
                entry.name, _first_key(path), _count_lines(path), entry.stat().st_mtime, archived
            )
        )
    return sorted(found, key=lambda s: s.modified, reverse=True)


def session_path(workspace: Path, name: str) -> Path:
    """The transcript `sessions/<name>`, through the resolver the file routes use
    (`resolve_in_workspace`): ValueError for a name that is no transcript's, a link leading
    out of sessions/ (to MEMORY.md or out of the workspace), or anything but a regular file."""
    if not _FILE.match(name) or name.startswith("."):
        raise ValueError(f"not a transcript name: {name!r}")
    try:
        path = resolve_in_workspace(workspace, f"{SESSIONS_DIR}/{name}", private=True, write=False)
    except PathRefused as exc:
        raise ValueError(f"{name}: {exc.reason}") from None
    if path.parent != Path(os.path.realpath(workspace / SESSIONS_DIR)) or not path.is_file():
        raise ValueError(f"not a transcript file: {name!r}")
    return path


def read_items(path: Path, limit: int = MAX_SHOWN) -> tuple[list[Item], int]:
    """Display items for the newest `limit` entries, and how many older entries were left out.

    A tool result is folded into the assistant message that called it.
    """
    entries = Transcript(path).load()
    skipped = max(0, len(entries) - limit)
    items: list[Item] = []
    calls: dict[str, dict[str, Any]] = {}
    for entry in entries[skipped:]:
        kind = entry.get("type")
        ts = str(entry.get("ts", ""))
        if kind == "user":
            media = entry.get("media")
            items.append(
                Item(
                    "user",
                    ts,
                    str(entry.get("text", "")),
                    detail={"media": _media(media)} if media else {},
                )
            )
        elif kind == "assistant":
            item = Item(
                "assistant",
                ts,
                str(entry.get("text", "")),
                detail={"heartbeat": bool(entry.get("heartbeat"))},
            )
            for call in entry.get("tool_calls") or []:
                shown = {
                    "name": str(call.get("name", "")),
                    "arguments": json.dumps(
                        call.get("arguments") or {}, ensure_ascii=False, indent=1
                    ),
                    "result": None,
                    "error": False,
                }
                calls[str(call.get("id", ""))] = shown
                item.calls.append(shown)
            items.append(item)
        elif kind == "tool_result":
            call = calls.get(str(entry.get("tool_call_id", "")))
            if call is not None:
                call["result"] = str(entry.get("text", ""))
                call["error"] = bool(entry.get("is_error"))
            else:
                items.append(
                    Item(
                        "tool",
                        ts,
                        str(entry.get("text", "")),
                        detail={"name": entry.get("name", "")},
                    )
                )
        elif kind == "compaction":
            items.append(
                Item(
                    "compaction",
                    ts,
                    str(entry.get("summary") or ""),
                    detail={
                        "reason": entry.get("reason", ""),
                        "first_kept_entry": entry.get("first_kept_entry"),
                    },
                )
            )
        elif kind != "session" and (event := _event(entry, ts)) is not None:
            items.append(event)
    return items, skipped


# Events shown in words; any other kind is shown as its name and fields.
_EVENT_WORDS = {
    "delivery": "reply not delivered",
    "error": "error",
    "dropped": "message given up on",
    "reply": "reply sent",
    "heartbeat_notice": "heartbeat notice",
    "flush": "memory flush before compaction",
}
_PROBLEMS = frozenset({"delivery", "error", "dropped"})


def _event(entry: dict[str, Any], ts: str) -> Item | None:
    """A bookkeeping line as a display item, or None for the ones that only say that all went
    as planned (a delivered reply: the reply above it says as much)."""
    kind = str(entry.get("type"))
    if kind == "delivery" and entry.get("ok"):
        return None
    detail = {k: v for k, v in entry.items() if k not in ("ts", "type")}
    text = detail.pop("text", None)
    fields = ", ".join(
        f"{k}={v}" for k, v in detail.items() if k not in ("ok", "message_id", "chat_id")
    )
    note = str(text) if text else fields
    if kind == "delivery":
        note = str(detail.get("error") or "refused") + (
            f" ({detail['channel']})" if detail.get("channel") else ""
        )
    return Item(
        "event",
        ts,
        _EVENT_WORDS.get(kind, kind),
        detail=detail,
        note=note,
        problem=kind in _PROBLEMS,
    )


def _media(raw: Any) -> list[dict[str, str]]:
    """What came with a message (gateway/agent/media/intake.py records it), as display
    strings; anything malformed is left out (a transcript is a file anyone could edit)."""
    shown: list[dict[str, str]] = []
    for item in raw if isinstance(raw, list) else []:
        if not isinstance(item, dict):
            continue
        fields = {
            key: str(item[key])[:2000]
            for key in ("kind", "label", "file", "seen", "transcript", "error", "duration")
            if isinstance(item.get(key), str | int | float)
        }
        shown.append(fields)
    return shown


@dataclass(slots=True)
class DayFigures:
    turns: int = 0
    tokens: int = 0
    latencies: list[float] = field(default_factory=list)

    @property
    def latency_p50(self) -> float:
        return median(self.latencies) if self.latencies else 0.0


def daily_figures(workspace: Path, today: date, days: int = 14) -> dict[str, DayFigures]:
    """Per day for the `days` days up to `today` (UTC, zeros included): turns, tokens, reply
    latency (message to delivered answer). Heartbeat transcripts count tokens, not turns."""
    figures: dict[str, DayFigures] = defaultdict(DayFigures)
    directory = workspace / SESSIONS_DIR
    try:
        paths = [
            Path(e.path)
            for e in os.scandir(directory)
            if _FILE.match(e.name) and e.is_file(follow_symlinks=False)
        ]
    except OSError:
        return {}
    for path in paths:
        asked: datetime | None = None
        heartbeat = "_heartbeat-" in path.name
        for entry in Transcript(path).load():
            ts = _parse(entry.get("ts"))
            if ts is None:
                continue
            day = figures[ts.astimezone(UTC).date().isoformat()]
            kind = entry.get("type")
            usage = entry.get("usage")
            if isinstance(usage, dict):
                day.tokens += sum(
                    int(v or 0) for k, v in usage.items() if k in ("input_tokens", "output_tokens")
                )
            if kind == "user" and not heartbeat:
                day.turns += 1
                asked = ts
            elif kind == "delivery" and asked is not None and entry.get("ok"):
                day.latencies.append((ts - asked).total_seconds())
                asked = None
    shown = [(today - timedelta(days=n)).isoformat() for n in range(days - 1, -1, -1)]
    return {day: figures.get(day) or DayFigures() for day in shown}


def _parse(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
