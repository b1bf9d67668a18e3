"""The panel's pages (GET): overview, and per person files, history, sessions, search,
reminders, heartbeat, usage and metrics (the Tasks tab: gateway/panel/tasks_tab.py). Each
handler gathers data through PanelHost and renders a template (gateway/panel/templates/,
autoescaped); every person page first asks the login's principal whether it may see that
person.
"""

from __future__ import annotations

import asyncio
import os
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

from aiohttp import web

from gateway.agent.sessions import transcript_path
from gateway.ops.versioning import VersioningError
from gateway.panel.context import panel_of, session_of
from gateway.panel.diffs import read_diff
from gateway.panel.files import FileRefused, list_files, read_text, text_hash
from gateway.panel.host import PanelError, UnknownPerson
from gateway.panel.html import bar_chart, markdown, person_url, when
from gateway.panel.render import render
from gateway.panel.transcripts import daily_figures, list_sessions, read_items, session_path
from heartbeat import load_state, parse_checklist
from memory.layout import INBOX_DIR, SEEN_DIR, heartbeat_session_key
from scheduler import FORMS, ScheduleFileError
from scheduler.wording import from_now, when_words


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
    router.add_get("/p/{person}/reminders", reminders)
    router.add_get("/p/{person}/heartbeat", heartbeat)
    router.add_get("/p/{person}/usage", usage)
    router.add_get("/p/{person}/commands", commands)
    router.add_get("/p/{person}/metrics", metrics)


def page(
    request: web.Request,
    template: str,
    title: str,
    *,
    person: str = "",
    tab: str = "",
    status: int = 200,
    **context: Any,
) -> web.Response:
    """A whole page: `template` (which extends base.html) with the layout's values."""
    session = session_of(request)
    person_name = panel_of(request).host.display_name(person) if person else ""
    text = render(
        template,
        title=title,
        person=person,
        person_name=person_name,
        tab=tab,
        csrf=session.csrf,
        flash=session.take_flash(),
        logged_in=True,
        **context,
    )
    return web.Response(text=text, content_type="text/html", status=status)


def error_page(
    request: web.Request,
    status: int,
    message: str,
    *,
    person: str = "",
    tab: str = "",
    hint: str = "",
) -> web.Response:
    """A refusal or a missing thing, in the panel's own layout (not aiohttp's bare text)."""
    titles = {400: "Not possible", 404: "Not found", 409: "Conflict"}
    shown = (panel_of(request).host.display_name(person) or person) if person else ""
    back, back_label = (
        (person_url(person, tab or "files"), f"Back to {shown}")
        if person
        else ("/", "Back to the overview")
    )
    return page(
        request,
        "error.html",
        titles.get(status, "Error"),
        person=person,
        tab=tab,
        status=status,
        message=message,
        hint=hint,
        back=back,
        back_label=back_label,
    )


def fragment(text: str) -> web.Response:
    return web.Response(text=text, content_type="text/html")


def is_htmx(request: web.Request) -> bool:
    return request.headers.get("HX-Request") == "true"


NO_PERSON = (
    "There is no such person here. People get a workspace when they first write to "
    "the assistant, or with: clawgate chat --person NAME"
)


def person_of(request: web.Request) -> tuple[str, Path]:
    """The person of a /p/{person}/ URL that this login may see, else 404 (never 403: a login
    learns nothing about people it may not see)."""
    person = request.match_info["person"]
    if not session_of(request).principal.may_view(person):
        raise web.HTTPNotFound(text=NO_PERSON)
    try:
        return person, panel_of(request).host.workspace(person)
    except UnknownPerson:
        raise web.HTTPNotFound(text=NO_PERSON) from None


# --- overview ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Part:
    name: str
    ready: bool
    detail: str


async def overview(request: web.Request) -> web.Response:
    panel = panel_of(request)
    host = panel.host
    ready = await host.readiness()
    parts = [
        Part(name, bool(c["ready"]), str(c["detail"])) for name, c in ready["channels"].items()
    ]
    state = ready["state_db"]
    parts.append(Part("state database", bool(state["ready"]), str(state["detail"])))
    visible = session_of(request).principal.visible(host.person_ids())
    attention, routine = panel.recent.attention(10)
    people = await asyncio.to_thread(host.people, visible)
    names = {p.person_id: p.name for p in people if p.name}
    return page(
        request,
        "overview.html",
        "Overview",
        parts=parts,
        queue_depth=ready["queue_depth"],
        terminal_only=bool(host.channel_names()) and host.channel_names() <= {"terminal"},
        attention=attention,
        routine=routine,
        pending=await host.pending_pairing(),
        people=people,
        names=names,
        approved=await host.approved(),
        links=await host.links(),
        sender_names=host.sender_names,
    )


# --- files ---------------------------------------------------------------------------------------


async def files(request: web.Request) -> web.Response:
    person, workspace = person_of(request)
    entries = await asyncio.to_thread(list_files, workspace)
    return page(request, "files.html", "Files", person=person, tab="files", entries=entries)


def _max_bytes(request: web.Request) -> int:
    return panel_of(request).host.settings.tools.max_file_bytes


async def file_view(request: web.Request) -> web.Response:
    person, workspace = person_of(request)
    rel = request.query.get("path", "")
    try:
        text = await asyncio.to_thread(read_text, workspace, rel, _max_bytes(request))
    except FileRefused as exc:
        return error_page(request, 400, f"{rel}: {exc}", person=person, tab="files")
    if text is None:
        raise web.HTTPNotFound(text=f"There is no file {rel} in {person}'s workspace.")
    rendered = markdown(text) if rel.lower().endswith(".md") else None
    return page(
        request, "file.html", rel, person=person, tab="files", rel=rel, text=text, rendered=rendered
    )


async def file_edit(request: web.Request) -> web.Response:
    person, workspace = person_of(request)
    rel = request.query.get("path", "")
    try:
        text = await asyncio.to_thread(read_text, workspace, rel, _max_bytes(request))
    except FileRefused as exc:
        return error_page(request, 400, f"{rel}: {exc}", person=person, tab="files")
    return page(
        request,
        "edit.html",
        f"Edit {rel}",
        person=person,
        tab="files",
        rel=rel,
        text=text or "",
        base=text_hash(text),
    )


# --- history -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CommitRow:
    rev: str
    date: str
    subject: str
    files: str
    diff_url: str
    undo: bool
    bookkeeping: bool


SHOWN_COMMITS = 30
# Bookkeeping: a commit that changed only dot-files (.clawgate-schedule.json when a reminder
# is added or fires): most commits of a busy week, and nothing the owner reads as memory.
SCANNED_COMMITS = 300


def is_bookkeeping(files: tuple[str, ...]) -> bool:
    return bool(files) and all(
        any(part.startswith(".") for part in name.split("/")) for name in files
    )


async def history(request: web.Request) -> web.Response:
    person, _ = person_of(request)
    host = panel_of(request).host
    show_all = request.query.get("all") == "1"
    empty: dict[str, Any] = {"commits": [], "folded": 0, "show_all": show_all}
    if not host.versioning_on:
        return page(
            request,
            "history.html",
            "History",
            person=person,
            tab="history",
            note="Versioning is off (no git, or versioning.enabled = false).",
            **empty,
        )
    try:
        commits = await host.history(person, limit=SHOWN_COMMITS if show_all else SCANNED_COMMITS)
    except VersioningError as exc:
        return page(
            request, "history.html", "History", person=person, tab="history", note=str(exc), **empty
        )
    rows = [
        CommitRow(
            c.rev,
            c.date,
            c.subject,
            ", ".join(c.files[:6]) + (" …" if len(c.files) > 6 else ""),
            f"/p/{quote(person, safe='')}/diff/{quote(c.rev, safe='')}",
            not (index == len(commits) - 1 and c.subject.startswith("init")),
            is_bookkeeping(c.files),
        )
        for index, c in enumerate(commits)
    ]
    folded = 0
    if not show_all:
        folded = sum(row.bookkeeping for row in rows)
        rows = [row for row in rows if not row.bookkeeping][:SHOWN_COMMITS]
    return page(
        request,
        "history.html",
        "History",
        person=person,
        tab="history",
        note="",
        commits=rows,
        folded=folded,
        show_all=show_all,
    )


async def diff(request: web.Request) -> web.Response:
    person, _ = person_of(request)
    rev = request.match_info["rev"]
    try:
        text = await panel_of(request).host.diff(person, rev)
    except VersioningError as exc:
        return (
            fragment(render("diff_fragment.html", files=[], error=str(exc)))
            if is_htmx(request)
            else error_page(request, 404, str(exc), person=person, tab="history")
        )
    files = read_diff(text)
    if is_htmx(request):
        return fragment(render("diff_fragment.html", files=files, error=""))
    return page(request, "diff.html", f"Change {rev}", person=person, tab="history", files=files)


# --- sessions ------------------------------------------------------------------------------------


async def sessions(request: web.Request) -> web.Response:
    person, workspace = person_of(request)
    found = await asyncio.to_thread(list_sessions, workspace)
    return page(request, "sessions.html", "Sessions", person=person, tab="sessions", found=found)


async def session_view(request: web.Request) -> web.Response:
    person, workspace = person_of(request)
    name = request.match_info["name"]
    try:  # the file routes' resolver: a link out of sessions/ is no session
        path = await asyncio.to_thread(session_path, workspace, name)
    except ValueError:
        raise web.HTTPNotFound(text=f"There is no session {name} of {person}.") from None
    items, skipped = await asyncio.to_thread(read_items, path)
    key = next(
        (s.key for s in await asyncio.to_thread(list_sessions, workspace) if s.name == name), ""
    )
    actions = ""
    if key and "." not in name[: -len(".jsonl")]:
        actions = f"/p/{quote(person, safe='')}/session/{quote(name)}"
    return page(
        request,
        "session.html",
        key or name,
        person=person,
        tab="sessions",
        items=items,
        skipped=skipped,
        actions=actions,
    )


async def inbox_image(request: web.Request) -> web.Response:
    """A resized image from an inbox (`inbox/.../.seen/...`, a group's too): the session
    view's thumbnails. Nothing else of the workspace is served here."""
    _, workspace = person_of(request)
    rel = request.query.get("path", "")
    parts = rel.split("/")
    if (
        INBOX_DIR not in parts
        or SEEN_DIR not in parts
        or ".." in parts
        or Path(rel).suffix.lower() not in (".jpg", ".png")
    ):
        raise web.HTTPNotFound(text="no such image")
    root = os.path.realpath(workspace)
    path = os.path.realpath(os.path.join(root, rel))
    if os.path.commonpath([root, path]) != root or not os.path.isfile(path):
        raise web.HTTPNotFound(text="no such image")
    data = await asyncio.to_thread(Path(path).read_bytes)
    kind = "image/png" if path.endswith(".png") else "image/jpeg"
    return web.Response(
        body=data, content_type=kind, headers={"Cache-Control": "private, max-age=3600"}
    )


# --- memory search -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Line:
    text: str
    number: int | None  # its line in the file, when the snippet is whole lines
    answer: bool


@dataclass(frozen=True, slots=True)
class Shown:
    path: str
    start_line: int
    end_line: int
    score: float
    source: str
    lines: list[Line]


_WORD = re.compile(r"\w+", re.UNICODE)


def answering_lines(result: Any, query: str) -> list[Line]:
    """A result's snippet as lines, the one that answers marked: the search's own best line
    when it knows it (the snippet is then the passage `start_line`..`end_line`), else the
    line sharing the most words with the question (keyword-only search)."""
    texts = str(result.snippet).split("\n")
    whole = len(texts) == result.end_line - result.start_line + 1
    best: int | None = None
    if result.line is not None and whole:
        best = result.line - result.start_line
    if best is None or not 0 <= best < len(texts):
        asked = {w.lower() for w in _WORD.findall(query) if len(w) > 1}
        scores = [len(asked & {w.lower() for w in _WORD.findall(t)}) for t in texts]
        best = max(range(len(texts)), key=lambda i: scores[i]) if any(scores) else None
    return [
        Line(t, result.start_line + i if whole else None, i == best) for i, t in enumerate(texts)
    ]


async def search(request: web.Request) -> web.Response:
    person, _ = person_of(request)
    host = panel_of(request).host
    query = request.query.get("q", "").strip()
    response, error, shown = None, "", []
    if query:
        try:
            response = await host.search(person, query)
        except PanelError as exc:
            error = str(exc)
        else:
            shown = [
                Shown(
                    r.path, r.start_line, r.end_line, r.score, r.source, answering_lines(r, query)
                )
                for r in response.results
            ]
    context: dict[str, Any] = {
        "query": query,
        "response": response,
        "error": error,
        "results": shown,
    }
    if is_htmx(request):
        return fragment(render("search_results.html", **context))
    return page(
        request,
        "search.html",
        "Memory search",
        person=person,
        tab="search",
        memory_on=host.memory_on,
        **context,
    )


# --- reminders -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Reminder:
    id: int
    text: str
    agent: bool
    next: str
    exact: str
    css: str
    repeats: str


async def reminders(
    request: web.Request, *, form: dict[str, str] | None = None, status: int = 200
) -> web.Response:
    """The person's reminders and scheduled tasks, with Cancel, and a form to add one (the
    form keeps what was typed when the time was not understood)."""
    person, _ = person_of(request)
    host = panel_of(request).host
    form = form or {}
    common: dict[str, Any] = {
        "person": person,
        "tab": "reminders",
        "status": status,
        "forms": FORMS,
        "form_when": form.get("when", ""),
        "form_text": form.get("text", ""),
        "form_agent": bool(form.get("agent")),
    }
    if not host.reminders_on:
        return page(
            request,
            "reminders.html",
            "Reminders",
            off="Reminders are off ([scheduler] enabled = false).",
            jobs=[],
            problems=[],
            zone="",
            **common,
        )
    zone = host.zone(person)
    try:
        views, problems = await host.reminders(person)
    except ScheduleFileError as exc:
        views, problems = [], [str(exc)]
    now = host.now()
    jobs = []
    for view in views:
        job, moment = view.job, view.next_run
        if view.sending:
            nxt, exact, css = "sending now", "", "ok"
        elif moment is None:
            nxt, exact, css = "no further run", "", "mute"
        elif moment <= now:
            nxt, exact, css = (
                f"overdue ({from_now(moment, now)})",
                when_words(moment, zone),
                "warn",
            )
        else:
            nxt, exact, css = from_now(moment, now), when_words(moment, zone), ""
        jobs.append(
            Reminder(
                job.id,
                job.text,
                job.kind == "agent",
                nxt,
                exact,
                css,
                job.when if job.recurring else "once",
            )
        )
    return page(
        request,
        "reminders.html",
        "Reminders",
        off="",
        jobs=jobs,
        problems=problems,
        zone=zone.key,
        **common,
    )


# --- heartbeat -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Task:
    name: str
    every: str
    prompt: str
    last: Any


async def heartbeat(request: web.Request) -> web.Response:
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
    if policy.every is None:
        next_beat = "never (heartbeats are off for this person)"
    elif state.next_beat_at is None:
        next_beat = "not planned yet (the timer plans it once the gateway runs)"
    else:
        next_beat = when(state.next_beat_at)
    return page(
        request,
        "heartbeat.html",
        "Heartbeat",
        person=person,
        tab="heartbeat",
        policy=policy.describe(),
        next_beat=next_beat,
        last_beat=state.last_beat_at,
        last_status=state.last_status,
        last_reason=state.last_reason,
        status_css={"error": "bad", "capped": "warn", "alert": "ok"}.get(state.last_status, ""),
        used=used,
        cap=cap,
        share=f" ({used / cap:.0%})" if cap else "",
        checklist_html=None if checklist.body_empty else markdown(checklist.body),
        tasks=[
            Task(t.name, str(t.every), t.prompt, state.task_runs.get(t.name))
            for t in checklist.tasks
        ],
        problems=checklist.problems,
        replies=await asyncio.to_thread(_heartbeat_replies, workspace, person),
    )


def _heartbeat_replies(workspace: Path, person: str, count: int = 5) -> list[tuple[str, str]]:
    """The model's last answers in the heartbeat's own transcript (HEARTBEAT_OK included:
    that is what "nothing to report" looks like)."""
    try:
        path = session_path(
            workspace, transcript_path(workspace, heartbeat_session_key(person)).name
        )
    except ValueError:
        return []
    items, _ = read_items(path, limit=200)
    answers = [i for i in items if i.kind == "assistant" and i.text][-count:]
    return [(i.ts, i.text[:500]) for i in reversed(answers)]


# --- usage ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CapRow:
    period: str
    used: str
    limit: str
    share: str
    css: str


async def usage(request: web.Request) -> web.Response:
    """What the person's turns used and cost (gateway/stores/usage.py), and their caps."""
    from datetime import timedelta

    from gateway.pipeline.usage_report import money
    from gateway.stores.usage import Totals

    person, _ = person_of(request)
    host = panel_of(request).host
    ledger = host.usage
    periods = ledger.periods()

    def row(label: str, t: Totals) -> tuple[str, ...]:
        return (
            label,
            f"{t.calls:,}",
            f"{t.input:,}",
            f"{t.output:,}",
            f"{t.cache_read:,}",
            f"{t.cache_write:,}",
            f"{t.cache_share:.0%}",
            money(t.cost),
        )

    spans = [("Today", periods.today), ("This week", periods.week), ("This month", periods.month)]
    totals = [row(label, await ledger.total(person, since)) for label, since in spans]
    kinds = [
        row(kind, t) for kind, t in (await ledger.grouped("kind", person, periods.month)).items()
    ]
    models = [
        row(model + ("" if ledger.prices.known(model) else " (no price: $0)"), t)
        for model, t in (await ledger.grouped("model", person, periods.month)).items()
    ]
    first = periods.today - timedelta(days=13)
    daily = await ledger.grouped("day", person, first)
    days = [
        (day.isoformat(), daily.get(day.isoformat(), Totals()).cost)
        for day in (first + timedelta(days=n) for n in range(14))
    ]
    caps = [
        CapRow(
            s.cap.period,
            s.cap.show(s.used),
            s.cap.show(s.cap.limit),
            f"{s.share:.0%}",
            "bad" if s.reached else "warn" if s.share >= 0.8 else "",
        )
        for s in await host.budget_status(person)
    ]
    chart = bar_chart(days, "Cost per day (US$)") if any(v for _, v in days) else None
    return page(
        request,
        "usage.html",
        "Usage",
        person=person,
        tab="usage",
        heads=["", "Calls", "In", "Out", "Cache read", "Cache write", "From cache", "Cost"],
        spans=totals,
        kinds=kinds,
        models=models,
        chart=chart,
        caps=caps,
    )


# --- commands ------------------------------------------------------------------------------------


async def commands(request: web.Request) -> web.Response:
    """The person's commands (the exec tool): each run with who let it run, its exit status,
    duration and output size; and the requests still waiting for the owner."""
    person, _ = person_of(request)
    host = panel_of(request).host
    runs, pending = await host.command_runs(person)
    rows = [
        (
            when(r.at),
            r.command,
            r.cwd,
            "yes" if r.network else "no",
            r.approved_by,
            "none" if r.exit_code is None else str(r.exit_code),
            r.ended,
            f"{r.duration:.2f} s",
            f"{r.bytes_out:,}",
        )
        for r in runs
    ]
    waiting = [(a.code, a.command, a.cwd, when(a.expires_at)) for a in pending]
    return page(
        request,
        "commands.html",
        "Commands",
        person=person,
        tab="commands",
        rows=rows,
        waiting=waiting,
    )


# --- metrics -------------------------------------------------------------------------------------


async def metrics(request: web.Request) -> web.Response:
    person, workspace = person_of(request)
    host = panel_of(request).host
    today = host.now().astimezone(UTC).date()
    days = await asyncio.to_thread(daily_figures, workspace, today)
    charts = [
        bar_chart([(day, float(f.turns)) for day, f in days.items()], "Turns per day"),
        bar_chart(
            [(day, f.latency_p50) for day, f in days.items()], "Reply latency, median (s)", " s"
        ),
        bar_chart([(day, float(f.tokens)) for day, f in days.items()], "Tokens per day (in + out)"),
    ]
    if not any(f.turns or f.tokens for f in days.values()):
        charts = []
    counters = [
        (title, labels, value)
        for title, values in host.counters().items()
        for labels, value in values.items()
    ]
    return page(
        request,
        "metrics.html",
        "Metrics",
        person=person,
        tab="metrics",
        charts=charts,
        counters=counters,
    )
