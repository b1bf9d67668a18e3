"""What a reply sounds like read aloud: Markdown turned into sentences a voice can say.

A reply is written to be read: code blocks, tables, links, emphasis, emoji. Read aloud, a code
block is noise and a URL is a minute of letters, so `readout` keeps the words and says what it
left out ("Code omitted.", "Table omitted."), says a link by its host ("the docs (python.org)"),
drops markup and emoji, and stops before `max_seconds` of speech, estimated from the voice's
measured characters per second. What it did not read is returned as `rest`, a suffix of the
reply itself, so the caller can send it as text (the whole text is sent anyway: nothing is only
audible).

Every function here is total: any string in (a model's output is hostile input), an answer out,
in time linear in the input. `pieces` cuts speech into parts a backend takes at once.
"""

from __future__ import annotations

import html
import re
import unicodedata
from bisect import bisect_right
from collections.abc import Callable, Iterator
from itertools import pairwise
from typing import NamedTuple
from urllib.parse import urlsplit

CODE_OMITTED = "Code omitted."
TABLE_OMITTED = "Table omitted."
MORE_IN_TEXT = "The rest is in the message."
# A part of the reply is read or left whole; a long paragraph is cut into parts this long
# (source characters) at sentence or word ends, so the cap falls near where it should.
UNIT_CHARS = 400
# A "word" longer than this (a hash, base64, a path) is not read: no one listens to it.
LONGEST_WORD = 40


class Readout(NamedTuple):
    spoken: str  # plain sentences for the voice ("" when nothing in the reply can be said)
    rest: str  # the reply's own text from where speech stopped ("" when all was read)


def readout(markdown: str, *, max_seconds: float, chars_per_second: float) -> Readout:
    """The part of `markdown` to read aloud within `max_seconds`, and the rest.

    `chars_per_second` is the voice's measured rate for plain text (pauses included). The cap
    falls between parts of the reply (a sentence, a list item, a code block), never inside a
    word; when something is left, the speech ends saying so (within the cap).
    """
    budget = max(0.0, max_seconds) * max(chars_per_second, 0.1)
    units: list[tuple[int, str]] = []
    used = 0
    for start, speech in _units(markdown, max(16, min(UNIT_CHARS, int(budget / 2)))):
        if not speech:
            continue
        used += len(speech) + (1 if units else 0)
        units.append((start, speech))
        if used > budget:
            break
    else:
        return Readout(" ".join(speech for _, speech in units), "")
    room = budget - len(MORE_IN_TEXT) - 1
    said: list[str] = []
    length = 0
    for start, speech in units:
        cost = len(speech) + (1 if said else 0)
        if length + cost > room:
            rest = markdown[start:].strip()
            return Readout(" ".join([*said, MORE_IN_TEXT]) if said else "", rest)
        said.append(speech)
        length += cost
    raise AssertionError("unreachable: the units overran the budget")


def speech_seconds(text: str, chars_per_second: float) -> float:
    """The estimate `readout` caps by: how long `text` takes to say at that rate."""
    return len(text) / max(chars_per_second, 0.1)


def to_speech(markdown: str) -> str:
    """All of `markdown` as speech, uncapped."""
    return " ".join(speech for _, speech in _units(markdown, UNIT_CHARS) if speech)


def pieces(text: str, max_chars: int) -> list[str]:
    """`text` cut into parts of at most `max_chars` characters, at sentence ends where it can,
    else after a comma, semicolon or colon, else at spaces, else anywhere: what a backend is
    given at once (an API's input limit; a local voice's working memory, which grows with the
    length of what it says in one go, with a chance to stop between parts)."""
    limit = max(1, max_chars)
    words = " ".join(text.split())
    out: list[str] = []
    while len(words) > limit:
        window = words[: limit + 1]
        cut = 0
        for boundary in (_SENTENCE_END, _CLAUSE_END):
            cut = max((m.end() for m in boundary.finditer(window) if m.end() <= limit), default=0)
            if cut:
                break
        if cut == 0:
            cut = window.rfind(" ")
        if cut <= 0:
            cut = limit
        out.append(words[:cut].strip())
        words = words[cut:].strip()
    if words:
        out.append(words)
    return [part for part in out if part]


# --- blocks: which lines are code, tables or text ---------------------------------------------

_FENCE = re.compile(r"[ \t]{0,3}(`{3,}|~{3,})")
_TABLE_DELIMITER = re.compile(r"[ \t]*\|?[ \t]*:?-{1,}:?[ \t]*(\|[ \t]*:?-{1,}:?[ \t]*)*\|?[ \t]*")
_RULE = re.compile(r"[ \t]*([-*_])([ \t]*\1){2,}[ \t]*")
_BLOCK_START = re.compile(r"[ \t]*(#{1,6}[ \t]|>|[-*+][ \t]|\d{1,9}[.)][ \t])")


def _is_table_row(line: str) -> bool:
    stripped = line.strip()
    return stripped.startswith("|") and stripped.count("|") >= 2


def _blocks(markdown: str) -> Iterator[tuple[str, int, str]]:
    """(kind, start offset, source text) for each block: "code", "table" or "line" (a line
    of text, blank lines as ""), in order."""
    lines = markdown.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))
    index = 0
    while index < len(lines):
        line = lines[index].rstrip("\r\n")
        start = offsets[index]
        fence = _FENCE.match(line)
        if fence:
            mark = fence.group(1)
            end = index + 1
            while end < len(lines):
                closing = lines[end].strip()
                end += 1
                if closing.startswith(mark[0] * len(mark)) and not closing.strip(mark[0]):
                    break
            yield "code", start, markdown[start : offsets[end]]
            index = end
            continue
        header_row = (
            "|" in line
            and index + 1 < len(lines)
            and bool(_TABLE_DELIMITER.fullmatch(lines[index + 1].rstrip("\r\n")))
            and "-" in lines[index + 1]
        )
        if header_row or _is_table_row(line):
            end = index + 1
            while end < len(lines) and "|" in lines[end] and lines[end].strip():
                end += 1
            yield "table", start, markdown[start : offsets[end]]
            index = end
            continue
        yield "line", start, line
        index += 1


def _units(markdown: str, max_chars: int) -> Iterator[tuple[int, str]]:
    """(start offset in `markdown`, speech) for each part that is read or left whole."""
    paragraph: list[tuple[int, str]] = []  # (offset, line) of the paragraph being gathered
    omitted = ""  # the last omission said, so a run of code blocks is said once

    def flush() -> Iterator[tuple[int, str]]:
        if not paragraph:
            return
        text = " ".join(line for _, line in paragraph)
        starts = []  # where each line begins in `text`
        position = 0
        for _, line in paragraph:
            starts.append(position)
            position += len(line) + 1
        parts = list(_sentences(text, max_chars))
        for number, (relative, part) in enumerate(parts):
            line_no = max(0, bisect_right(starts, relative) - 1)
            speech = _inline(part, starts_a_block=number == 0)
            if (
                number == len(parts) - 1
                and speech
                and (speech[-1].isalnum() or speech[-1] in ")\"'")
            ):
                speech += "."  # a paragraph, heading or list item ends as a sentence does
            yield paragraph[line_no][0] + relative - starts[line_no], speech
        paragraph.clear()

    for kind, start, source in _blocks(markdown):
        if kind != "line":
            yield from flush()
            said = CODE_OMITTED if kind == "code" else TABLE_OMITTED
            yield start, "" if said == omitted else said
            omitted = said
            continue
        if not source.strip() or _RULE.fullmatch(source):
            yield from flush()
            continue
        quote_goes_on = (
            source.lstrip().startswith(">")
            and bool(paragraph)
            and paragraph[0][1].lstrip().startswith(">")
        )
        if _BLOCK_START.match(source) and not quote_goes_on:
            yield from flush()
        paragraph.append((start, source))
        omitted = ""
        if _BLOCK_START.match(source) and re.match(r"[ \t]*#", source):
            yield from flush()  # a heading is its own sentence
    yield from flush()


# --- sentences --------------------------------------------------------------------------------

_SENTENCE_END = re.compile(r"[.!?…。！？]+[\"')\]]*(?=\s)")
_CLAUSE_END = re.compile(r"[,;:，；：、]+(?=\s)")
_TAG_PATTERN = r"</?[a-z][a-z0-9-]{0,30}(?:\s[^<>\n]{0,500})?/?>|<!--[\s\S]{0,2000}?-->"
_PROTECTED = re.compile(
    r"!?\[[^\]\n]{0,500}\]\([^()\s]{0,2000}(?:\s+\"[^\"\n]{0,200}\")?\)"
    r"|\[[^\]\n]{1,500}\]\[[^\]\n]{0,100}\]"
    r"|`[^`\n]{1,500}`|<[a-z][a-z0-9+.-]{1,20}:[^<>\s]{1,2000}>|" + _TAG_PATTERN,
    re.I,
)


def _sentences(text: str, max_chars: int) -> Iterator[tuple[int, str]]:
    """(offset, sentence) in `text`, never splitting a link or inline code where it can help
    it (nor after a list item's number), each at most `max_chars` long."""
    protected = [(m.start(), m.end()) for m in _PROTECTED.finditer(text)]
    marker = _LINE_MARKERS.match(text)
    floor = marker.end() if marker else 0  # "1. " stays with its item
    if marker:
        protected.insert(0, (0, marker.end()))
    protected_starts = [start for start, _ in protected]

    def inside(position: int) -> bool:
        index = bisect_right(protected_starts, position) - 1
        return index >= 0 and protected[index][0] < position < protected[index][1]

    cuts = [0]
    cuts.extend(m.end() for m in _SENTENCE_END.finditer(text) if not inside(m.end()))
    cuts.append(len(text))
    for begin, end in pairwise(cuts):
        start = begin
        while end - start > max_chars:
            cut = _space_before(text, max(start, floor), start + max_chars, inside)
            if cut >= end:
                break
            if text[start:cut].strip():
                yield start + _lead(text[start:cut]), text[start:cut].strip()
            start = cut
        if text[start:end].strip():
            yield start + _lead(text[start:end]), text[start:end].strip()


def _space_before(text: str, start: int, limit: int, inside: Callable[[int], bool]) -> int:
    """Where to cut `text` near `limit`: the last space before it outside a link or tag, else
    the first such space after it, else the end (a word is never cut: one too long to read is
    dropped whole, and a link longer than a part stays one part)."""
    space = text.rfind(" ", start + 1, limit)
    while space > start:
        if not inside(space):
            return space
        space = text.rfind(" ", start + 1, space)
    space = text.find(" ", limit)
    while space > 0:
        if not inside(space):
            return space
        space = text.find(" ", space + 1)
    return len(text)


def _lead(text: str) -> int:
    return len(text) - len(text.lstrip())


# --- inline: one sentence of Markdown to plain words ------------------------------------------

_LINE_MARKERS = re.compile(
    r"(?m)^[ \t]*(?:#{1,6}[ \t]+|(?:>[ \t]?)+"
    r"|[-*+][ \t]+(?:\[[ xX]\][ \t]+)?|\d{1,9}[.)][ \t]+)"
)
_IMAGE = re.compile(r"!\[([^\]\n]{0,500})\]\([^()\s]{0,2000}(?:\s+\"[^\"\n]{0,200}\")?\)")
_LINK = re.compile(r"\[([^\]\n]{0,500})\]\(([^()\s]{0,2000})(?:\s+\"[^\"\n]{0,200}\")?\)")
_REFERENCE = re.compile(r"\[([^\]\n]{1,500})\]\[[^\]\n]{0,100}\]")
_AUTOLINK = re.compile(r"<([a-z][a-z0-9+.-]{1,20}:[^<>\s]{1,2000})>", re.I)
_BARE_URL = re.compile(r"\b(?:https?://|www\.)[^\s<>()\[\]]{1,2000}", re.I)
_ANY_URL = re.compile(r"[^\s/]{0,40}:/+\S{0,2000}")  # what is left that looks like one
_INLINE_CODE = re.compile(r"`+([^`\n]{0,500})`+")
_TAG = re.compile(_TAG_PATTERN, re.I)
_MARKUP = re.compile(r"[*`~#|<>\[\]{}\\^]+")
_LONG_WORD = re.compile(rf"[^\s.,;:!?]{{{LONGEST_WORD + 1},}}")
_SPACE_BEFORE_PUNCTUATION = re.compile(r"\s+([,.;:!?])")
_KEPT_SYMBOLS = frozenset("°©®™℃℉№")


def _inline(sentence: str, *, starts_a_block: bool) -> str:
    text = _LINE_MARKERS.sub("", sentence) if starts_a_block else sentence
    text = _IMAGE.sub(lambda m: f" {m.group(1)} ", text)
    text = _LINK.sub(_say_link, text)
    text = _REFERENCE.sub(r"\1", text)
    text = _AUTOLINK.sub(lambda m: f" {_host(m.group(1))} ", text)
    text = _BARE_URL.sub(lambda m: f" {_host(m.group(0))} ", text)
    text = _ANY_URL.sub(lambda m: f" {_host(m.group(0))} ", text)
    text = _INLINE_CODE.sub(lambda m: f" {_short_code(m.group(1))} ", text)
    text = _TAG.sub(" ", text)
    text = html.unescape(text)
    text = _without_emoji(text)
    text = re.sub(r"(?<=\w)_(?=\w)", " ", text)  # snake_case reads as words
    text = text.replace("_", "")
    text = _MARKUP.sub(" ", text)
    text = _LONG_WORD.sub(" ", text)
    text = re.sub(r"\(\s*\)", " ", text)
    text = " ".join(text.split())
    text = _SPACE_BEFORE_PUNCTUATION.sub(r"\1", text)
    text = re.sub(r"\(\s+", "(", re.sub(r"\s+\)", ")", text))
    return text.lstrip(" ,;:.").rstrip(" ,;")


def _say_link(match: re.Match[str]) -> str:
    label, url = match.group(1).strip(), match.group(2)
    host = _host(url)
    label_host = _host(label) if _BARE_URL.fullmatch(label) else ""
    if not label or label_host:
        return f" {label_host or host} "
    if host not in ("a link", "an email address"):
        return f" {label} ({host}) "
    return f" {label} "


def _host(url: str) -> str:
    """A link said by its host ("docs.python.org"); "a link" when it has none."""
    candidate = url.strip()
    if candidate.lower().startswith("www."):
        candidate = "http://" + candidate
    try:
        parts = urlsplit(candidate)
        host = parts.hostname or ""
        scheme = parts.scheme.lower()
    except ValueError:
        return "a link"
    if scheme == "mailto":
        return "an email address"
    host = host.removeprefix("www.")
    if not host or len(host) > 100 or not re.fullmatch(r"[\w.-]+", host):
        return "a link"
    return host


def _short_code(code: str) -> str:
    code = code.strip()
    if len(code) > LONGEST_WORD or not code:
        return "code" if code else ""
    return code


def _without_emoji(text: str) -> str:
    kept = []
    for char in text:
        category = unicodedata.category(char)
        if char in _KEPT_SYMBOLS:
            kept.append(char)
        elif category == "So" or category in ("Cs", "Co", "Cn", "Cf", "Me"):
            continue
        elif category == "Mn" and ("\ufe00" <= char <= "\ufe0f"):
            continue  # variation selectors (emoji presentation)
        elif category == "Sk" and "\U0001f3fb" <= char <= "\U0001f3ff":
            continue  # skin tones
        elif category == "Cc":
            kept.append(" ")
        else:
            kept.append(char)
    return "".join(kept)
