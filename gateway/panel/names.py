"""The names the panel calls people by, instead of `telegram-5555`.

A person id is a directory name made from a platform account; the owner knows people by name.
Two sources, best first: the `Name:` line of the person's USER.md (what the assistant learned
and the person may have corrected), then the display name their platform sent with the
pairing request that was approved (Telegram's first name, Discord's global name). Neither is
trusted text: each is cut to one short line without control or bidirectional characters
(gateway/workspace/names.py), and the templates escape it.
"""

from __future__ import annotations

import re
from pathlib import Path

from gateway.workspace.names import shown_name
from memory.atomic import BrokenFile, read_bounded
from memory.layout import USER_FILE

__all__ = ["MAX_NAME_CHARS", "name_in_user_file"]

MAX_NAME_CHARS = 40
USER_FILE_MAX_BYTES = 64 * 1024  # a USER.md is a few hundred bytes; past this, not read
# "- Name: Rosa", "* **Name:** Rosa", "Name: Rosa Diaz" (the template's first line, filled in).
_NAME_LINE = re.compile(
    r"^\s*(?:[-*+]\s+)?\**name\**\s*:\s*\**\s*(?P<name>.*?)\s*\**\s*$", re.IGNORECASE
)


def name_in_user_file(workspace: Path) -> str:
    """The name on USER.md's `Name:` line, or "" (no file, no such line, left empty)."""
    try:
        text = read_bounded(workspace / USER_FILE, USER_FILE_MAX_BYTES).decode("utf-8", "replace")
    except (OSError, BrokenFile):
        return ""
    for line in text.splitlines():
        found = _NAME_LINE.match(line)
        if found:
            return clean_name(found["name"])
    return ""


def clean_name(name: str) -> str:
    """One short line, safe to show; "" for nothing, or a template's placeholder."""
    name = shown_name(name.strip(" *_`"), MAX_NAME_CHARS)
    if name.startswith(("<", "(", "[")) or name in ("?", "-", "..."):
        return ""
    return name
