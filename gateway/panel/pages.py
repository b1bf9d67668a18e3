"""The panel's pages (GET): overview, and per person files, history, sessions, search,
heartbeat and metrics. Each handler gathers data through PanelHost and renders with html.py;
every person page first asks the login's principal whether it may see that person.
"""

from __future__ import annotations

import asyncio
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

from aiohttp import web

from gateway.ops.versioning import VersioningError
from gateway.panel.files import FileRefused, list_files, read_text, text_hash
from gateway.panel.host import PanelError, UnknownPerson
from gateway.panel.html import (
    bar_chart,
    button_form,
    csrf_field,
    diff_block,
    esc,
    layout,
    markdown,
    person_url,
    table,
    url,
    when,
)
from gateway.panel.server import panel_of, session_of
from gateway.panel.transcripts import daily_figures, list_sessions, read_items, session_path
from memory.layout import INBOX_DIR, SEEN_DIR


def add_routes(router: web.UrlDispatcher) -> None:
    router.add_get("/", overview)
    router.add_get("/p/{person}/files", files)
    router.add_get("/p/{person}/file", file_view)
    router.add_get("/p/{person}/edit", file_edit)
    router.add_get("/p/{person}/history", history)
    router.add_get("/p/{person}/diff/{rev}", diff)
    router.add_get("/p/{person}/sessions", sessions)
    router.add_get("/p/{person}/session/{name}", session_view)
    router.add_get("/p/{person}/inbox-image", inbox_image)
    router.add_get("/p/{person}/search", search)
    router.add_get("/p/{person}/heartbeat", heartbeat)
    router.add_get("/p/{person}/usage", usage)
    router.add_get("/p/{person}/metrics", metrics)


def page(request: web.Request, title: str, body: str, *, person: str = "", tab: str = "",
         status: int = 200) -> web.Response:
    session = session_of(request)
    text = layout(title, body, csrf=session.csrf, person=person, tab=tab,
                  flash=session.take_flash())
    return web.Response(text=text, content_type="text/html", status=status)


def fragment(text: str) -> web.Response:
    return web.Response(text=text, content_type="text/html")


def is_htmx(request: web.Request) -> bool:
    return request.headers.get("HX-Request") == "true"


def person_of(request: web.Request) -> tuple[str, Path]:
    """The person of a /p/{person}/ URL that this login may see, else 404 (never 403: a login
    learns nothing about people it may not see)."""
    person = request.match_info["person"]
    if not session_of(request).principal.may_view(person):
        raise web.HTTPNotFound(text="no such person")
    try:
        return person, panel_of(request).host.workspace(person)
    except UnknownPerson:
        raise web.HTTPNotFound(text="no such person") from None


# --- overview ----------------------------------------------------------------------------------


async def overview(request: web.Request) -> web.Response:
    panel = panel_of(request)
    host = panel.host
    csrf = session_of(request).csrf
    ready = await host.readiness()
    channels = [
        (esc(name), f'<span class="{"ok" if c["ready"] else "bad"}">'
                    f'{"ready" if c["ready"] else "down"}</span>', esc(c["detail"]))
        for name, c in ready["channels"].items()]
    state = ready["state_db"]
    channels.append(("state database", f'<span class="{"ok" if state["ready"] else "bad"}">'
                     f'{"ready" if state["ready"] else "down"}</span>', esc(state["detail"])))
    visible = session_of(request).principal.visible(host.person_ids())
    people = await asyncio.to_thread(host.people, visible)
    people_rows = [
        (f'<a href="{esc(person_url(p.person_id))}">{esc(p.person_id)}</a>', str(p.sessions),
         when(p.last_activity)) for p in people]
    pending = [
        (esc(r.channel), f"<code>{esc(r.code)}</code>",
         esc(r.sender_id) + (f" ({esc(r.sender_name)})" if r.sender_name else ""),
         when(r.created_at.timestamp()),
         button_form("/pairing/approve", "Approve", csrf,
                     fields={"channel": r.channel, "code": r.code}) + " " +
         button_form("/pairing/deny", "Deny", csrf, kind="danger",
                     fields={"channel": r.channel, "code": r.code}))
        for r in await host.pending_pairing()]
    approved = [
        (esc(f"{channel}:{sender}"), when(at), esc(via),
         button_form("/approved/revoke", "Revoke", csrf, kind="quiet",
                     fields={"channel": channel, "sender": sender}))
        for channel, sender, at, via in await host.approved()]
    links = [(esc(person), esc(f"{channel}:{sender}")) for person, channel, sender
             in await host.links()]
    errors = [(when(line.at), f'<span class="{"bad" if line.level != "WARNING" else "warn"}">'
               f"{esc(line.level)}</span>", f"{esc(line.logger)}: {esc(line.message)}")
              for line in panel.recent.newest(10)]
    link_form = (
        f'<form method="post" action="/links">{csrf_field(csrf)}'
        '<p><label for="accounts">Join accounts into one person (e.g. '
        '<code>telegram:123 discord:456</code>, or a person id first)</label></p>'
        '<div class="row"><input id="accounts" name="accounts" type="text" required '
        'style="flex:1;min-width:12rem"><button type="submit">Link</button></div></form>')
    body = (
        f'<section class="card"><h2>Channels</h2>{table(["Part", "State", "Detail"], channels)}'
        f'<p class="mute">queue depth {ready["queue_depth"]}</p></section>'
        f'<section class="card" id="pairing"><h2>Pending pairing requests</h2>'
        f'{table(["Channel", "Code", "Sender", "Asked", ""], pending, "no one is waiting")}'
        f"</section>"
        f'<section class="card"><h2>People</h2>'
        f'{table(["Person", "Sessions", "Last activity"], people_rows, "no workspaces yet")}'
        f"</section>"
        f'<section class="card"><h2>Recent errors</h2>'
        f'{table(["When", "Level", "What"], errors, "no warnings or errors since start")}'
        f"</section>"
        f'<section class="card"><h2>Approved senders</h2>'
        f'{table(["Account", "Since", "Via", ""], approved, "none yet")}</section>'
        f'<section class="card"><h2>Linked accounts</h2>'
        f'{table(["Person", "Account"], links, "none")}{link_form}</section>')
    return page(request, "Overview", body)


# --- files ---------------------------------------------------------------------------------------


async def files(request: web.Request) -> web.Response:
    person, workspace = person_of(request)
    entries = await asyncio.to_thread(list_files, workspace)
    base = person_url(person, "file")
    rows = [(f'<a href="{url(base, path=f.path)}">{esc(f.path)}</a>', f"{f.size:,} B",
             when(f.modified)) for f in entries]
    new = (f'<form method="get" action="{esc(person_url(person, "edit"))}" class="row">'
           '<input name="path" type="text" placeholder="notes/new-file.md" required '
           'style="flex:1;min-width:10rem" aria-label="new file path">'
           '<button type="submit" class="quiet">New file</button></form>')
    body = f'<section class="card">{table(["File", "Size", "Changed"], rows)}{new}</section>'
    return page(request, "Files", body, person=person, tab="files")


def _max_bytes(request: web.Request) -> int:
    return panel_of(request).host.settings.tools.max_file_bytes


async def file_view(request: web.Request) -> web.Response:
    person, workspace = person_of(request)
    rel = request.query.get("path", "")
    try:
        text = await asyncio.to_thread(read_text, workspace, rel, _max_bytes(request))
    except FileRefused as exc:
        return page(request, "File", f'<p class="bad">{esc(rel)}: {esc(exc)}</p>',
                    person=person, tab="files", status=400)
    if text is None:
        raise web.HTTPNotFound(text="no such file")
    shown = markdown(text) if rel.lower().endswith(".md") else f"<pre>{esc(text)}</pre>"
    edit = f'<a href="{url(person_url(person, "edit"), path=rel)}">Edit</a>'
    body = (f'<p class="row"><code>{esc(rel)}</code> {edit}</p>'
            f'<section class="card">{shown}</section>')
    return page(request, rel, body, person=person, tab="files")


def editor_form(person: str, rel: str, text: str, base: str, csrf: str) -> str:
    return (
        f'<form method="post" action="{esc(person_url(person, "edit"))}">{csrf_field(csrf)}'
        f'<input type="hidden" name="path" value="{esc(rel)}">'
        f'<input type="hidden" name="base" value="{esc(base)}">'
        f'<p><label for="text"><code>{esc(rel)}</code></label></p>'
        f'<textarea id="text" name="text" spellcheck="false">{esc(text)}</textarea>'
        '<p class="row"><button type="submit">Save</button>'
        f'<a href="{url(person_url(person, "file"), path=rel)}">Cancel</a></p></form>')


async def file_edit(request: web.Request) -> web.Response:
    person, workspace = person_of(request)
    rel = request.query.get("path", "")
    try:
        text = await asyncio.to_thread(read_text, workspace, rel, _max_bytes(request))
    except FileRefused as exc:
        return page(request, "Edit", f'<p class="bad">{esc(rel)}: {esc(exc)}</p>',
                    person=person, tab="files", status=400)
    body = (f'<section class="card">'
            f'{editor_form(person, rel, text or "", text_hash(text), session_of(request).csrf)}'
            f'<p class="mute">Saving records a commit (History). If the file changes meanwhile '
            f"(the assistant or a hand edit), you will be shown both versions.</p></section>")
    return page(request, f"Edit {rel}", body, person=person, tab="files")


# --- history -------------------------------------------------------------------------------------


async def history(request: web.Request) -> web.Response:
    person, _ = person_of(request)
    host = panel_of(request).host
    csrf = session_of(request).csrf
    if not host.versioning_on:
        return page(request, "History", '<p class="mute">Versioning is off (no git, or '
                    "versioning.enabled = false).</p>", person=person, tab="history")
    try:
        commits = await host.history(person)
    except VersioningError as exc:
        return page(request, "History", f'<p class="mute">{esc(exc)}</p>', person=person,
                    tab="history")
    rows = []
    for index, commit in enumerate(commits):
        target = f"diff-{commit.rev}"
        diff_url = f"/p/{quote(person, safe='')}/diff/{quote(commit.rev, safe='')}"
        show = (f'<a href="{esc(diff_url)}" hx-get="{esc(diff_url)}" '
                f'hx-target="#{esc(target)}" hx-swap="innerHTML">diff</a>')
        last = index == len(commits) - 1 and commit.subject.startswith("init")
        undo = "" if last else button_form(
            f"/p/{quote(person, safe='')}/undo", "Undo", csrf, kind="quiet",
            fields={"rev": commit.rev})
        files_text = ", ".join(commit.files[:6]) + (" …" if len(commit.files) > 6 else "")
        rows.append((f"<code>{esc(commit.rev)}</code>", when(commit.date),
                     f"{esc(commit.subject)}<div class=mute>{esc(files_text)}</div>"
                     f'<div id="{esc(target)}"></div>', f"{show} {undo}"))
    body = f'<section class="card">{table(["Rev", "When", "Change", ""], rows, "no changes")}'
    return page(request, "History", body + "</section>", person=person, tab="history")


async def diff(request: web.Request) -> web.Response:
    person, _ = person_of(request)
    rev = request.match_info["rev"]
    try:
        text = await panel_of(request).host.diff(person, rev)
    except VersioningError as exc:
        text = str(exc)
    block = diff_block(text)
    if is_htmx(request):
        return fragment(block)
    return page(request, f"Change {rev}", f'<section class="card">{block}</section>',
                person=person, tab="history")


# --- sessions ------------------------------------------------------------------------------------


async def sessions(request: web.Request) -> web.Response:
    person, workspace = person_of(request)
    found = await asyncio.to_thread(list_sessions, workspace)
    base = f"/p/{quote(person, safe='')}/session/"
    rows = [(f'<a href="{esc(base + quote(s.name))}">{esc(s.key or s.name)}</a>'
             + (' <span class="mute">(earlier conversation)</span>' if s.archived else ""),
             f"{s.lines:,}", when(s.modified)) for s in found]
    body = f'<section class="card">{table(["Session", "Lines", "Last write"], rows, "none")}'
    return page(request, "Sessions", body + "</section>", person=person, tab="sessions")


def _media_html(media: list[dict[str, str]], person: str) -> str:
    """What came with a message: a thumbnail for an image, the transcript of a voice note,
    the file it was saved as, or why it could not be used."""
    parts = []
    for item in media:
        label = esc(item.get("label") or item.get("kind") or "file")
        thumb = ""
        if item.get("seen"):
            src = person_url(person, "inbox-image") + "?path=" + quote(item["seen"])
            thumb = f'<img class="thumb" src="{esc(src)}" alt="{label}" loading="lazy">'
        heard = (f'<div class="mute">heard: {esc(item["transcript"])}</div>'
                 if item.get("transcript") else "")
        saved = f' <span class="mute">{esc(item["file"])}</span>' if item.get("file") else ""
        error = f' <span class="mute">(not used: {esc(item["error"])})</span>' \
            if item.get("error") else ""
        parts.append(f'<div class="attachment">{thumb}<span>{label}</span>{saved}{error}'
                     f"{heard}</div>")
    return "".join(parts)


def _item_html(item: Any, person: str = "") -> str:
    stamp = f'<div class="mute">{esc(item.ts[:19].replace("T", " "))}</div>'
    if item.kind in ("user", "assistant"):
        who = "Person" if item.kind == "user" else (
            "Assistant (heartbeat)" if item.detail.get("heartbeat") else "Assistant")
        calls = "".join(
            f'<details><summary>tool call: {esc(c["name"])}'
            f'{" (error)" if c["error"] else ""}</summary><pre>{esc(c["arguments"])}</pre>'
            f'<pre>{esc(c["result"] if c["result"] is not None else "(no result)")}</pre>'
            "</details>" for c in item.calls)
        text = f"<div>{esc(item.text)}</div>" if item.text else ""
        media = _media_html(item.detail.get("media") or [], person)
        return (f'<div class="msg {item.kind}">{stamp}<strong>{who}</strong>{media}{text}'
                f"{calls}</div>")
    if item.kind == "compaction":
        summary = (f"<details><summary>summary</summary><pre>{esc(item.text)}</pre></details>"
                   if item.text else "<div>older messages dropped</div>")
        return (f'<div class="msg compaction">{stamp}<strong>Compaction</strong> '
                f'({esc(item.detail.get("reason") or "?")}): what came before was summarized '
                f"for the model; the lines above stay on disk.{summary}</div>")
    if item.kind == "tool":
        return (f'<div class="msg event">{stamp}tool result {esc(item.detail.get("name"))}: '
                f"<pre>{esc(item.text)}</pre></div>")
    detail = ", ".join(f"{k}={v}" for k, v in item.detail.items() if k != "text")
    text = f": {esc(item.detail.get('text'))}" if item.detail.get("text") else ""
    return f'<div class="msg event">{stamp}{esc(item.text)} {esc(detail)}{text}</div>'


async def session_view(request: web.Request) -> web.Response:
    person, workspace = person_of(request)
    name = request.match_info["name"]
    try:  # the file routes' resolver: a link out of sessions/ is no session
        path = await asyncio.to_thread(session_path, workspace, name)
    except ValueError:
        raise web.HTTPNotFound(text="no such session") from None
    items, skipped = await asyncio.to_thread(read_items, path)
    key = next((s.key for s in await asyncio.to_thread(list_sessions, workspace)
                if s.name == name), "")
    csrf = session_of(request).csrf
    actions = ""
    if key and "." not in name[:-len(".jsonl")]:
        action = f"/p/{quote(person, safe='')}/session/{quote(name)}"
        actions = ('<p class="row">'
                   + button_form(action + "/compact", "Compact now", csrf, kind="quiet")
                   + button_form(action + "/reset", "Start a fresh session", csrf,
                                 kind="danger") + "</p>")
    older = f'<p class="mute">{skipped:,} older lines not shown.</p>' if skipped else ""
    body = (f"{actions}{older}<section class=card>"
            + "".join(_item_html(i, person) for i in items) + "</section>")
    return page(request, key or name, body, person=person, tab="sessions")


async def inbox_image(request: web.Request) -> web.Response:
    """A resized image from an inbox (`inbox/.../.seen/...`, a group's too): the session
    view's thumbnails. Nothing else of the workspace is served here."""
    _, workspace = person_of(request)
    rel = request.query.get("path", "")
    parts = rel.split("/")
    if (INBOX_DIR not in parts or SEEN_DIR not in parts or ".." in parts
            or Path(rel).suffix.lower() not in (".jpg", ".png")):
        raise web.HTTPNotFound(text="no such image")
    root = os.path.realpath(workspace)
    path = os.path.realpath(os.path.join(root, rel))
    if os.path.commonpath([root, path]) != root or not os.path.isfile(path):
        raise web.HTTPNotFound(text="no such image")
    data = await asyncio.to_thread(Path(path).read_bytes)
    kind = "image/png" if path.endswith(".png") else "image/jpeg"
    return web.Response(body=data, content_type=kind,
                        headers={"Cache-Control": "private, max-age=3600"})


# --- memory search -------------------------------------------------------------------------------


async def search(request: web.Request) -> web.Response:
    person, _ = person_of(request)
    host = panel_of(request).host
    query = request.query.get("q", "").strip()
    results = ""
    if query:
        try:
            response = await host.search(person, query)
        except PanelError as exc:
            results = f'<p class="mute">{esc(exc)}</p>'
        else:
            rows = [(f"<code>{esc(r.path)}:{r.start_line}-{r.end_line}</code>"
                     + (f" best line {r.line}" if r.line is not None else ""),
                     f'<span class="score">{r.score:.3f}</span>', esc(r.source),
                     f"<pre>{esc(r.snippet)}</pre>") for r in response.results]
            note = f" ({esc(response.note)})" if response.note else ""
            results = (f'<p class="mute">mode: {esc(response.mode)}{note}</p>'
                       + table(["Where", "Score", "Source", "Lines"], rows,
                               f"nothing matched {query!r}"))
    results = f'<div id="results">{results}</div>'
    if is_htmx(request):
        return fragment(results)
    action = esc(person_url(person, "search"))
    form = (f'<form method="get" action="{action}" class="row" role="search">'
            f'<input type="search" name="q" value="{esc(query)}" aria-label="search memory" '
            f'placeholder="what do you remember about…" style="flex:1;min-width:10rem" '
            f'hx-get="{action}" hx-trigger="input changed delay:400ms" hx-target="#results" '
            f'hx-swap="outerHTML"><button type="submit">Search</button></form>')
    if not host.memory_on:
        form += '<p class="mute">Memory search is off ([memory] enabled = false).</p>'
    body = f'<section class="card">{form}{results}</section>'
    return page(request, "Memory search", body, person=person, tab="search")


# --- heartbeat -----------------------------------------------------------------------------------


async def heartbeat(request: web.Request) -> web.Response:
    from heartbeat import load_state, parse_checklist

    person, workspace = person_of(request)
    host = panel_of(request).host
    policy = host.heartbeat_policy(person)
    state = await asyncio.to_thread(load_state, workspace)
    try:
        raw = await asyncio.to_thread((workspace / "HEARTBEAT.md").read_text, "utf-8")
    except OSError:
        raw = ""
    checklist = parse_checklist(raw)
    day = policy.active_hours.local_date(datetime.now(UTC))
    used = state.tokens_on(day)
    cap = policy.daily_token_cap
    share = f" ({used / cap:.0%})" if cap else ""
    tasks = [(esc(t.name), esc(str(t.every)), esc(t.prompt), when(state.task_runs.get(t.name)))
             for t in checklist.tasks]
    if policy.every is None:
        next_beat = "never (heartbeats are off for this person)"
    elif state.next_beat_at is None:
        next_beat = "not planned yet (the timer plans it once the gateway runs)"
    else:
        next_beat = when(state.next_beat_at)
    replies = await asyncio.to_thread(_heartbeat_replies, workspace, person)
    run_now = button_form(person_url(person, "heartbeat/run"), "Run a heartbeat now",
                          session_of(request).csrf)
    status_css = {"error": "bad", "capped": "warn", "alert": "ok"}.get(state.last_status, "")
    body = (
        f'<section class="card"><h2>Status</h2><table>'
        f"<tr><th>Policy</th><td>{esc(policy.describe())}</td></tr>"
        f"<tr><th>Next beat</th><td>{next_beat}</td></tr>"
        f"<tr><th>Last beat</th><td>{when(state.last_beat_at)} "
        f'<span class="{status_css}">{esc(state.last_status)}</span> '
        f"{esc(state.last_reason)}</td></tr>"
        f"<tr><th>Tokens today</th><td>{used:,} of {cap:,}{share}</td></tr></table>"
        f"<p>{run_now}</p></section>"
        f'<section class="card"><h2>Checklist (HEARTBEAT.md)</h2>'
        f'{markdown(checklist.body) if not checklist.body_empty else "<p class=mute>empty</p>"}'
        f'{table(["Task", "Every", "Prompt", "Last run"], tasks, "no timed tasks")}'
        + "".join(f'<p class="warn">{esc(p)}</p>' for p in checklist.problems)
        + f'<p><a href="{url(person_url(person, "edit"), path="HEARTBEAT.md")}">Edit the '
        "checklist</a></p></section>"
        f'<section class="card"><h2>Last heartbeat replies</h2>'
        f'{table(["When", "Reply"], replies, "the model was not asked yet")}</section>')
    return page(request, "Heartbeat", body, person=person, tab="heartbeat")


def _heartbeat_replies(workspace: Path, person: str, count: int = 5) -> list[tuple[str, str]]:
    """The model's last answers in the heartbeat's own transcript (HEARTBEAT_OK included:
    that is what "nothing to report" looks like)."""
    from gateway.agent.sessions import transcript_path

    try:
        path = session_path(workspace, transcript_path(workspace, f"{person}:heartbeat").name)
    except ValueError:
        return []
    items, _ = read_items(path, limit=200)
    answers = [i for i in items if i.kind == "assistant" and i.text][-count:]
    return [(when(i.ts), esc(i.text[:500])) for i in reversed(answers)]


# --- usage ---------------------------------------------------------------------------------------


async def usage(request: web.Request) -> web.Response:
    """What the person's turns used and cost (gateway/ops/usage.py), and their caps."""
    from datetime import timedelta

    from gateway.ops.usage import Totals
    from gateway.pipeline.usage_report import money

    person, _ = person_of(request)
    gateway = panel_of(request).host.gateway
    ledger = gateway.usage
    periods = ledger.periods()

    def row(label: str, t: Totals) -> tuple[str, ...]:
        return (esc(label), f"{t.calls:,}", f"{t.input:,}", f"{t.output:,}",
                f"{t.cache_read:,}", f"{t.cache_write:,}", f"{t.cache_share:.0%}",
                esc(money(t.cost)))

    heads = ["", "Calls", "In", "Out", "Cache read", "Cache write", "From cache", "Cost"]
    spans = [("Today", periods.today), ("This week", periods.week),
             ("This month", periods.month)]
    totals = [row(label, await ledger.total(person, since)) for label, since in spans]
    kinds = [row(kind, t) for kind, t in
             (await ledger.grouped("kind", person, periods.month)).items()]
    models = [row(model + ("" if ledger.prices.known(model) else " (no price: $0)"), t)
              for model, t in (await ledger.grouped("model", person, periods.month)).items()]
    first = periods.today - timedelta(days=13)
    daily = await ledger.grouped("day", person, first)
    days = [(day.isoformat(), daily.get(day.isoformat(), Totals()).cost)
            for day in (first + timedelta(days=n) for n in range(14))]
    caps = [(esc(s.cap.period), esc(s.cap.show(s.used)), esc(s.cap.show(s.cap.limit)),
             f'<span class="{"bad" if s.reached else "warn" if s.share >= 0.8 else ""}">'
             f"{s.share:.0%}</span>") for s in await gateway.budgets.status(person)]
    chart = bar_chart(days, "Cost per day (US$)") if any(v for _, v in days) else ""
    body = (f'<section class="card"><h2>Totals</h2>{table(heads, totals)}</section>'
            f'<section class="card"><h2>This month by kind of turn</h2>'
            f'{table(heads, kinds, "nothing this month")}</section>'
            f'<section class="card"><h2>This month by model</h2>'
            f'{table(heads, models, "nothing this month")}{chart}</section>'
            f'<section class="card"><h2>Caps</h2>'
            f'{table(["Period", "Used", "Cap", "Share"], caps, "no caps for this person")}'
            f"</section>")
    return page(request, "Usage", body, person=person, tab="usage")


# --- metrics -------------------------------------------------------------------------------------


async def metrics(request: web.Request) -> web.Response:
    person, workspace = person_of(request)
    host = panel_of(request).host
    today = host.gateway.clock.now().astimezone(UTC).date()
    days = await asyncio.to_thread(daily_figures, workspace, today)
    turns = [(day, float(f.turns)) for day, f in days.items()]
    tokens = [(day, float(f.tokens)) for day, f in days.items()]
    latency = [(day, f.latency_p50) for day, f in days.items()]
    charts = (bar_chart(turns, "Turns per day") + bar_chart(latency, "Reply latency, median (s)",
                                                            " s")
              + bar_chart(tokens, "Tokens per day (in + out)"))
    if not any(f.turns or f.tokens for f in days.values()):
        charts = '<p class="mute">No conversations in the last 14 days.</p>'
    counters = [(esc(title), esc(labels), f"{value:,.0f}")
                for title, values in host.counters().items()
                for labels, value in values.items()]
    body = (f'<section class="card"><h2>{esc(person)}, last 14 days (UTC)</h2>'
            f'<div class="charts">{charts}</div></section>'
            f'<section class="card"><h2>Gateway since start (everyone)</h2>'
            f'{table(["Counter", "Labels", "Value"], counters, "nothing counted yet")}'
            f"</section>")
    return page(request, "Metrics", body, person=person, tab="metrics")
