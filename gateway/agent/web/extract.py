"""A fetched page as readable Markdown: the article, not the menus, scripts and footers.

HTML goes through trafilatura (main-content extraction, links and tables kept, Markdown out);
when it finds no main content (a tiny page, a link list), its plain-text fallback keeps whatever
text there is. Plain text, Markdown, CSV and JSON are passed through as they are. trafilatura is
imported on first use: it costs about half a second, which a gateway that never fetches a page
should not pay at start.

This is CPU work on untrusted input: callers run it in a worker thread (`asyncio.to_thread`)
so one big page does not stall other people's turns.
"""

from __future__ import annotations

import codecs
import html as html_lib
import re
from dataclasses import dataclass

from gateway.agent.web.fetch import FetchedPage

__all__ = ["Extracted", "page_to_markdown"]

HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})


@dataclass(frozen=True, slots=True)
class Extracted:
    title: str
    text: str  # Markdown (HTML) or the text as sent


def decode(body: bytes, charset: str | None) -> str:
    """Bytes to text with the declared charset if Python knows it, else UTF-8; never raises."""
    encoding = "utf-8"
    if charset:
        try:
            encoding = codecs.lookup(charset).name
        except LookupError:
            encoding = "utf-8"
    return body.decode(encoding, errors="replace")


def page_to_markdown(page: FetchedPage) -> Extracted:
    if page.content_type in HTML_TYPES or (not page.content_type and _looks_like_html(page.body)):
        return _html(page)
    return Extracted("", decode(page.body, page.charset).replace("\x00", "").strip())


def _looks_like_html(body: bytes) -> bool:
    """For a page sent without a content type."""
    head = body[:2048].lstrip().lower()
    return head.startswith((b"<!doctype html", b"<html", b"<head", b"<body")) or b"<html" in head


def _html(page: FetchedPage) -> Extracted:
    import trafilatura

    html = decode(page.body, page.charset) if page.charset else page.body
    # No metadata: trafilatura's metadata pass looks for dates all over the page and costs
    # several times the extraction itself (100 ms on a 70 KB news page); the title is enough.
    text = (
        trafilatura.extract(
            html,
            url=page.url,
            output_format="markdown",
            include_links=True,
            include_tables=True,
            include_comments=False,
            include_formatting=True,
            favor_recall=True,
        )
        or ""
    )
    if not text.strip():
        text = trafilatura.html2txt(html) or ""
    return Extracted(_title(page.body, page.charset), text.strip())


_TITLE = re.compile(rb"<title[^>]*>(.*?)</title\s*>", re.IGNORECASE | re.DOTALL)


def _title(body: bytes, charset: str | None) -> str:
    """The page's <title>, from its first 64 KiB (where the head is)."""
    found = _TITLE.search(body[:65_536])
    if found is None:
        return ""
    return " ".join(html_lib.unescape(decode(found.group(1), charset)).split())[:300]
