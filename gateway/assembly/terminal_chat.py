"""What the terminal chat needs around the channel: its log file, input history and banner.

In a chat the terminal is the conversation, so log lines go to a file (named in the banner)
instead of landing between `you>` and the answer. The input history and the log live in the
gateway's state directory under the workspaces root (0600 files, like the rest).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

from gateway.agent.sessions import transcript_path
from gateway.config.settings import Settings
from gateway.ops.logs import setup_logging
from gateway.ops.state import STATE_DIR
from gateway.pipeline.routing import TERMINAL_CHANNEL
from memory.layout import dm_session_key

LOG_FILE = "chat.log"
HISTORY_FILE = "chat-history"


def chat_log_path(settings: Settings) -> Path:
    return settings.workspaces_dir / STATE_DIR / LOG_FILE


def history_path(settings: Settings) -> Path:
    return settings.workspaces_dir / STATE_DIR / HISTORY_FILE


def log_to_file(settings: Settings) -> Path:
    """Send every log line of this process to the chat log (and none to the terminal)."""
    path = chat_log_path(settings)
    path.parent.mkdir(parents=True, exist_ok=True)
    os.close(os.open(path, os.O_CREAT | os.O_APPEND | os.O_WRONLY, 0o600))
    stream = open(path, "a", encoding="utf-8", buffering=1)  # noqa: SIM115 - lives with the process
    setup_logging(settings, stream=stream)
    logging.getLogger().setLevel(logging.getLevelName(settings.log_level))
    return path


def _exchanges(workspace: Path, person: str) -> Iterator[dict[str, object]]:
    """The person's DM conversation, newest first: user messages and the assistant's final
    answers (tool-calling steps of a turn are left out)."""
    path = transcript_path(workspace, dm_session_key(person))
    try:
        lines = path.read_bytes().splitlines()
    except OSError:
        return
    for raw in reversed(lines):
        try:
            entry = json.loads(raw)
        except (ValueError, RecursionError):  # torn, hand-edited or hostile: skipped
            continue
        if not isinstance(entry, dict) or entry.get("type") not in ("user", "assistant"):
            continue
        if entry.get("type") == "assistant" and entry.get("tool_calls"):
            continue
        yield entry


def last_exchange(workspace: Path, person: str) -> datetime | None:
    """When the person's DM conversation last had a message (None: a new conversation)."""
    for entry in _exchanges(workspace, person):
        try:
            return datetime.fromisoformat(str(entry.get("ts")))
        except ValueError:
            return None
    return None


def unanswered_line(workspace: Path, person: str) -> str | None:
    """The last line typed in the chat, when no answer followed it (the chat was stopped
    while it was thinking): the gateway's inbox still holds it, and the next start answers
    it (channels/terminal.py)."""
    for entry in _exchanges(workspace, person):
        if entry.get("type") == "user" and entry.get("channel") == TERMINAL_CHANNEL:
            return str(entry.get("text", ""))
        return None
    return None


def continuing_line(settings: Settings, workspace: Path, person: str) -> str | None:
    when = last_exchange(workspace, person)
    if when is None:
        return None
    local = when.astimezone(settings.zone())
    line = (f"Continuing your conversation from {local:%a %d %b %Y %H:%M} "
            "(/new starts a fresh one).")
    waiting = unanswered_line(workspace, person)
    if waiting is not None:
        shown = waiting if len(waiting) <= 60 else waiting[:59] + "…"
        line += (f"\nYour last message was not answered before the chat stopped: "
                 f"answering it now ({shown!r}).")
    return line
