"""Markdown (as models write it) to the small HTML subset Telegram accepts.

Telegram's HTML mode knows <b>, <i>, <s>, <u>, <code>, <pre>, <a href>, <blockquote> and
rejects anything else, including unbalanced tags. This converter covers what models commonly
produce: fenced code, inline code, bold, italic, strikethrough, links, headings, quotes and
bullets. Whatever it gets wrong, Telegram rejects and the channel resends as plain text.
"""

from __future__ import annotations

import html
import re

from channels.chunking import fences

_INLINE_CODE = re.compile(r"`([^`\n]+)`")
_LINK = re.compile(r"\[([^\]\n]+)\]\((https?://[^)\s]+)\)")
_BOLD = re.compile(r"\*\*(?=\S)(.+?)(?<=\S)\*\*|__(?=\S)(.+?)(?<=\S)__")
_ITALIC = re.compile(
    r"(?<![*\w])\*(?=[^\s*])(.+?)(?<=[^\s*])\*(?![*\w])|(?<!\w)_(?=\S)(.+?)(?<=\S)_(?!\w)"
)
_STRIKE = re.compile(r"~~(?=\S)(.+?)(?<=\S)~~")
_HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$")
_BULLET = re.compile(r"^(\s*)[-*+]\s+")
_PLACEHOLDER = "\x00{}\x00"


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
        heading = _HEADING.match(line)
        if heading:
            lines.append(f"<b>{_inline(heading.group(1))}</b>")
            continue
        bullet = _BULLET.match(line)
        if bullet:
            line = bullet.group(1) + "• " + line[bullet.end() :]
        lines.append(_inline(line))
    if quote:
        lines.append("<blockquote>" + "\n".join(quote) + "</blockquote>")
    return "\n".join(lines)


def _inline(text: str) -> str:
    codes: list[str] = []

    def keep_code(match: re.Match[str]) -> str:
        codes.append(f"<code>{html.escape(match.group(1), quote=False)}</code>")
        return _PLACEHOLDER.format(len(codes) - 1)

    text = _INLINE_CODE.sub(keep_code, text)
    text = html.escape(text, quote=False)
    # The text is escaped already, so the URL's "&" is "&amp;" as an attribute needs.
    text = _LINK.sub(lambda m: f'<a href="{m.group(2)}">{m.group(1)}</a>', text)
    text = _BOLD.sub(lambda m: f"<b>{m.group(1) or m.group(2)}</b>", text)
    text = _ITALIC.sub(lambda m: f"<i>{m.group(1) or m.group(2)}</i>", text)
    text = _STRIKE.sub(lambda m: f"<s>{m.group(1)}</s>", text)
    for index, code in enumerate(codes):
        text = text.replace(_PLACEHOLDER.format(index), code)
    return text
