"""Markdown (as models write it) to the small HTML subset Telegram accepts.

Telegram's HTML mode knows <b>, <i>, <s>, <u>, <code>, <pre>, <a href>, <blockquote> and
rejects anything else, including unbalanced tags. This converter covers what models commonly
produce: fenced code, inline code, bold, italic, strikethrough, links, headings, quotes and
bullets. Whatever it gets wrong, Telegram rejects and the channel resends as plain text.
"""

from __future__ import annotations

import bisect
import html
import re
from dataclasses import dataclass

from channels.chunking import fences

_INLINE_CODE = re.compile(r"`([^`\n]+)`")
_HEADING_PREFIX = re.compile(r"#{1,6}\s+")
_BULLET = re.compile(r"^(\s*)[-*+]\s+")
_PLACEHOLDER = "\x00{}\x00"
_PLACEHOLDERS = re.compile(r"\x00(\d+)\x00")
_LINK_OPEN = re.compile(r"\[")
_LINK_TEXT_END = re.compile(r"[\]\n]")
_URL_END = re.compile(r"[)\s]")
_URL_SCHEME = re.compile(r"https?://")
_NEWLINE = re.compile(r"\n")


@dataclass(frozen=True, slots=True)
class _Span:
    """One kind of paired delimiter, as the positions where it may open and close.

    Both patterns match one character with fixed-size lookarounds, so finding every candidate
    is one linear scan; whether a position may open or close depends only on its neighbours,
    never on the other end of the span. That is what makes pairing linear (see `_pair`).
    """

    opener: re.Pattern[str]
    closer: re.Pattern[str]
    width: int  # length of the delimiter ("**" is 2)


# The same rules the converter always had, written as open/close conditions. Each pattern
# starts with the delimiter's first character (so the scan skips ahead to it) and consumes only
# that character (so overlapping candidates, as in "***", are all found).
# **b** and __b__: the content starts and ends with a non-space.
_BOLD = (
    _Span(re.compile(r"\*(?=\*\S)"), re.compile(r"\*(?=\*)(?<=\S\*)"), 2),
    _Span(re.compile(r"_(?=_\S)"), re.compile(r"_(?=_)(?<=\S_)"), 2),
)
# *i*: not inside a word or a run of stars; _i_: not inside a word (snake_case stays).
_ITALIC = (
    _Span(re.compile(r"\*(?<![*\w]\*)(?=[^\s*])"), re.compile(r"\*(?<=[^\s*]\*)(?![*\w])"), 1),
    _Span(re.compile(r"_(?<!\w_)(?=\S)"), re.compile(r"_(?<=\S_)(?!\w)"), 1),
)
_STRIKE = (_Span(re.compile(r"~(?=~\S)"), re.compile(r"~(?=~)(?<=\S~)"), 2),)


def markdown_to_html(markdown: str) -> str:
    """Convert one message (already chunked, fences balanced) to Telegram HTML."""
    out: list[str] = []
    pos = 0
    for block in fences(markdown):
        out.append(_text_to_html(markdown[pos : block.open_start]))
        code = markdown[block.open_end : block.close_start]
        language = block.opener.lstrip("`~ ").split(" ")[0]
        escaped = html.escape(code.removesuffix("\n"), quote=False)
        if language:
            lang = html.escape(language)
            out.append(f'<pre><code class="language-{lang}">{escaped}</code></pre>')
        else:
            out.append(f"<pre>{escaped}</pre>")
        pos = block.close_end
        out.append("\n" if markdown[block.close_start : block.close_end].endswith("\n") else "")
    out.append(_text_to_html(markdown[pos:]))
    return "".join(out)


def _text_to_html(text: str) -> str:
    lines: list[str] = []
    quote: list[str] = []
    for line in text.split("\n"):
        if line.startswith(">"):
            quote.append(_inline(line[1:].removeprefix(" ")))
            continue
        if quote:
            lines.append("<blockquote>" + "\n".join(quote) + "</blockquote>")
            quote = []
        heading = _heading(line)
        if heading is not None:
            lines.append(f"<b>{_inline(heading)}</b>")
            continue
        bullet = _BULLET.match(line)
        if bullet:
            line = bullet.group(1) + "• " + line[bullet.end() :]
        lines.append(_inline(line))
    if quote:
        lines.append("<blockquote>" + "\n".join(quote) + "</blockquote>")
    return "\n".join(lines)


def _heading(line: str) -> str | None:
    """The title of an ATX heading line ("## Title ##"), else None. String operations, not a
    regex with a lazy group before optional trailing runs (quadratic on long space runs)."""
    prefix = _HEADING_PREFIX.match(line)
    if prefix is None:
        return None
    return line[prefix.end() :].rstrip().rstrip("#").rstrip()


def _inline(text: str) -> str:
    """Inline Markdown of one line to HTML, in time linear in its length.

    The steps and their order are the converter's rules: inline code is set aside first (its
    content is never formatted), the rest is escaped, then links, bold, italic and
    strikethrough each take one left-to-right pass. A span opens at the leftmost candidate and
    closes at the nearest closer after it on the same line; text in a span is formatted by the
    later passes, not by its own.
    """
    codes: list[str] = []

    def keep_code(match: re.Match[str]) -> str:
        codes.append(f"<code>{html.escape(match.group(1), quote=False)}</code>")
        return _PLACEHOLDER.format(len(codes) - 1)

    text = _INLINE_CODE.sub(keep_code, text)
    text = html.escape(text, quote=False)
    # The text is escaped already, so the URL's "&" is "&amp;" as an attribute needs.
    text = _links(text)
    text = _pair(text, _BOLD, "b")
    text = _pair(text, _ITALIC, "i")
    text = _pair(text, _STRIKE, "s")
    if codes:
        text = _PLACEHOLDERS.sub(
            lambda m: codes[int(m.group(1))] if int(m.group(1)) < len(codes) else m.group(0), text
        )
    return text


def _pair(text: str, kinds: tuple[_Span, ...], tag: str) -> str:
    """Wrap each delimited span in <tag>: one sweep over the candidate openers.

    For an opener at i the span closes at the first closer at or after i + width + 1 (at least
    one character inside); it fails if a newline comes first. Openers are visited in order and
    the closer index only moves forward, so the whole pass is O(len(text)).
    """
    starts = sorted(
        (m.start(), kind) for kind, span in enumerate(kinds) for m in span.opener.finditer(text)
    )
    if not starts:
        return text
    closers = [[m.start() for m in span.closer.finditer(text)] for span in kinds]
    nexts = [0] * len(kinds)
    newlines = [m.start() for m in _NEWLINE.finditer(text)]
    line = 0
    out: list[str] = []
    pos = 0
    for i, kind in starts:
        if i < pos:
            continue
        width = kinds[kind].width
        found = closers[kind]
        k = nexts[kind]
        while k < len(found) and found[k] < i + width + 1:
            k += 1
        nexts[kind] = k
        if k == len(found):
            continue
        j = found[k]
        while line < len(newlines) and newlines[line] < i:
            line += 1
        if line < len(newlines) and newlines[line] < j:
            continue
        out.append(text[pos:i])
        out.append(f"<{tag}>{text[i + width : j]}</{tag}>")
        pos = j + width
    out.append(text[pos:])
    return "".join(out)


def _links(text: str) -> str:
    """[text](http(s)://url) to <a href>. The link text runs to the first "]" (no newline)
    and the URL to the first ")" or space; both are looked up, never scanned again, so a line
    of unclosed "[" stays linear (O(n log n) with the lookups)."""
    opens = [m.start() for m in _LINK_OPEN.finditer(text)]
    if not opens:
        return text
    text_ends = [m.start() for m in _LINK_TEXT_END.finditer(text)]
    url_ends = [m.start() for m in _URL_END.finditer(text)]
    out: list[str] = []
    pos = 0
    for i in opens:
        if i < pos:
            continue
        k = _first_at_or_after(text_ends, i + 1)
        if k is None or k < i + 2 or text[k] != "]" or not text.startswith("(", k + 1):
            continue
        scheme = _URL_SCHEME.match(text, k + 2)
        if scheme is None:
            continue
        end = _first_at_or_after(url_ends, scheme.end())
        if end is None or end == scheme.end() or text[end] != ")":
            continue
        out.append(text[pos:i])
        out.append(f'<a href="{text[k + 2 : end]}">{text[i + 1 : k]}</a>')
        pos = end + 1
    out.append(text[pos:])
    return "".join(out)


def _first_at_or_after(positions: list[int], start: int) -> int | None:
    index = bisect.bisect_left(positions, start)
    return positions[index] if index < len(positions) else None
