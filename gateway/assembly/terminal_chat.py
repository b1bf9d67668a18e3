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
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from gateway.agent.sessions import DROPPED_EVENT, transcript_path
from gateway.config.settings import Settings
from gateway.ops.logs import setup_logging
from gateway.pipeline.routing import TERMINAL_CHANNEL
from gateway.stores.database import STATE_DIR
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


# Bookkeeping lines that end a turn without an answer: an error reply, a message given up on.
_ENDED_UNANSWERED = ("error", DROPPED_EVENT)


def _exchanges(
    workspace: Path, person: str, *, endings: bool = False
) -> Iterator[dict[str, object]]:
    """The person's DM conversation, newest first: user messages and the assistant's final
    answers (tool-calling steps of a turn are left out); with `endings`, also the lines that
    ended a turn without an answer (an error, a message given up on)."""
    path = transcript_path(workspace, dm_session_key(person))
    try:
        lines = path.read_bytes().splitlines()
    except OSError:
        return
    kinds = ("user", "assistant", *(_ENDED_UNANSWERED if endings else ()))
    for raw in reversed(lines):
        try:
            entry = json.loads(raw)
        except (ValueError, RecursionError):  # torn, hand-edited or hostile: skipped
            continue
        if not isinstance(entry, dict) or entry.get("type") not in kinds:
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


@dataclass(frozen=True, slots=True)
class Unanswered:
    """The last line typed in the chat, with no answer after it."""

    text: str
    failed: str  # "": the chat stopped while it was thinking; else what the person was told


def unanswered_line(workspace: Path, person: str) -> Unanswered | None:
    """The last line typed in the chat when no answer followed it: either the chat was
    stopped while it was thinking (the gateway's inbox still holds it, and the next start
    answers it: channels/terminal.py), or its turn ended in an error (nothing will answer it;
    it must be sent again)."""
    failed = ""
    for entry in _exchanges(workspace, person, endings=True):
        kind = entry.get("type")
        if kind in _ENDED_UNANSWERED:
            failed = failed or " ".join(str(entry.get("text") or "it failed").split())
            continue
        if kind == "user" and entry.get("channel") == TERMINAL_CHANNEL:
            return Unanswered(str(entry.get("text", "")), failed)
        return None
    return None


def continuing_line(settings: Settings, workspace: Path, person: str) -> str | None:
    when = last_exchange(workspace, person)
    if when is None:
        return None
    local = when.astimezone(settings.zone())
    line = f"Continuing your conversation from {local:%a %d %b %Y %H:%M} (/new starts a fresh one)."
    waiting = unanswered_line(workspace, person)
    if waiting is not None:
        shown = waiting.text if len(waiting.text) <= 60 else waiting.text[:59] + "…"
        if waiting.failed:
            told = waiting.failed if len(waiting.failed) <= 160 else waiting.failed[:159] + "…"
            line += (
                f"\nYour last message ({shown!r}) was not answered: {told}\n"
                "To send it again, press Up and then Enter."
            )
        else:
            line += (
                f"\nYour last message was not answered before the chat stopped: "
                f"answering it now ({shown!r})."
            )
    return line
