"""What the templates need besides the data: URLs, times in words, Markdown, chart geometry.

No HTML is built here by string formatting: pages are Jinja2 templates with autoescaping on
(gateway/panel/render.py), so every value from a file, a person or the network is escaped by
construction. The one exception is `markdown()`: markdown-it renders a workspace file with raw
HTML turned off (a memory file cannot inject markup or script; the CSP forbids inline script
anyway) and marks its output safe, in this one place.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from urllib.parse import quote, urlencode

from markdown_it import MarkdownIt
from markupsafe import Markup

_MD = MarkdownIt("commonmark", {"html": False, "linkify": False}).enable("table")

PERSON_TABS = (
    ("files", "Files"),
    ("history", "History"),
    ("sessions", "Sessions"),
    ("search", "Search"),
    ("reminders", "Reminders"),
    ("heartbeat", "Heartbeat"),
    ("usage", "Usage"),
    ("commands", "Commands"),
    ("tasks", "Tasks"),
    ("metrics", "Metrics"),
)


def url(base: str, **query: object) -> str:
    """`base` with a query string (empty values left out). Not escaped: the template does."""
    shown = {k: v for k, v in query.items() if v not in (None, "")}
    return base + ("?" + urlencode(shown) if shown else "")


def person_url(person: str, tab: str = "files") -> str:
    return f"/p/{quote(person, safe='')}/{tab}"


def when(moment: float | str | datetime | None) -> str:
    """A moment as 'YYYY-MM-DD HH:MM UTC' ('never' for none; text that is no time, as is)."""
    if moment is None or moment == "":
        return "never"
    if isinstance(moment, (int, float)):
        moment = datetime.fromtimestamp(moment, UTC)
    if isinstance(moment, str):
        try:
            moment = datetime.fromisoformat(moment)
        except ValueError:
            return str(moment)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)


def markdown(text: str) -> Markup:
    """Rendered Markdown, raw HTML off; HTML comments (the templates' guidance notes) are left
    out of the view, since raw HTML is off and they would show as text. The editor keeps them.
    """
    return Markup(_MD.render(_COMMENT.sub("", text)))  # markdown-it, raw HTML off


# --- bar charts ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Bar:
    x: float
    y: float
    width: float
    height: float
    label: str  # the full label, for the tooltip
    shown: str  # the value as in the tooltip
    value: str  # the value printed above the bar ("" when it would not fit)
    tick: str  # the label under the bar ("" when it would crowd its neighbours)
    centre: float
    value_x: float  # the printed value's and the tick's centres: moved inwards at the
    tick_x: float  # edges so that neither is cut off


@dataclass(frozen=True, slots=True)
class Chart:
    title: str
    unit: str
    width: int
    height: int
    bars: list[Bar]
    baseline: float  # y of the bars' foot
    tick_y: float  # y of the labels under the bars


CHART_WIDTH, CHART_HEIGHT = 360, 160
FONT_PX = 11  # svg.chart text in panel.css
CHAR_PX = 6.8  # the width of one digit at FONT_PX, with room to spare
TOP_ROOM = FONT_PX + 4  # the highest bar's value is printed above it, inside the picture
TICK_ROOM = FONT_PX + 8


def bar_chart(points: Sequence[tuple[str, float]], title: str, unit: str = "") -> Chart:
    """A small SVG bar chart's geometry (the template draws it; no script).

    Labels under the bars are dates shortened to MM-DD; when there are more bars than fit
    side by side, only every n-th gets its label (the last always does), so no two overlap.
    The tallest bar leaves room above it for its value."""
    pad = 4
    peak = max((v for _, v in points), default=0) or 1
    count = max(1, len(points))
    slot = (CHART_WIDTH - 2 * pad) / count
    baseline = CHART_HEIGHT - TICK_ROOM
    usable = baseline - TOP_ROOM
    ticks = [label[5:] if len(label) == 10 and label[4] == "-" else label for label, _ in points]
    widest = max((len(t) for t in ticks), default=1) * CHAR_PX + 4
    every = max(1, -(-int(widest) // max(1, int(slot))))  # ceil(widest / slot)
    fits = all(len(_number(v)) * CHAR_PX <= slot for _, v in points)
    top = max(range(len(points)), key=lambda i: points[i][1], default=-1)
    bars = []
    for index, ((label, value), tick) in enumerate(zip(points, ticks, strict=True)):
        height = usable * max(0.0, value) / peak
        x = pad + index * slot
        shown = _number(value)
        printed = shown if value > 0 and (fits or index == top) else ""
        labelled = (count - 1 - index) % every == 0
        centre = x + slot / 2
        tick = tick if labelled else ""
        bars.append(
            Bar(
                round(x + 1, 1),
                round(baseline - height, 1),
                round(max(1.0, slot - 2), 1),
                round(height, 1),
                label,
                shown,
                printed,
                tick,
                round(centre, 1),
                _inside(centre, printed),
                _inside(centre, tick),
            )
        )
    return Chart(title, unit, CHART_WIDTH, CHART_HEIGHT, bars, baseline, baseline + FONT_PX + 4)


def _number(value: float) -> str:
    return f"{value:,.0f}" if value >= 10 or value == int(value) else f"{value:.2f}"


def _inside(centre: float, text: str) -> float:
    """`centre` moved so that `text`, centred there, stays inside the chart."""
    half = len(text) * CHAR_PX / 2
    return round(min(max(centre, half + 1), CHART_WIDTH - half - 1), 1)
