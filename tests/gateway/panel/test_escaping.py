"""Escaped by construction: hostile text from people, files, transcripts, MCP
servers and the search box comes out escaped on every page, and no template can opt out.

The pages are Jinja2 templates with autoescaping on (gateway/panel/render.py). This test puts
one hostile string everywhere a person, a model, a file or a tool server can put text, then
reads every page and fragment: the raw string never appears, its escaped form does.
"""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path

from channels.base import InboundMessage
from gateway.agent.sessions import transcript_path
from gateway.panel import render
from gateway.pipeline.pairing import Pairing

EVIL = "<script>alert(1)</script>\"'><img src=x onerror=alert(2)>"
ESCAPED = "&lt;script&gt;alert(1)"
TEMPLATES = Path(render.__file__).parent / "templates"


def _assert_escaped(page: str, where: str) -> None:
    assert EVIL not in page, where
    assert "<script>alert" not in page and "<img src=x" not in page, where
    assert ESCAPED in page, f"{where}: the hostile text is not shown at all"


async def test_hostile_text_is_escaped_on_every_page(rig):
    csrf = await rig.login()
    gateway = rig.gateway
    workspace = gateway.settings.workspaces_dir / "owner"
    # A stranger's display name (Telegram's first_name is anyone's to choose).
    await Pairing(gateway.state).request(
        InboundMessage("telegram", "31337", "31337", "hi", sender_name=EVIL)
    )
    # A log line quoting hostile text (an MCP server's error, a platform's answer).
    logging.getLogger("gateway.capabilities.mcp_manager").error("mcp server %s failed", EVIL)
    # An MCP tool's name, as counted and as called in a transcript.
    gateway.metrics.tool_calls.inc(tool=f"mcp__{EVIL}", outcome="ok")
    # A file whose name and text are hostile.
    (workspace / "notes").mkdir()
    hostile_file = workspace / "notes" / f"{EVIL.replace('/', '_')}.txt"
    hostile_file.write_text(EVIL, encoding="utf-8")
    (workspace / "memory" / "2026-11-02.md").write_text(f"- {EVIL} grey cat\n", encoding="utf-8")
    # A transcript: what the person said, the model answered, a tool was called with.
    path = transcript_path(workspace, "owner:dm")
    lines = [
        {"type": "session", "key": "owner:dm"},
        {"ts": "2026-11-02T10:00:00+00:00", "type": "user", "text": EVIL},
        {
            "ts": "2026-11-02T10:00:01+00:00",
            "type": "assistant",
            "text": EVIL,
            "tool_calls": [{"id": "c1", "name": f"mcp__{EVIL}", "arguments": {"q": EVIL}}],
        },
        {
            "ts": "2026-11-02T10:00:02+00:00",
            "type": "tool_result",
            "tool_call_id": "c1",
            "name": f"mcp__{EVIL}",
            "text": EVIL,
            "is_error": True,
        },
        {"ts": "2026-11-02T10:00:03+00:00", "type": "delivery", "ok": False, "error": EVIL},
        {
            "ts": "2026-11-02T10:00:04+00:00",
            "type": "compaction",
            "summary": EVIL,
            "reason": EVIL,
            "first_kept_entry": 1,
        },
    ]
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    (workspace / "HEARTBEAT.md").write_text(f"# Checks\n- {EVIL}\n", encoding="utf-8")
    # A reminder's text.
    added = await rig.post("/p/owner/reminders/add", {"when": "in 2 hours", "text": EVIL}, csrf)
    assert added.status == 303

    name = hostile_file.relative_to(workspace).as_posix()
    pages = {
        "overview": "/",
        "files": "/p/owner/files",
        "file": f"/p/owner/file?path={_q(name)}",
        "editor": f"/p/owner/edit?path={_q(name)}",
        "session": f"/p/owner/session/{path.name}",
        "search": f"/p/owner/search?q={_q(EVIL + ' grey cat')}",
        "metrics": "/p/owner/metrics",
        "reminders": "/p/owner/reminders",
        "heartbeat": "/p/owner/heartbeat",
    }
    for where, url in pages.items():
        response = await rig.client.get(url)
        assert response.status == 200, (where, await response.text())
        _assert_escaped(await response.text(), where)
    fragment = await rig.client.get(
        f"/p/owner/search?q={_q(EVIL + ' grey cat')}", headers={"HX-Request": "true"}
    )
    _assert_escaped(await fragment.text(), "search fragment")
    # Refusals echo what was asked for, escaped too.
    for url in (f"/p/owner/file?path={_q(EVIL)}", f"/p/owner/edit?path={_q('../' + EVIL)}"):
        response = await rig.client.get(url)
        assert response.status in (400, 404)
        _assert_escaped(await response.text(), url)
    # A reminder whose time is not understood: the form comes back as typed, escaped.
    refused = await rig.post("/p/owner/reminders/add", {"when": EVIL, "text": EVIL}, csrf)
    assert refused.status == 400
    _assert_escaped(await refused.text(), "refused reminder")


def _q(text: str) -> str:
    from urllib.parse import quote

    return quote(text, safe="")


def test_templates_are_autoescaped_and_never_opt_out():
    assert render.ENV.autoescape is True
    names = sorted(p.name for p in TEMPLATES.glob("*.html"))
    assert "base.html" in names and len(names) >= 15
    for path in TEMPLATES.glob("*.html"):
        text = path.read_text(encoding="utf-8")
        assert not re.search(r"\|\s*safe\b", text), f"{path.name} marks text safe"
        assert "autoescape false" not in text, path.name
        assert "Markup" not in text, path.name
    # Python code of the panel builds no HTML: Markup is made in one place (Markdown with
    # raw HTML off), and no module formats tags into strings.
    package = TEMPLATES.parent
    for module in package.glob("*.py"):
        source = module.read_text(encoding="utf-8")
        if module.name != "html.py":
            assert "Markup(" not in source, module.name
        assert not re.search(
            r"""f["'][^"'\n]*<(div|p|td|tr|span|a |table|section|form)\b""", source
        ), f"{module.name} formats HTML in an f-string"


def test_markdown_is_the_one_trusted_html_and_keeps_raw_html_out():
    from gateway.panel.html import markdown

    shown = str(markdown(f"# Title\n\n{EVIL}\n\n[x](javascript:alert(1))\n"))
    assert "<h1>Title</h1>" in shown
    assert "<script>" not in shown and "<img" not in shown
    assert 'href="javascript:' not in shown
