"""HTML building blocks: escaping, the page layout, Markdown rendering, small SVG charts.

No template engine: f-strings with `esc()` on every value that came from a file, a person or
the network. Markdown is rendered by markdown-it with raw HTML turned off, so a memory file
cannot inject markup or script into the owner's browser (and the CSP forbids inline script
anyway).
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from importlib import resources
from urllib.parse import quote, urlencode

from markdown_it import MarkdownIt

_MD = MarkdownIt("commonmark", {"html": False, "linkify": False}).enable("table")

# Inlined into each page: the login page needs it before any session exists.
CSS = (resources.files("gateway.panel") / "static" / "panel.css").read_text(encoding="utf-8")

PERSON_TABS = (("files", "Files"), ("history", "History"), ("sessions", "Sessions"),
               ("search", "Search"), ("heartbeat", "Heartbeat"), ("usage", "Usage"),
               ("metrics", "Metrics"))


def esc(value: object) -> str:
    return html.escape(str(value), quote=True)


def url(base: str, **query: object) -> str:
    shown = {k: v for k, v in query.items() if v not in (None, "")}
    return esc(base + ("?" + urlencode(shown) if shown else ""))


def person_url(person: str, tab: str = "files") -> str:
    return f"/p/{quote(person, safe='')}/{tab}"


def when(moment: float | str | datetime | None) -> str:
    if moment is None or moment == "":
        return "never"
    if isinstance(moment, (int, float)):
        moment = datetime.fromtimestamp(moment, UTC)
    if isinstance(moment, str):
        try:
            moment = datetime.fromisoformat(moment)
        except ValueError:
            return esc(moment)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return esc(moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC"))


_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)


def markdown(text: str) -> str:
    """Rendered Markdown; HTML comments (the templates' guidance notes) are left out of the
    view, since raw HTML is off and they would show as text. The editor keeps them."""
    return '<div class="md">' + _MD.render(_COMMENT.sub("", text)) + "</div>"


def csrf_field(token: str) -> str:
    return f'<input type="hidden" name="csrf" value="{esc(token)}">'


def button_form(action: str, label: str, csrf: str, *, fields: dict[str, str] | None = None,
                kind: str = "") -> str:
    hidden = "".join(f'<input type="hidden" name="{esc(k)}" value="{esc(v)}">'
                     for k, v in (fields or {}).items())
    css = f' class="{esc(kind)}"' if kind else ""
    return (f'<form class="inline" method="post" action="{esc(action)}">'
            f'{csrf_field(csrf)}{hidden}<button type="submit"{css}>{esc(label)}</button></form>')


def table(headers: Sequence[str], rows: Iterable[Sequence[str]], empty: str = "nothing") -> str:
    body = "".join("<tr>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>" for row in rows)
    if not body:
        return f'<p class="mute">{esc(empty)}</p>'
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def diff_block(text: str) -> str:
    lines = []
    for line in text.splitlines():
        css = ("add" if line.startswith("+") and not line.startswith("+++") else
               "del" if line.startswith("-") and not line.startswith("---") else
               "hunk" if line.startswith("@@") else "")
        lines.append(f'<span class="{css}">{esc(line)}</span>' if css else esc(line))
    return '<pre class="diff">' + "\n".join(lines) + "</pre>"


def bar_chart(points: Sequence[tuple[str, float]], title: str, unit: str = "") -> str:
    """A small inline SVG bar chart (no script, scales with the page)."""
    width, height, pad, label_h = 360, 150, 4, 28
    peak = max((v for _, v in points), default=0) or 1
    slot = (width - 2 * pad) / max(1, len(points))
    bars = []
    for index, (label, value) in enumerate(points):
        h = (height - label_h - 14) * value / peak
        x = pad + index * slot
        y = height - label_h - h
        shown = f"{value:,.0f}" if value >= 10 or value == int(value) else f"{value:.2f}"
        bars.append(
            f'<rect x="{x + 2:.1f}" y="{y:.1f}" width="{max(1.0, slot - 4):.1f}" '
            f'height="{h:.1f}"><title>{esc(label)}: {esc(shown)}{esc(unit)}</title></rect>'
            f'<text x="{x + slot / 2:.1f}" y="{y - 2:.1f}" text-anchor="middle">{esc(shown)}</text>'
            f'<text x="{x + slot / 2:.1f}" y="{height - label_h + 12:.1f}" '
            f'text-anchor="middle">{esc(label[5:])}</text>')
    return (f'<figure><figcaption>{esc(title)}</figcaption><svg class="chart" role="img" '
            f'aria-label="{esc(title)}" viewBox="0 0 {width} {height}">{"".join(bars)}</svg>'
            f"</figure>")


def layout(title: str, body: str, *, csrf: str = "", person: str = "", tab: str = "",
           flash: Sequence[tuple[str, str]] = (), logged_in: bool = True) -> str:
    nav = ""
    if person:
        links = "".join(
            f'<a href="{esc(person_url(person, name))}"{" class=on" if name == tab else ""}>'
            f"{esc(label)}</a>" for name, label in PERSON_TABS)
        nav = f'<nav class="person" aria-label="{esc(person)}">{links}</nav>'
    notes = "".join(f'<div class="flash {esc(kind)}" role="status">{esc(text)}</div>'
                    for kind, text in flash)
    logout = ""
    if logged_in:
        logout = (f'<form method="post" action="/logout">{csrf_field(csrf)}'
                  '<button class="quiet" type="submit">Log out</button></form>')
    script = '<script src="/static/htmx.min.js" defer></script>' if logged_in else ""
    heading = f"{esc(person)} · {esc(title)}" if person else esc(title)
    return (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        f"<title>{heading} · clawgate</title><style>{CSS}</style>{script}</head><body>"
        f'<header><a class="brand" href="/">clawgate</a><a href="/">Overview</a>{logout}</header>'
        f"<main>{notes}<h1>{heading}</h1>{nav}{body}</main></body></html>"
    )
