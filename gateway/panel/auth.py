"""Who is logged in to the panel, and may they see this person.

- The **token** is created once (32 random bytes, URL-safe) in the gateway's state directory
  as `panel-token`, mode 0600. Whoever can read that file can log in; nobody else can. It is
  never printed (a line on stderr ends up in journald or container logs, readable by others
  and kept for long): people log in with one-time links. `rotate_token` (`clawgate panel
  rotate`, another process) replaces the file; the running panel notices the new file on the
  next request and drops every session, and the unused links are deleted with it.
- A **one-time login link** is a random code stored as a 0600 file under `panel-links/`, with
  its expiry inside. `clawgate panel url` (another process) writes one; the server redeems it
  by unlinking the file, which succeeds exactly once even with two racing requests.
- A **session** is a random id in an HttpOnly, SameSite=Strict cookie; its CSRF token is
  random per session and must come back with every form. Sessions live in memory: a restart
  logs everyone out, which is the safe direction.
- A **principal** is what a login may see. One owner login exists today and sees every person
  (the operator's view); `may_view` is the single check every person page goes through, so a
  per-person login later is a new principal, not a new rule.
"""

from __future__ import annotations

import contextlib
import hmac
import os
import re
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from memory.atomic import make_private_dirs

TOKEN_FILE = "panel-token"
LINKS_DIR = "panel-links"
_CODE = re.compile(r"^[A-Za-z0-9_-]{20,100}$")


@dataclass(frozen=True, slots=True)
class Principal:
    """A login. `persons` None means every person (the owner, who runs the gateway)."""

    name: str
    persons: frozenset[str] | None = None

    def may_view(self, person_id: str) -> bool:
        return self.persons is None or person_id in self.persons

    def visible(self, people: list[str]) -> list[str]:
        return [p for p in people if self.may_view(p)]


OWNER = Principal("owner")


@dataclass(slots=True)
class PanelSession:
    sid: str
    principal: Principal
    csrf: str
    expires_at: float
    flash: list[tuple[str, str]] = field(default_factory=list)  # (kind, text) for next page

    def say(self, kind: str, text: str) -> None:
        self.flash.append((kind, text))

    def take_flash(self) -> list[tuple[str, str]]:
        shown, self.flash = self.flash, []
        return shown


def _write_private(path: Path, text: str) -> bool:
    """Create `path` with mode 0600 holding `text`; False if it already exists."""
    make_private_dirs(path.parent)  # 0700 for every directory created, not only the leaf
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    return True


def ensure_token(state_dir: Path) -> tuple[str, bool]:
    """The panel token, created on first use; (token, created now)."""
    path = state_dir / TOKEN_FILE
    created = _write_private(path, secrets.token_urlsafe(32) + "\n")
    os.chmod(path, 0o600)  # a copy restored with looser bits is tightened again
    return path.read_text(encoding="utf-8").strip(), created


def rotate_token(state_dir: Path) -> None:
    """Replace the token: every login and unused one-time link stops working."""
    make_private_dirs(state_dir)
    path = state_dir / TOKEN_FILE
    temp = state_dir / f".{TOKEN_FILE}.{secrets.token_hex(4)}"
    try:
        if not _write_private(temp, secrets.token_urlsafe(32) + "\n"):
            raise FileExistsError(temp)
        os.replace(temp, path)  # a new inode: the running panel sees the change
    finally:
        with contextlib.suppress(FileNotFoundError):
            temp.unlink()
    with contextlib.suppress(OSError):
        for entry in (state_dir / LINKS_DIR).iterdir():
            with contextlib.suppress(OSError):
                entry.unlink()


def issue_link_code(state_dir: Path, ttl_seconds: float, *, now: float | None = None) -> str:
    """A one-time login code valid `ttl_seconds`; works across processes (a file per code)."""
    code = secrets.token_urlsafe(24)
    expires = (time.time() if now is None else now) + ttl_seconds
    _write_private(state_dir / LINKS_DIR / code, f"{expires}\n")
    return code


def redeem_link_code(state_dir: Path, code: str, *, now: float | None = None) -> bool:
    """True once for a valid, unexpired code; the code is gone afterwards either way."""
    if not _CODE.match(code):
        return False
    path = state_dir / LINKS_DIR / code
    try:
        expires = float(path.read_text(encoding="utf-8").strip() or 0)
        path.unlink()  # the unlink, not the read, decides who redeemed it
    except (OSError, ValueError):
        return False
    _sweep(state_dir, time.time() if now is None else now)
    return (time.time() if now is None else now) < expires


def _sweep(state_dir: Path, now: float) -> None:
    """Remove expired codes nobody used."""
    directory = state_dir / LINKS_DIR
    with contextlib.suppress(OSError):
        for entry in directory.iterdir():
            with contextlib.suppress(OSError, ValueError):
                if float(entry.read_text(encoding="utf-8").strip() or 0) < now:
                    entry.unlink()


@dataclass
class PanelAuth:
    """Token check, one-time links and sessions for one running panel."""

    state_dir: Path
    session_seconds: float = 12 * 3600
    clock: Callable[[], float] = time.time
    _sessions: dict[str, PanelSession] = field(default_factory=dict)
    _token: str = ""
    _token_file: tuple[int, int, int] | None = None  # (inode, mtime ns, size) it was read from

    def token(self) -> str:
        """The current token; if the file was replaced (rotated) since it was read, every
        session ends here."""
        path = self.state_dir / TOKEN_FILE
        try:
            st = os.stat(path)
            seen: tuple[int, int, int] | None = (st.st_ino, st.st_mtime_ns, st.st_size)
        except FileNotFoundError:
            seen = None
        if self._token and seen == self._token_file:
            return self._token
        token, _ = ensure_token(self.state_dir)
        if self._token and token != self._token:
            self._sessions.clear()  # rotated: old cookies stop working
        st = os.stat(path)
        self._token, self._token_file = token, (st.st_ino, st.st_mtime_ns, st.st_size)
        return self._token

    def check_token(self, given: str) -> bool:
        return hmac.compare_digest(given.strip().encode(), self.token().encode())

    def redeem(self, code: str) -> bool:
        return redeem_link_code(self.state_dir, code, now=self.clock())

    def login(self, principal: Principal = OWNER) -> PanelSession:
        self.token()  # notice a rotation first, so it cannot end this new session later
        session = PanelSession(
            secrets.token_urlsafe(32),
            principal,
            secrets.token_urlsafe(32),
            self.clock() + self.session_seconds,
        )
        self._sessions[session.sid] = session
        return session

    def session(self, sid: str | None) -> PanelSession | None:
        if not sid:
            return None
        self.token()  # a rotated token ends every session
        session = self._sessions.get(sid)
        if session is None:
            return None
        if session.expires_at <= self.clock():
            self._sessions.pop(sid, None)
            return None
        return session

    def logout(self, sid: str) -> None:
        self._sessions.pop(sid, None)

    @staticmethod
    def csrf_ok(session: PanelSession, given: str | None) -> bool:
        return bool(given) and hmac.compare_digest(str(given).encode(), session.csrf.encode())
