"""Every panel page and action through the aiohttp test client, against a real Gateway."""

from __future__ import annotations

import asyncio
import json
import re
from datetime import UTC, datetime, timedelta

from channels.base import InboundMessage
from gateway.agent.sessions import transcript_path
from gateway.cli.main import main
from gateway.panel.server import state_dir
from gateway.pipeline.pairing import Pairing


def _ws(rig, person="owner"):
    return rig.gateway.settings.workspaces_dir / person


async def _ask_pairing(rig, sender="777", name="Rosa") -> str:
    reply = await Pairing(rig.gateway.state).request(
        InboundMessage("telegram", sender, sender, "hi", sender_name=name)
    )
    return reply.split("code is ")[1].split(" ")[0]


async def test_overview_shows_channels_people_pairing_and_what_needs_attention(rig):
    import logging

    await rig.login()
    code = await _ask_pairing(rig)
    logging.getLogger("gateway.pipeline.delivery").warning(
        "delivery to telegram chat 5 failed (timed out); retrying"
    )
    logging.getLogger("gateway.pipeline.delivery").error(
        "delivery to telegram chat 5 given up after 8 attempts (Forbidden)"
    )
    page = await (await rig.client.get("/")).text()
    # The recording channel's row says ready, and says down once the channel reports so.
    row = re.compile(
        r'<td[^>]*>fakechat</td><td[^>]*><span class="\w+">(\w+)</span></td>'
        r"<td[^>]*>([^<]*)</td>"
    )
    assert row.findall(page) == [("ready", "started")]
    rig.gateway.channels["fakechat"].set_ready(False, "platform unreachable")
    page = await (await rig.client.get("/")).text()
    assert row.findall(page) == [("down", "platform unreachable")]
    assert "state database" in page
    assert "/p/owner/files" in page and "/p/telegram-42/files" in page
    assert code in page and "Rosa" in page  # the request, with Approve and Deny
    attention = page.split('id="attention"')[1].split("</section>")[0]
    # Routine pairing requests and retry notices are not errors; a give-up is.
    assert "given up after 8 attempts" in attention
    assert "pairing request on telegram" not in attention and "retrying" not in attention
    assert "2 routine notices left out" in attention


async def test_approve_and_deny_go_through_pairing(rig):
    csrf = await rig.login()
    code = await _ask_pairing(rig, "777")
    response = await rig.post("/pairing/approve", {"channel": "telegram", "code": code}, csrf)
    assert response.status == 303
    assert await rig.gateway.state.access.is_approved("telegram", "777")
    assert "approved telegram user 777 (Rosa)" in await (await rig.client.get("/")).text()
    other = await _ask_pairing(rig, "888", "Eve")
    await rig.post("/pairing/deny", {"channel": "telegram", "code": other}, csrf)
    assert not await rig.gateway.state.access.is_approved("telegram", "888")
    await rig.post("/pairing/approve", {"channel": "telegram", "code": "WRONGCDE"}, csrf)
    assert "no pending pairing request WRONGCDE" in await (await rig.client.get("/")).text()


async def test_revoke_and_link(rig):
    csrf = await rig.login()
    state = rig.gateway.state
    await state.access.approve("telegram", "999", via="test")
    await rig.post("/approved/revoke", {"channel": "telegram", "sender": "999"}, csrf)
    assert not await state.access.is_approved("telegram", "999")
    await rig.post("/links", {"accounts": "owner telegram:5 discord:6"}, csrf)
    assert await state.links.person_for("discord", "6") == "owner"
    assert await state.access.is_approved("telegram", "5")
    page = await (await rig.client.get("/")).text()
    assert "linked telegram:5 and discord:6 as person owner" in page
    await rig.post("/links", {"accounts": "telegram:7"}, csrf)
    assert "give two accounts" in await (await rig.client.get("/")).text()


async def test_files_list_view_renders_markdown_without_raw_html(rig):
    await rig.login()
    (_ws(rig) / "notes").mkdir()
    (_ws(rig) / "notes" / "x.md").write_text(
        "# Title\n\n<script>alert(1)</script>\n\n[bad](javascript:alert(1))\n", encoding="utf-8"
    )
    listing = await (await rig.client.get("/p/owner/files")).text()
    assert "MEMORY.md" in listing and "notes/x.md" in listing
    assert "sessions/" not in listing and ".git" not in listing
    page = await (await rig.client.get("/p/owner/file?path=notes/x.md")).text()
    assert "<h1>Title</h1>" in page
    assert "<script>alert" not in page and "&lt;script&gt;" in page
    assert 'href="javascript:' not in page
    assert (await rig.client.get("/p/owner/file?path=nope.md")).status == 404
    assert (await rig.client.get("/p/nobody/files")).status == 404


async def test_save_commits_and_history_diff_undo(rig):
    csrf = await rig.login()
    page = await (await rig.client.get("/p/owner/edit?path=MEMORY.md")).text()
    base = re.search(r'name="base" value="([0-9a-f]*)"', page).group(1)
    before = (_ws(rig) / "MEMORY.md").read_text(encoding="utf-8")
    saved = await rig.post(
        "/p/owner/edit", {"path": "MEMORY.md", "base": base, "text": before + "- tea\r\n"}, csrf
    )
    assert saved.status == 303
    assert (_ws(rig) / "MEMORY.md").read_text(encoding="utf-8") == before + "- tea\n"
    history = await (await rig.client.get("/p/owner/history")).text()
    rev = re.search(r"<code>([0-9a-f]{7,})</code>", history).group(1)
    assert "panel edit: MEMORY.md" in history
    diff = await rig.client.get(f"/p/owner/diff/{rev}", headers={"HX-Request": "true"})
    text = await diff.text()
    assert "+ - tea</span>" in text and "<html" not in text  # a fragment for htmx
    assert "<html" in await (await rig.client.get(f"/p/owner/diff/{rev}")).text()
    await rig.post("/p/owner/undo", {"rev": rev}, csrf)
    assert (_ws(rig) / "MEMORY.md").read_text(encoding="utf-8") == before
    history = await (await rig.client.get("/p/owner/history")).text()
    assert "undo: MEMORY.md" in history and "undid " in history


async def test_hand_edit_meanwhile_is_a_conflict_not_an_overwrite(rig):
    csrf = await rig.login()
    page = await (await rig.client.get("/p/owner/edit?path=MEMORY.md")).text()
    base = re.search(r'name="base" value="([0-9a-f]*)"', page).group(1)
    (_ws(rig) / "MEMORY.md").write_text("- written by the assistant\n", encoding="utf-8")
    response = await rig.post(
        "/p/owner/edit", {"path": "MEMORY.md", "base": base, "text": "- mine\n"}, csrf
    )
    assert response.status == 409
    page = await response.text()
    assert "written by the assistant" in page and "- mine" in page
    assert (_ws(rig) / "MEMORY.md").read_text(encoding="utf-8") == "- written by the assistant\n"
    # The conflict page's editor is based on the current file: saving from it works.
    new_base = re.search(r'name="base" value="([0-9a-f]*)"', page).group(1)
    ok = await rig.post(
        "/p/owner/edit", {"path": "MEMORY.md", "base": new_base, "text": "- merged\n"}, csrf
    )
    assert ok.status == 303
    history = await (await rig.client.get("/p/owner/history")).text()
    assert "hand edit: MEMORY.md" in history  # the assistant's/hand change kept its own commit
    # A new file needs the empty base; an empty base on an existing file is a conflict.
    new = await rig.post("/p/owner/edit", {"path": "notes/new.md", "base": "", "text": "n"}, csrf)
    assert new.status == 303 and (_ws(rig) / "notes" / "new.md").read_text() == "n"
    assert (
        await rig.post("/p/owner/edit", {"path": "notes/new.md", "base": "", "text": "again"}, csrf)
    ).status == 409


async def test_editor_is_confined_like_the_file_tools(rig, tmp_path):
    csrf = await rig.login()
    outside = tmp_path / "outside.md"
    outside.write_text("secret", encoding="utf-8")
    (_ws(rig) / "link.md").symlink_to(outside)
    (_ws(rig) / "linkdir").symlink_to(tmp_path)
    refused = [
        "../telegram-42/MEMORY.md",
        "/etc/passwd",
        "~/x.md",
        ".git/config",
        "notes/../../x.md",
        "link.md",
        "linkdir/outside.md",
        "a\\b.md",
        ".gitignore",
        "sessions/evil.jsonl",
    ]
    for path in refused:
        view = await rig.client.get("/p/owner/edit", params={"path": path})
        save = await rig.post("/p/owner/edit", {"path": path, "base": "", "text": "pwned"}, csrf)
        assert save.status == 400, (path, await save.text())
        if path != "sessions/evil.jsonl":  # sessions/ may be read, never written
            assert view.status == 400, path
    assert outside.read_text(encoding="utf-8") == "secret"
    assert not (_ws(rig) / "sessions" / "evil.jsonl").exists()
    assert "pwned" not in (_ws(rig, "telegram-42") / "MEMORY.md").read_text(encoding="utf-8")
    # The owner's own private memory is editable (the panel is a private context).
    ok = await rig.post(
        "/p/owner/edit", {"path": "memory/2026-01-01.md", "base": "", "text": "- note"}, csrf
    )
    assert ok.status == 303


async def test_sessions_fold_tool_calls_and_mark_compactions(rig):
    await rig.login()
    path = transcript_path(_ws(rig), "owner:dm")
    path.parent.mkdir(exist_ok=True)
    day = (datetime.now(UTC) - timedelta(days=1)).date().isoformat()
    lines = [
        {"type": "session", "key": "owner:dm"},
        {"ts": f"{day}T10:00:00+00:00", "type": "user", "text": "what is on today?"},
        {
            "ts": f"{day}T10:00:01+00:00",
            "type": "assistant",
            "text": "",
            "tool_calls": [{"id": "c1", "name": "read_file", "arguments": {"path": "MEMORY.md"}}],
        },
        {
            "ts": f"{day}T10:00:02+00:00",
            "type": "tool_result",
            "tool_call_id": "c1",
            "name": "read_file",
            "text": "- dentist thursday",
            "is_error": False,
        },
        {
            "ts": f"{day}T10:00:03+00:00",
            "type": "assistant",
            "text": "The dentist.",
            "usage": {"input_tokens": 100, "output_tokens": 7},
        },
        {"ts": f"{day}T10:00:04+00:00", "type": "delivery", "ok": True},
        {
            "ts": f"{day}T11:00:00+00:00",
            "type": "compaction",
            "summary": "Asked about today.",
            "first_kept_entry": 4,
            "reason": "manual",
        },
    ]
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    listing = await (await rig.client.get("/p/owner/sessions")).text()
    assert "owner:dm" in listing and path.name in listing
    page = await (await rig.client.get(f"/p/owner/session/{path.name}")).text()
    assert "<details><summary>tool call: read_file" in page
    assert "- dentist thursday" in page  # the result, folded under its call
    assert 'class="msg compaction"' in page and "Asked about today." in page
    assert (await rig.client.get("/p/owner/session/..%2Fx.jsonl")).status == 404
    assert (await rig.client.get("/p/owner/session/nope.jsonl")).status == 404
    metrics = await (await rig.client.get("/p/owner/metrics")).text()
    assert metrics.count("<svg") == 3 and "Turns per day" in metrics
    assert f"{day}: 1</title>" in metrics  # one turn that day
    assert f"{day}: 107</title>" in metrics  # its tokens, in + out
    assert f"{day}: 4 s</title>" in metrics  # message to delivered answer


async def test_compact_and_reset_go_through_the_session_lane(rig):
    csrf = await rig.login()
    gateway = rig.gateway
    from tests.conftest import AllowAll  # noqa: F401 (the rig's gateway lets anyone talk)

    channel = next(iter(gateway.channels.values()))
    await gateway.handle(InboundMessage(channel.name, "c1", "u1", "hello", message_id="1"))
    await gateway.lanes.drain()
    person = f"{channel.name}-u1"
    name = transcript_path(_ws(rig, person), f"{person}:dm").name
    compact = await rig.post(f"/p/{person}/session/{name}/compact", {}, csrf)
    assert compact.status == 303
    page = await (await rig.client.get(compact.headers["Location"])).text()
    assert "Nothing to compact yet" in page
    reset = await rig.post(f"/p/{person}/session/{name}/reset", {}, csrf)
    assert reset.status == 303
    assert not (_ws(rig, person) / "sessions" / name).exists()
    archived = [p.name for p in (_ws(rig, person) / "sessions").iterdir()]
    assert any(n.startswith(name[:-6] + ".") for n in archived)
    assert (
        "Started a fresh session" in await (await rig.client.get(reset.headers["Location"])).text()
    )


async def test_search_page_and_fragment(rig):
    await rig.login()
    (_ws(rig) / "memory" / "2026-11-02.md").write_text(
        "- Adopted a grey cat called Miso.\n", encoding="utf-8"
    )
    page = await (await rig.client.get("/p/owner/search", params={"q": "Miso cat"})).text()
    assert "memory/2026-11-02.md:1-1" in page and "Adopted a grey cat" in page
    assert re.search(r'class="score">\d\.\d{3}<', page)
    fragment = await (
        await rig.client.get(
            "/p/owner/search", params={"q": "Miso"}, headers={"HX-Request": "true"}
        )
    ).text()
    assert fragment.startswith('<div id="results">') and "<html" not in fragment
    nothing = await (await rig.client.get("/p/owner/search", params={"q": "zebra"})).text()
    assert "nothing matched" in nothing


async def test_heartbeat_page_and_run_now(rig, anthropic_server):
    csrf = await rig.login()
    (_ws(rig) / "HEARTBEAT.md").write_text("# Checks\n- Look at the calendar.\n", encoding="utf-8")
    page = await (await rig.client.get("/p/owner/heartbeat")).text()
    assert "Look at the calendar" in page and "Tokens today" in page and "150,000" in page
    response = await rig.post("/p/owner/heartbeat/run", {}, csrf)
    assert response.status == 303
    page = await (await rig.client.get("/p/owner/heartbeat")).text()
    assert "heartbeat: skipped" in page  # no DM route yet: said why, nothing sent
    assert "no DM" in page or "route" in page
    assert anthropic_server.requests == []


def test_cli_panel_url_prints_a_link_the_server_redeems(tmp_path, monkeypatch, capsys):
    from gateway.panel.auth import redeem_link_code

    monkeypatch.setenv("CLAWGATE_WORKSPACES_DIR", str(tmp_path / "ws"))
    monkeypatch.setenv("CLAWGATE_PANEL__PORT", "8999")
    assert main(["panel", "url"]) == 0
    said = capsys.readouterr()
    link = said.out.strip()
    assert link.startswith("http://127.0.0.1:8999/login/link?code=")
    # Nothing serves the panel here: it says so, and the link waits for a start.
    assert "no panel answers at http://127.0.0.1:8999" in said.err and "clawgate run" in said.err
    code = link.split("code=")[1]
    directory = state_dir(tmp_path / "ws")
    assert (directory / "panel-token").exists()
    assert redeem_link_code(directory, code) and not redeem_link_code(directory, code)
    monkeypatch.setenv("CLAWGATE_PANEL__ENABLED", "false")
    assert main(["panel", "url"]) == 2  # a setting to change: the person's (docs/cli.md)


async def test_panel_url_knows_whether_a_panel_answers(make_gateway, anthropic_server):
    from gateway.assembly.builder import start_panel
    from gateway.cli.panel import panel_answers

    gateway, _ = await make_gateway(anthropic_server, panel={"port": 0})
    panel = await start_panel(gateway, gateway.settings)
    try:
        port = int(panel.url.rsplit(":", 1)[1].split("/")[0])
        settings = gateway.settings.panel.model_copy(update={"port": port})
        assert await asyncio.to_thread(panel_answers, settings)
    finally:
        await panel.stop()
    assert not await asyncio.to_thread(panel_answers, settings)


async def test_group_sessions_reset_with_their_area_and_odd_keys_are_refused(rig):
    csrf = await rig.login()
    sessions = _ws(rig) / "sessions"
    sessions.mkdir(exist_ok=True)
    group = transcript_path(_ws(rig), "telegram:group:-100")
    group.write_text(json.dumps({"type": "session", "key": "telegram:group:-100"}) + "\n")
    reset = await rig.post(f"/p/owner/session/{group.name}/reset", {}, csrf)
    assert reset.status == 303 and not group.exists()
    odd = transcript_path(_ws(rig), "someone:else")
    odd.write_text(json.dumps({"type": "session", "key": "someone:else"}) + "\n")
    refused = await rig.post(f"/p/owner/session/{odd.name}/reset", {}, csrf)
    assert refused.status == 303 and odd.exists()
    page = await (await rig.client.get(refused.headers["Location"])).text()
    assert "someone:else is not a session the panel can change" in page
