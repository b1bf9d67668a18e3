"""The panel's actions (POST, CSRF-checked by the middleware): each one calls the same code
as its CLI command through PanelHost, says what happened in a flash line, and redirects
(post/redirect/get, so a reload never repeats an action).
"""

from __future__ import annotations

import asyncio
import logging
from urllib.parse import quote

from aiohttp import web

from gateway.ops.versioning import VersioningError, undo_words
from gateway.panel.context import panel_of, session_of
from gateway.panel.files import EditConflict, FileRefused, save_text
from gateway.panel.host import PanelError
from gateway.panel.html import person_url, url
from gateway.panel.pages import error_page, page, person_of, reminders
from gateway.panel.transcripts import list_sessions
from gateway.pipeline.links import LinkError
from gateway.pipeline.pairing import PairingError
from scheduler import ScheduleError, ScheduleFileError

log = logging.getLogger(__name__)


def add_routes(router: web.UrlDispatcher) -> None:
    router.add_post("/pairing/approve", pairing_approve)
    router.add_post("/pairing/deny", pairing_deny)
    router.add_post("/approved/revoke", revoke)
    router.add_post("/links", link)
    router.add_post("/p/{person}/edit", file_save)
    router.add_post("/p/{person}/undo", undo)
    router.add_post("/p/{person}/heartbeat/run", heartbeat_run)
    router.add_post("/p/{person}/reminders/add", reminder_add)
    router.add_post("/p/{person}/reminders/cancel", reminder_cancel)
    router.add_post("/p/{person}/session/{name}/compact", session_compact)
    router.add_post("/p/{person}/session/{name}/reset", session_reset)


def back(to: str) -> web.HTTPSeeOther:
    return web.HTTPSeeOther(to)


async def _form(request: web.Request) -> dict[str, str]:
    form = await request.post()
    return {k: v for k, v in form.items() if isinstance(v, str)}


# --- pairing, approvals, links ------------------------------------------------------------------


async def pairing_approve(request: web.Request) -> web.StreamResponse:
    return await _decide(request, "approve")


async def pairing_deny(request: web.Request) -> web.StreamResponse:
    return await _decide(request, "deny")


async def _decide(request: web.Request, decision: str) -> web.StreamResponse:
    form = await _form(request)
    host = panel_of(request).host
    session = session_of(request)
    try:
        if decision == "approve":
            found = await host.approve(form.get("channel", ""), form.get("code", ""))
        else:
            found = await host.deny(form.get("channel", ""), form.get("code", ""))
    except PairingError as exc:
        session.say("error", str(exc))
    else:
        name = f" ({found.sender_name})" if found.sender_name else ""
        verb = "approved" if decision == "approve" else "denied"
        session.say("ok", f"{verb} {found.channel} user {found.sender_id}{name}")
        log.info("panel: %s pairing %s on %s", verb, found.code, found.channel)
    raise back("/#pairing")


async def revoke(request: web.Request) -> web.StreamResponse:
    form = await _form(request)
    channel, sender = form.get("channel", ""), form.get("sender", "")
    done = await panel_of(request).host.revoke(channel, sender)
    session_of(request).say(
        "ok" if done else "error",
        f"revoked {channel}:{sender}" if done else f"{channel}:{sender} was not approved",
    )
    raise back("/")


async def link(request: web.Request) -> web.StreamResponse:
    form = await _form(request)
    session = session_of(request)
    try:
        result = await panel_of(request).host.link(form.get("accounts", "").split())
    except LinkError as exc:
        session.say("error", str(exc))
    else:
        joined = " and ".join(f"{c}:{u}" for c, u in result.accounts)
        session.say("ok", f"linked {joined} as person {result.person}")
    raise back("/")


# --- files and history ---------------------------------------------------------------------------


async def file_save(request: web.Request) -> web.StreamResponse:
    person, workspace = person_of(request)
    host = panel_of(request).host
    session = session_of(request)
    form = await _form(request)
    rel, text, base = form.get("path", ""), form.get("text", ""), form.get("base", "")
    max_bytes = host.settings.tools.max_file_bytes
    await host.commit_hand_edits(person)  # a shell edit made before this one keeps its reason
    try:
        await asyncio.to_thread(save_text, workspace, rel, text, base, max_bytes)
    except FileRefused as exc:
        return error_page(request, 400, f"Not saved: {rel}: {exc}", person=person, tab="files")
    except EditConflict as conflict:
        return page(
            request,
            "conflict.html",
            f"Conflict in {rel}",
            person=person,
            tab="files",
            status=409,
            rel=rel,
            text=text,
            current=conflict.current,
            base=conflict.current_hash,
        )
    rev = await host.commit_edit(person, rel)
    session.say("ok", f"saved {rel}" + (f" (commit {rev})" if rev else " (no change)"))
    raise back(url(person_url(person, "file"), path=rel))


async def undo(request: web.Request) -> web.StreamResponse:
    person, _ = person_of(request)
    form = await _form(request)
    session = session_of(request)
    rev = form.get("rev", "")
    try:
        changed = await panel_of(request).host.undo(person, rev)
    except VersioningError as exc:
        session.say("error", str(exc))
    else:
        session.say(
            "ok",
            f"undid {rev}: {undo_words(changed)}"
            if changed
            else "nothing to undo: the files already have that content",
        )
    raise back(person_url(person, "history"))


# --- heartbeat and sessions ----------------------------------------------------------------------


async def heartbeat_run(request: web.Request) -> web.StreamResponse:
    person, _ = person_of(request)
    outcome = await panel_of(request).host.beat_now(person)
    session_of(request).say(
        "error" if outcome.status == "error" else "ok", f"heartbeat: {outcome.describe()}"
    )
    raise back(person_url(person, "heartbeat"))


# --- reminders -----------------------------------------------------------------------------------


async def reminder_add(request: web.Request) -> web.StreamResponse:
    """Add through the schedule tools' desk; a time or text it does not take shows the page
    again with the form as typed and the reason (nothing is lost)."""
    person, _ = person_of(request)
    form = await _form(request)
    kind = "agent" if form.get("agent") else "message"
    try:
        said = await panel_of(request).host.add_reminder(
            person, form.get("when", "").strip(), form.get("text", "").strip(), kind
        )
    except (ScheduleError, ScheduleFileError, PanelError) as exc:
        session_of(request).say("error", f"Not added: {exc}")
        return await reminders(request, form=form, status=400)
    session_of(request).say("ok", said)
    raise back(person_url(person, "reminders"))


async def reminder_cancel(request: web.Request) -> web.StreamResponse:
    person, _ = person_of(request)
    form = await _form(request)
    session = session_of(request)
    try:
        said = await panel_of(request).host.cancel_reminder(person, int(form.get("id", "")))
    except ValueError:
        session.say("error", "no reminder number given")
    except (ScheduleFileError, PanelError) as exc:
        session.say("error", str(exc))
    else:
        session.say("ok" if said.startswith("Cancelled") else "error", said)
    raise back(person_url(person, "reminders"))


async def _session_key(request: web.Request) -> tuple[str, str, str]:
    person, workspace = person_of(request)
    name = request.match_info["name"]
    found = await asyncio.to_thread(list_sessions, workspace)
    key = next((s.key for s in found if s.name == name and not s.archived), "")
    if not key:
        raise web.HTTPNotFound(text="no such live session")
    return person, name, key


async def session_compact(request: web.Request) -> web.StreamResponse:
    person, name, key = await _session_key(request)
    try:
        session_of(request).say("ok", await panel_of(request).host.compact(person, key))
    except PanelError as exc:
        session_of(request).say("error", str(exc))
    raise back(f"/p/{quote(person, safe='')}/session/{quote(name)}")


async def session_reset(request: web.Request) -> web.StreamResponse:
    person, _, key = await _session_key(request)
    try:
        session_of(request).say("ok", await panel_of(request).host.reset(person, key))
    except PanelError as exc:
        session_of(request).say("error", str(exc))
    raise back(person_url(person, "sessions"))
