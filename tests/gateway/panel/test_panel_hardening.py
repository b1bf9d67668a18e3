"""The panel's long-lived token, rotation, the Host allowlist and session files,
through the aiohttp test client against a real Gateway."""

from __future__ import annotations

import json

from aiohttp import ClientSession

from gateway.agent.sessions import transcript_path
from gateway.cli.main import main
from gateway.config.panel import PanelSettings
from gateway.panel.auth import issue_link_code
from gateway.panel.server import state_dir
from tests.gateway.panel.conftest import CSRF


def _ws(rig, person="owner"):
    return rig.gateway.settings.workspaces_dir / person


async def test_clawgate_run_serves_the_panel_and_never_prints_its_token(
    make_gateway, anthropic_server, capsys
):
    from gateway.assembly.builder import start_panel

    gateway, _ = await make_gateway(anthropic_server, panel={"port": 0})
    panel = await start_panel(gateway, gateway.settings)
    try:
        said = capsys.readouterr()
        token = (state_dir(gateway.settings.workspaces_dir) / "panel-token").read_text().strip()
        assert token not in said.err + said.out
        assert "clawgate panel url" in said.err and "code=" not in said.err
        async with ClientSession() as http, http.get(f"{panel.url}/login") as response:
            assert response.status == 200  # the panel does run
    finally:
        await panel.stop()
    again = await start_panel(gateway, gateway.settings)
    await again.stop()
    assert token not in capsys.readouterr().err
    off = gateway.settings.model_copy(
        update={"panel": gateway.settings.panel.model_copy(update={"enabled": False})}
    )
    assert await start_panel(gateway, off) is None


async def test_rotate_ends_every_login_link_and_the_old_token(rig, monkeypatch, capsys):
    csrf = await rig.login()
    assert (await rig.client.get("/", allow_redirects=False)).status == 200
    directory = rig.server.panel.auth.state_dir
    old_token = rig.token
    unused = issue_link_code(directory, 600)
    monkeypatch.setenv("CLAWGATE_WORKSPACES_DIR", str(rig.gateway.settings.workspaces_dir))

    assert main(["panel", "rotate"]) == 0  # another process, while the panel runs

    out = capsys.readouterr().out
    new_token = (directory / "panel-token").read_text().strip()
    assert new_token != old_token and new_token not in out and "panel url" in out
    assert (await rig.client.get("/", allow_redirects=False)).status == 303  # cookie is dead
    assert (await rig.post("/logout", {}, csrf)).status == 401
    link = await rig.client.get(f"/login/link?code={unused}", allow_redirects=False)
    assert link.status == 403  # the link issued before the rotation is gone
    page = await (await rig.client.get("/login")).text()
    stale = await rig.client.post(
        "/login",
        data={"csrf": CSRF.search(page).group(1), "token": old_token},
        allow_redirects=False,
    )
    assert stale.status == 401
    fresh = issue_link_code(directory, 600)
    assert (await rig.client.get(f"/login/link?code={fresh}", allow_redirects=False)).status == 303
    assert (await rig.client.get("/", allow_redirects=False)).status == 200


async def test_a_foreign_host_is_refused_even_with_a_valid_cookie(rig):
    await rig.login()
    for host in ("localhost:8788", "127.0.0.1", "[::1]:8788", "LOCALHOST"):
        ok = await rig.client.get("/", headers={"Host": host}, allow_redirects=False)
        assert ok.status == 200, host
    for host in ("evil.example:8788", "attacker.test", "127.0.0.1.evil.example", ""):
        refused = await rig.client.get("/", headers={"Host": host}, allow_redirects=False)
        assert refused.status == 421, host
        assert "public_url" in await refused.text()
    login = await rig.client.get("/login", headers={"Host": "evil.example"})
    assert login.status == 421  # the login page too: nothing answers to a foreign name
    proxied = await rig.client.get(
        "/", headers={"X-Forwarded-Host": "evil.example"}, allow_redirects=False
    )
    assert proxied.status == 421
    # The configured public name is the one name besides loopback.
    rig.server.panel.settings = PanelSettings(port=0, public_url="https://panel.example.org")
    named = await rig.client.get("/", headers={"Host": "panel.example.org"}, allow_redirects=False)
    assert named.status == 200
    assert (await rig.client.get("/", headers={"Host": "evil.example"})).status == 421


async def test_the_session_view_refuses_a_link_out_of_the_workspace(rig, tmp_path):
    await rig.login()
    outside = tmp_path / "elsewhere.jsonl"
    outside.write_text(
        json.dumps(
            {"ts": "2026-01-01T10:00:00+00:00", "type": "user", "text": "SECRET-OUTSIDE-TEXT"}
        )
        + "\n",
        encoding="utf-8",
    )
    sessions = _ws(rig) / "sessions"
    sessions.mkdir(exist_ok=True)
    (sessions / "evil.jsonl").symlink_to(outside)
    (sessions / "memory.jsonl").symlink_to(_ws(rig) / "MEMORY.md")
    for name in ("evil.jsonl", "memory.jsonl"):
        view = await rig.client.get(f"/p/owner/session/{name}")
        assert view.status == 404, name
        assert "SECRET-OUTSIDE-TEXT" not in await view.text()
    # The heartbeat page reads its transcript through the same resolver.
    transcript_path(_ws(rig), "owner:heartbeat").symlink_to(outside)
    outside.write_text(
        json.dumps(
            {"ts": "2026-01-01T10:00:00+00:00", "type": "assistant", "text": "SECRET-OUTSIDE-TEXT"}
        )
        + "\n",
        encoding="utf-8",
    )
    heartbeat = await rig.client.get("/p/owner/heartbeat")
    assert heartbeat.status == 200 and "SECRET-OUTSIDE-TEXT" not in await heartbeat.text()
    metrics = await rig.client.get("/p/owner/metrics")  # daily figures skip links too
    assert metrics.status == 200
