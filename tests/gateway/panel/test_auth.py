"""Panel login, sessions, CSRF and the rule that nothing answers without a login."""

from __future__ import annotations

import os
import stat

import pytest

from gateway.config.settings import ConfigError
from gateway.panel.auth import (
    PanelAuth,
    Principal,
    ensure_token,
    issue_link_code,
    redeem_link_code,
)
from gateway.panel.server import COOKIE, state_dir
from tests.gateway.panel.conftest import CSRF

GETS = [
    "/",
    "/static/htmx.min.js",
    "/p/owner/files",
    "/p/owner/file?path=MEMORY.md",
    "/p/owner/edit?path=MEMORY.md",
    "/p/owner/history",
    "/p/owner/diff/HEAD",
    "/p/owner/sessions",
    "/p/owner/session/x.jsonl",
    "/p/owner/search?q=tea",
    "/p/owner/heartbeat",
    "/p/owner/metrics",
    "/p/owner/tasks",
]
POSTS = [
    "/logout",
    "/pairing/approve",
    "/pairing/deny",
    "/approved/revoke",
    "/links",
    "/p/owner/edit",
    "/p/owner/undo",
    "/p/owner/heartbeat/run",
    "/p/owner/session/x.jsonl/compact",
    "/p/owner/session/x.jsonl/reset",
    "/p/owner/tasks/cancel",
]


async def test_nothing_answers_without_a_login(rig):
    for path in GETS:
        response = await rig.client.get(path, allow_redirects=False)
        assert response.status == 303 and response.headers["Location"] == "/login", path
        htmx = await rig.client.get(path, headers={"HX-Request": "true"}, allow_redirects=False)
        assert htmx.status == 401, path
    for path in POSTS:
        response = await rig.client.post(path, data={"csrf": "x"}, allow_redirects=False)
        assert response.status == 401, path
    # A forged cookie is no login either.
    rig.client.session.cookie_jar.update_cookies({COOKIE: "forged"})
    assert (await rig.client.get("/", allow_redirects=False)).status == 303


async def test_token_login_sets_a_strict_httponly_cookie(rig):
    page = await (await rig.client.get("/login")).text()
    pre = CSRF.search(page).group(1)
    wrong = await rig.client.post(
        "/login", data={"csrf": pre, "token": "nope"}, allow_redirects=False
    )
    assert wrong.status == 401
    page = await wrong.text()
    pre = CSRF.search(page).group(1)  # a fresh login CSRF token comes with the retry form
    no_csrf = await rig.client.post("/login", data={"token": rig.token}, allow_redirects=False)
    assert no_csrf.status == 403
    response = await rig.client.post(
        "/login", data={"csrf": pre, "token": rig.token}, allow_redirects=False
    )
    assert response.status == 303
    cookie = next(
        v for k, v in response.headers.items() if k == "Set-Cookie" and v.startswith(COOKIE + "=")
    )
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/" in cookie
    assert (await rig.client.get("/")).status == 200


async def test_security_headers_on_every_answer(rig):
    for response in (
        await rig.client.get("/login"),
        await rig.client.get("/", allow_redirects=False),
    ):
        csp = response.headers["Content-Security-Policy"]
        assert "script-src 'self'" in csp and "frame-ancestors 'none'" in csp
        assert response.headers["X-Frame-Options"] == "DENY"
        assert response.headers["Cache-Control"] == "no-store"


async def test_every_form_needs_the_sessions_csrf_token(rig):
    csrf = await rig.login()
    for path in POSTS:
        missing = await rig.client.post(path, data={}, allow_redirects=False)
        assert missing.status == 403, path
        wrong = await rig.client.post(path, data={"csrf": csrf[:-2] + "xx"}, allow_redirects=False)
        assert wrong.status == 403, path
    # A cross-site form post fails even with the right token.
    cross = await rig.client.post(
        "/links",
        data={"csrf": csrf, "accounts": "a b"},
        headers={"Origin": "https://evil.example"},
        allow_redirects=False,
    )
    assert cross.status == 403
    # The header form (for scripts) works like the field.
    ok = await rig.client.post("/logout", headers={"X-CSRF-Token": csrf}, allow_redirects=False)
    assert ok.status == 303


async def test_every_page_has_a_csrf_field_in_each_form(rig):
    await rig.login()
    for path in GETS[:1] + GETS[2:8] + GETS[9:]:
        page = await (await rig.client.get(path)).text()
        posts = page.count('method="post"')
        assert page.count('name="csrf"') >= posts, path


async def test_logout_ends_the_session(rig):
    csrf = await rig.login()
    await rig.post("/logout", {}, csrf)
    assert (await rig.client.get("/", allow_redirects=False)).status == 303


async def test_one_time_link_works_once_and_expires(rig):
    directory = rig.server.panel.auth.state_dir
    token = rig.token
    code = issue_link_code(directory, 600)
    first = await rig.client.get(f"/login/link?code={code}", allow_redirects=False)
    assert first.status == 303
    assert (await rig.client.get("/", allow_redirects=False)).status == 200
    rig.client.session.cookie_jar.clear()
    again = await rig.client.get(f"/login/link?code={code}", allow_redirects=False)
    assert again.status == 403
    old = issue_link_code(directory, 60, now=0)  # expired long ago
    assert (await rig.client.get(f"/login/link?code={old}", allow_redirects=False)).status == 403
    for bad in ("", "../panel-token", "a" * 5):
        assert not redeem_link_code(directory, bad)
    assert (directory / "panel-token").read_text().strip() == token  # traversal touched nothing


def test_token_file_is_private_and_stable(tmp_path):
    directory = state_dir(tmp_path / "workspaces")
    token, created = ensure_token(directory)
    again, created_again = ensure_token(directory)
    assert created and not created_again and token == again and len(token) >= 40
    assert stat.S_IMODE(os.stat(directory / "panel-token").st_mode) == 0o600
    code = issue_link_code(directory, 60)
    assert stat.S_IMODE(os.stat(directory / "panel-links" / code).st_mode) == 0o600


def test_sessions_expire_on_the_injected_clock(tmp_path):
    now = [1000.0]
    auth = PanelAuth(tmp_path, session_seconds=60, clock=lambda: now[0])
    session = auth.login()
    assert auth.session(session.sid) is session
    now[0] += 61
    assert auth.session(session.sid) is None
    assert not auth.csrf_ok(auth.login(), "")


async def test_a_login_never_sees_people_it_may_not(rig):
    session = rig.server.panel.auth.login(Principal("ann", frozenset({"owner"})))
    rig.client.session.cookie_jar.update_cookies({COOKIE: session.sid})
    overview = await (await rig.client.get("/")).text()
    assert "/p/owner/files" in overview and "telegram-42" not in overview
    for path in (
        "/p/telegram-42/files",
        "/p/telegram-42/file?path=MEMORY.md",
        "/p/telegram-42/search?q=x",
        "/p/telegram-42/history",
    ):
        assert (await rig.client.get(path)).status == 404, path
    hidden = await rig.client.post(
        "/p/telegram-42/edit",
        data={"csrf": session.csrf, "path": "MEMORY.md", "text": "x", "base": ""},
    )
    assert hidden.status == 404
    assert (await rig.client.get("/p/owner/files")).status == 200


def test_non_loopback_bind_needs_allow_remote(make_settings):
    with pytest.raises(ConfigError, match=r"panel\.host.*allow_remote"):
        make_settings(panel={"host": "0.0.0.0"})
    assert make_settings(panel={"host": "0.0.0.0", "allow_remote": True}).panel.allow_remote
    assert make_settings(panel={"host": "::1"}).panel.host == "::1"
    assert make_settings(panel={"host": "0.0.0.0", "enabled": False}).panel.enabled is False
