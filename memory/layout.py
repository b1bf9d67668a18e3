"""The workspace layout and the access rule: every path of a workspace, and who may touch it.

This is the one place that knows what a workspace holds and which context may read or write
which part of it. The file tools, the prompt loader, the recall sources, versioning, backup and
the heartbeat ask it instead of spelling paths or private-file sets themselves. It lives in
`memory/` because the recall index (which may not import the gateway) needs the same names.

Contexts, from most to least private:
- private: the workspace's owner, present (their DM) or not (heartbeat, memory flush). Another
  person's DM is private too, in that person's own workspace.
- group: a shared chat. It runs in the gateway owner's workspace but owns only its own area,
  `groups/<channel>-<chat>/`.

The rule: **a context may load only what it may read, and may never write anything that a more
private context loads or follows.** Concretely:
- private: reads everything that is not internal (dot-names); writes everything except the
  transcripts (`sessions/`, append-only history kept by the gateway), and the group-readable
  files (every group's area, `groups/*/`, and the persona files) only when the owner is
  present and nothing from outside is in the context (see "Group-readable files" below).
- group: reads the persona files (AGENTS.md, SOUL.md, IDENTITY.md) and its own area; writes
  only inside its own area. Everything else is refused, including names added later (skills/,
  schedules): writes are default-deny outside the group's own area, so a new file a private
  context follows is protected without anyone remembering to list it here.

Group-readable files: everything a group context loads or reads, so text written there reaches
people the owner did not choose to tell. Private memory must never get there silently: a page
read in the owner's DM once made the model copy MEMORY.md into a group's NOTES.md. So a private
context writes (creates, changes, deletes) a group-readable file only when `Access.attended`
(the owner's own turn in their DM, or the owner by hand in the panel or the command line; never
a heartbeat, memory flush, reminder, tidying or any other unattended context) and
`Access.outside` is empty (no text from outside the owner's own messages and workspace files,
such as a web page, a document, a tool server's output or a file a group wrote, is in the
context window; gateway/agent/provenance.py derives it from the transcript's records).

Names are compared the way a case-insensitive, normalizing filesystem would when the question is
"is this private?" (deny), and exactly when the question is "is this allowed?" (allow), so a
case alias can only ever lose access, never gain it.
"""

from __future__ import annotations

import hashlib
import os
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import PurePath

__all__ = [
    "BOOTSTRAP_FILES",
    "CONSOLIDATE_STATE_FILE",
    "GROUPS_DIR",
    "HEARTBEAT_FILE",
    "HEARTBEAT_STATE_FILE",
    "INBOX_DIR",
    "INSTRUCTIONS_FILE",
    "MEMORY_DIR",
    "PERSONA_FILES",
    "PRIVATE",
    "PRIVATE_DIRS",
    "PRIVATE_FILES",
    "RECALL_DIR",
    "SCHEDULE_FILE",
    "SCHEDULE_STATE_FILE",
    "SEEDED_MARKER",
    "SESSIONS_DIR",
    "SKILLS_DIR",
    "TIDY_STATE_FILE",
    "TRASH_DIR",
    "Access",
    "daily_note",
    "dm_session_key",
    "group_access",
    "group_area",
    "group_session_key",
    "heartbeat_files",
    "heartbeat_session_key",
    "inbox_dir",
    "is_dm_session_key",
    "is_group_readable",
    "is_group_session_key",
    "is_private_relpath",
    "leads_to_area",
    "outside_source",
    "parse_group_session_key",
    "prompt_files",
    "read_refusal",
    "schedule_session_key",
    "shared_write_refusal",
    "strip_comments",
    "task_session_key",
    "write_refusal",
]

# --- names ----------------------------------------------------------------------------------

# The persona: who the assistant is. Followed everywhere, readable (never writable) by groups.
PERSONA_FILES: tuple[str, ...] = ("AGENTS.md", "SOUL.md", "IDENTITY.md")
TOOLS_FILE = "TOOLS.md"
BOOTSTRAP_FILE = "BOOTSTRAP.md"
HEARTBEAT_FILE = "HEARTBEAT.md"  # the heartbeat's checklist, followed unattended
USER_FILE = "USER.md"
MEMORY_FILE = "MEMORY.md"
# Standing instructions the owner said in chat ("never delete anything without asking me"),
# with where and when: followed in every private context, heartbeats included
# (memory/instructions.py). Its own file, not a section of USER.md: a heartbeat loads it
# without USER.md's bulk, and no rewrite of USER.md or MEMORY.md can touch it.
INSTRUCTIONS_FILE = "INSTRUCTIONS.md"
# Private memory: readable only in the owner's private contexts.
PRIVATE_FILES: tuple[str, ...] = (USER_FILE, MEMORY_FILE, INSTRUCTIONS_FILE)
MEMORY_DIR = "memory"  # daily notes memory/YYYY-MM-DD.md
PRIVATE_DIRS: tuple[str, ...] = (MEMORY_DIR,)
SESSIONS_DIR = "sessions"  # transcripts, append-only, written by the gateway only
SKILLS_DIR = "skills"  # skills the assistant follows in private contexts
GROUPS_DIR = "groups"  # groups/<channel>-<chat>/: each group's own writable area
GROUP_NOTES_FILE = "NOTES.md"  # loaded into that group's prompts only
# Files people sent (voice notes, photos, documents), by day: `inbox/YYYY-MM-DD/` of the area
# the context writes (a group's under its own area). Received copies, not versioned.
INBOX_DIR = "inbox"
SEEN_DIR = ".seen"  # inside a day's inbox folder: the resized copies a model sees (hidden)
# Internal state: dot-names, invisible to every tool.
RECALL_DIR = ".recall"  # derived recall index, rebuildable
TRASH_DIR = ".trash"  # delete_file moves files here
GIT_DIR = ".git"
HEARTBEAT_STATE_FILE = ".clawgate-heartbeat.json"
TIDY_STATE_FILE = ".clawgate-tidy.json"  # the daily MEMORY.md tidying's last pass
VOICE_FILE = ".clawgate-voice.json"  # the person's /voice choice (gateway/pipeline/voice_choice.py)
CONSOLIDATE_STATE_FILE = ".clawgate-consolidate.json"  # the nightly consolidation's passes
# Reminders (scheduler/): the person's job list (versioned, hand-editable) and what ran.
SCHEDULE_FILE = ".clawgate-schedule.json"
SCHEDULE_STATE_FILE = ".clawgate-schedule-state.jsonl"
SEEDED_MARKER = ".clawgate-workspace"

# Seeded from templates and injected into private prompts, in this order.
BOOTSTRAP_FILES: tuple[str, ...] = (
    *PERSONA_FILES,
    INSTRUCTIONS_FILE,
    USER_FILE,
    TOOLS_FILE,
    BOOTSTRAP_FILE,
    MEMORY_FILE,
    HEARTBEAT_FILE,
)
# Derived from other files: never versioned, never backed up.
DERIVED_DIRS: tuple[str, ...] = (RECALL_DIR,)
# Not versioned: derived data, append-only history, the trash and the timer's bookkeeping.
UNVERSIONED_DIRS: tuple[str, ...] = (GIT_DIR, RECALL_DIR, SESSIONS_DIR, TRASH_DIR, INBOX_DIR)
UNVERSIONED_FILES: tuple[str, ...] = (
    HEARTBEAT_STATE_FILE,
    SCHEDULE_STATE_FILE,
    TIDY_STATE_FILE,
    CONSOLIDATE_STATE_FILE,
)


def daily_note(day: date) -> str:
    return f"{MEMORY_DIR}/{day.isoformat()}.md"


# --- what a prompt reads of a file ----------------------------------------------------------
# HTML comments (`<!-- ... -->`) are the human's notes about a file (the seeded files explain
# themselves in them): Markdown viewers hide them, and so do the prompt and the heartbeat. An
# unclosed comment hides the rest of the file, as in a viewer. Linear on any input: matches
# never overlap and the end of the text always closes one.
_COMMENT = re.compile(r"<!--.*?(?:-->|\Z)", re.DOTALL)
_BLANK_RUN = re.compile(r"\n[ \t]*\n(?:[ \t]*\n)+")


def strip_comments(text: str) -> str:
    """`text` without its HTML comments, and without the blank runs they leave."""
    if "<!--" not in text:
        return text
    return _BLANK_RUN.sub("\n\n", _COMMENT.sub("", text))


# --- session keys ---------------------------------------------------------------------------
# One builder, so the lanes, the transcripts, the recall index, versioning and the panel agree.
# Nothing else spells a key or takes one apart (tests/test_session_keys.py scans for it).
# Person ids and channel names never contain ':'; a chat id may.

_DM = "dm"
_HEARTBEAT = "heartbeat"
_SCHEDULE = "schedule"
_TASK = "task"
_GROUP = ":group:"


def dm_session_key(person_id: str) -> str:
    """A person's DM conversation, whatever channel they write from (links join accounts)."""
    return f"{person_id}:{_DM}"


def heartbeat_session_key(person_id: str) -> str:
    """The heartbeat's isolated light turns for a person (no DM history)."""
    return f"{person_id}:{_HEARTBEAT}"


def schedule_session_key(person_id: str) -> str:
    """Scheduled agent tasks' isolated light turns for a person, like the heartbeat's."""
    return f"{person_id}:{_SCHEDULE}"


def task_session_key(person_id: str, task_id: int) -> str:
    """A background task's own session (gateway/features/tasks/): a fresh context per task."""
    return f"{person_id}:{_TASK}:{task_id}"


def group_session_key(channel: str, chat_id: str) -> str:
    return f"{channel}{_GROUP}{chat_id}"


def parse_group_session_key(key: str) -> tuple[str, str] | None:
    """`(channel, chat id)` of a group chat's session key, None for any other key."""
    channel, sep, chat_id = key.partition(_GROUP)
    if not channel or ":" in channel or not sep or not chat_id:
        return None
    return channel, chat_id


def is_task_session_key(key: str) -> bool:
    """A background task's own session: `<person>:task:<id>`."""
    person, sep, rest = key.partition(f":{_TASK}:")
    return bool(sep) and bool(person) and ":" not in person and rest.isdigit()


def is_group_session_key(key: str) -> bool:
    """A group chat's session: `<channel>:group:<chat id>` (what people there wrote)."""
    return parse_group_session_key(key) is not None


def is_dm_session_key(key: str) -> bool:
    """A DM transcript: the only transcripts the recall index reads.

    Exactly `<person>:dm` (person ids never contain ':'), so a group whose chat id happens to
    be "dm" (`telegram:group:dm`) is not mistaken for one.
    """
    person, sep, kind = key.partition(":")
    return bool(person) and sep == ":" and kind == _DM


# --- contexts -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Access:
    """What one context may do in a workspace.

    `area` is the workspace-relative writable area of a group ("" for private contexts, and
    for a shared context that was given none: it then writes nothing at all).

    For private contexts only, what decides the group-readable files (`is_group_readable`):
    `attended` says the owner is present (their own DM turn, or their hand in the panel or
    the command line); the default is unattended, so a context nobody thought about may not
    write there. `outside` names the text from outside the owner's own messages and files
    in the context window ("a web_fetch result"), "" when there is none.
    """

    private: bool
    area: str = ""
    attended: bool = False
    outside: str = ""


PRIVATE = Access(True)

_SAFE = re.compile(r"[^A-Za-z0-9_.-]+")


def group_area(channel: str, chat_id: str) -> str:
    """`groups/<channel>-<chat>`: one path component, distinct for distinct chats."""
    raw = f"{channel}-{chat_id}"
    safe = _SAFE.sub("_", raw).strip("._") or "chat"
    if safe != raw:  # sanitizing may merge two ids: keep them apart with a digest
        safe = f"{safe[:60]}-{hashlib.sha256(raw.encode('utf-8')).hexdigest()[:8]}"
    return f"{GROUPS_DIR}/{safe[:100]}"


def group_access(channel: str, chat_id: str) -> Access:
    return Access(False, group_area(channel, chat_id))


def _fold(name: str) -> str:
    """How a case-insensitive, normalizing filesystem (macOS, Windows) compares names."""
    return unicodedata.normalize("NFC", name).casefold().rstrip(". ")


_PRIVATE_FILES_FOLDED = frozenset(_fold(n) for n in PRIVATE_FILES)
_PERSONA_FOLDED = frozenset(_fold(n) for n in PERSONA_FILES)
_INSTRUCTIONS_FOLDED = _fold(INSTRUCTIONS_FILE)
_GROUPS_FOLDED = _fold(GROUPS_DIR)
_INBOX_FOLDED = _fold(INBOX_DIR)
_PRIVATE_DIRS_FOLDED = frozenset(_fold(n) for n in (*PRIVATE_DIRS, SESSIONS_DIR))
_READ_ONLY_FOLDED = frozenset({_fold(SESSIONS_DIR)})


def _parts(rel: PurePath | str | Sequence[str]) -> tuple[str, ...]:
    joined = "/".join(rel) if isinstance(rel, tuple | list) else str(rel)
    normalized = os.path.normpath(joined or ".").replace("\\", "/")
    return tuple(p for p in normalized.split("/") if p not in ("", "."))


def is_private_relpath(rel: PurePath | str | Sequence[str]) -> bool:
    """Private memory or transcripts: USER.md, MEMORY.md, memory/..., sessions/...

    Only the top-level files are private (`notes/MEMORY.md` is an ordinary note); names are
    compared case-insensitively so an alias on a case-insensitive filesystem is private too.
    """
    parts = _parts(rel)
    if not parts:
        return False
    first = _fold(parts[0])
    return first in _PRIVATE_DIRS_FOLDED or (len(parts) == 1 and first in _PRIVATE_FILES_FOLDED)


def is_group_readable(rel: PurePath | str | Sequence[str]) -> bool:
    """Loaded or read by some group context: anything under `groups/` (every group's area,
    and what would become one) and the persona files. Compared case-insensitively (a deny
    decision), so `identity.md` on a case-insensitive filesystem counts too."""
    parts = _parts(rel)
    if not parts:
        return False
    first = _fold(parts[0])
    return first == _GROUPS_FOLDED or (len(parts) == 1 and first in _PERSONA_FOLDED)


def outside_source(rel: PurePath | str | Sequence[str]) -> str:
    """Who wrote a workspace file if not the owner: "a file a group wrote" inside a group's
    area, "a received file" inside an inbox day folder (files people sent, their extracted
    text), "" for the owner's own files. What a private context reads there is outside
    text, as a web page is. The folders themselves (`groups/<chat>/`, `inbox/<day>/`) are
    the gateway's names, not outside text."""
    parts = tuple(_fold(p) for p in _parts(rel))
    if len(parts) >= 3 and parts[0] == _GROUPS_FOLDED:
        return "a file a group wrote"
    if len(parts) >= 3 and parts[0] == _INBOX_FOLDED:
        return "a received file"
    return ""


def shared_write_refusal(access: Access, rel: PurePath | str | Sequence[str]) -> str | None:
    """Why a private context may not write the group-readable `rel` now, or None if it may
    (or `rel` is not group-readable, or the context is a group's: `write_refusal` decides)."""
    parts = _parts(rel)
    if not access.private or not is_group_readable(parts):
        return None
    what = (
        "it is in a group's area, which that group reads"
        if _fold(parts[0]) == _GROUPS_FOLDED
        else "it is a persona file, which every group chat loads"
    )
    if not access.attended:
        return (
            f"{what}, and no one is present in this context (a heartbeat, reminder, "
            "memory flush or tidying), so it may not change what a group reads. The owner "
            "can edit the file by hand or in the panel, or say it in the group"
        )
    if access.outside:
        return (
            f"{what}, and this conversation holds text from outside ({access.outside}) "
            "that could be instructions to copy private memory there, so it may not write "
            "there now. The owner can edit the file by hand or in the panel, say it in the "
            "group itself, or ask again in a fresh session (/new) before reading anything "
            "from outside"
        )
    return None


def _instructions_refusal(access: Access, parts: tuple[str, ...]) -> str | None:
    """INSTRUCTIONS.md is followed in every private context, heartbeats included: like a
    group-readable file, only the owner's own turn with nothing from outside in it changes it
    (so a web page read in the DM, or an email a heartbeat reads, cannot plant a rule)."""
    if len(parts) != 1 or _fold(parts[0]) != _INSTRUCTIONS_FOLDED:
        return None
    if not access.attended:
        return (
            f"{INSTRUCTIONS_FILE} holds the owner's standing instructions and no one is "
            "present in this context, so it may not change them. The owner can say the "
            "rule in their DM or edit the file by hand"
        )
    if access.outside:
        return (
            f"{INSTRUCTIONS_FILE} holds the owner's standing instructions and this "
            f"conversation holds text from outside ({access.outside}), so it may not "
            "change them now. The owner can say the rule in their DM in a fresh session "
            "(/new) or edit the file by hand"
        )
    return None


def _inside(parts: tuple[str, ...], area: str) -> bool:
    """Strictly below `area`, compared exactly (an allow decision)."""
    base = tuple(area.split("/"))
    return bool(area) and len(parts) > len(base) and parts[: len(base)] == base


def leads_to_area(access: Access, rel: PurePath | str | Sequence[str]) -> bool:
    """The workspace root or a folder on the way down to a group's own area (`groups/`).

    A group may list these, so it can find its area, but their other entries stay invisible
    (each entry is judged on its own); they are never readable as files.
    """
    parts = _parts(rel)
    base = tuple(access.area.split("/")) if access.area else ()
    return not access.private and len(parts) < len(base) and base[: len(parts)] == parts


def read_refusal(access: Access, rel: PurePath | str | Sequence[str]) -> str | None:
    """Why `access` may not read `rel` (workspace-relative), or None if it may."""
    parts = _parts(rel)
    if access.private:
        return None
    if is_private_relpath(parts):
        return "private memory and transcripts are only available in the owner's DMs"
    if len(parts) == 1 and parts[0] in PERSONA_FILES:
        return None
    area = tuple(access.area.split("/")) if access.area else None
    if area is not None and (parts == area or _inside(parts, access.area)):
        return None
    if leads_to_area(access, parts):
        return None
    return _outside_area(access)


def write_refusal(access: Access, rel: PurePath | str | Sequence[str]) -> str | None:
    """Why `access` may not create, change or delete `rel`, or None if it may."""
    parts = _parts(rel)
    if parts and _fold(parts[0]) in _READ_ONLY_FOLDED:
        return "sessions/ holds transcripts and is read-only"
    if access.private:
        return shared_write_refusal(access, parts) or _instructions_refusal(access, parts)
    if is_private_relpath(parts):
        return "private memory and transcripts are only available in the owner's DMs"
    if _inside(parts, access.area):
        return None
    return _outside_area(access)


def inbox_dir(access: Access, day: date) -> str | None:
    """Where a context keeps the files people send it on `day`, workspace-relative: the
    owner's `inbox/<day>` in a private context, the group's own `<area>/inbox/<day>` in a
    group (never a place a more private context loads), None for a shared context that may
    write nothing at all (its files are read and then dropped)."""
    if access.private:
        return f"{INBOX_DIR}/{day.isoformat()}"
    if access.area:
        return f"{access.area}/{INBOX_DIR}/{day.isoformat()}"
    return None


def _outside_area(access: Access) -> str:
    if not access.area:
        return "this chat can only read the persona files (AGENTS.md, SOUL.md, IDENTITY.md)"
    return (
        f"in a group chat only {access.area}/ is writable and only it and the persona files "
        "(AGENTS.md, SOUL.md, IDENTITY.md) are readable; the rest of the workspace belongs to "
        "its owner"
    )


# --- what each context loads into its prompt -------------------------------------------------


def prompt_files(access: Access, today: date) -> list[str]:
    """The files a context's system prompt is built from, in order.

    Private: every bootstrap file, then today's and yesterday's daily notes. Group: the persona
    files and the group's own notes; never TOOLS.md, HEARTBEAT.md or anything private.
    """
    if access.private:
        yesterday = today - timedelta(days=1)
        return [*BOOTSTRAP_FILES, daily_note(today), daily_note(yesterday)]
    names = list(PERSONA_FILES)
    if access.area:
        names.append(f"{access.area}/{GROUP_NOTES_FILE}")
    return names


def heartbeat_files(today: date) -> list[str]:
    """A heartbeat's light prompt: the persona, the owner's standing instructions, the
    checklist, today's note (in this order)."""
    return [*PERSONA_FILES, INSTRUCTIONS_FILE, HEARTBEAT_FILE, daily_note(today)]
