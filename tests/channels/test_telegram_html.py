"""Markdown -> Telegram HTML: the linear converter renders exactly what the regex rules say.

The reference below is the converter's earlier form: one regular expression per rule, applied
with `re.sub`. Its lazy groups search for a closer from every opener, which is quadratic on
unclosed delimiters (4 KB of "*a " took about 120 ms); the production converter finds the same
pairs in one sweep (channels/telegram_html.py). Speed is measured by bench/telegram_html.py;
here only the output is checked, on generated inputs and on the pathological ones.
"""

from __future__ import annotations

import html
import re

from hypothesis import given, settings
from hypothesis import strategies as st

from channels.telegram_html import markdown_to_html

_REF_CODE = re.compile(r"`([^`\n]+)`")
_REF_LINK = re.compile(r"\[([^\]\n]+)\]\((https?://[^)\s]+)\)")
_REF_BOLD = re.compile(r"\*\*(?=\S)(.+?)(?<=\S)\*\*|__(?=\S)(.+?)(?<=\S)__")
_REF_ITALIC = re.compile(
    r"(?<![*\w])\*(?=[^\s*])(.+?)(?<=[^\s*])\*(?![*\w])|(?<!\w)_(?=\S)(.+?)(?<=\S)_(?!\w)"
)
_REF_STRIKE = re.compile(r"~~(?=\S)(.+?)(?<=\S)~~")
_REF_HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$")


def reference_inline(text: str) -> str:
    codes: list[str] = []

    def keep(match: re.Match[str]) -> str:
        codes.append(f"<code>{html.escape(match.group(1), quote=False)}</code>")
        return f"\x00{len(codes) - 1}\x00"

    text = html.escape(_REF_CODE.sub(keep, text), quote=False)
    text = _REF_LINK.sub(lambda m: f'<a href="{m.group(2)}">{m.group(1)}</a>', text)
    text = _REF_BOLD.sub(lambda m: f"<b>{m.group(1) or m.group(2)}</b>", text)
    text = _REF_ITALIC.sub(lambda m: f"<i>{m.group(1) or m.group(2)}</i>", text)
    text = _REF_STRIKE.sub(lambda m: f"<s>{m.group(1)}</s>", text)
    for index, code in enumerate(codes):
        text = text.replace(f"\x00{index}\x00", code)
    return text


def reference_line(line: str) -> str:
    heading = _REF_HEADING.match(line)
    if heading:
        return f"<b>{reference_inline(heading.group(1))}</b>"
    return reference_inline(line)


def _inline_only(line: str) -> bool:
    """Not a quote, bullet or fence line: those have their own (line-level) rules."""
    return not (
        line.startswith(">") or re.match(r"\s*[-*+]\s", line) or re.match(r" {0,3}(```|~~~)", line)
    )


MARKUP = st.text(alphabet="*_~`[]()#> \nab1:/htps.<&é", max_size=60)


@settings(max_examples=600, deadline=None)
@given(MARKUP)
def test_same_output_as_the_regex_rules(text):
    # Lines without quotes, bullets or fences go through the inline rules (and headings).
    lines = [line for line in text.split("\n") if _inline_only(line)]
    for line in lines:
        assert markdown_to_html(line) == reference_line(line), repr(line)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            [
                "*",
                "**",
                "_",
                "__",
                "~~",
                "`",
                "[",
                "](",
                "http://x",
                ")",
                "a",
                "b",
                " ",
                "é",
                "#",
                "<",
            ]
        ),
        max_size=40,
    ).map("".join)
)
def test_same_output_on_delimiter_soup(text):
    if _inline_only(text):
        assert markdown_to_html(text) == reference_line(text), repr(text)


def test_pathological_inputs_render_as_the_rules_say():
    for fragment in (
        "*a ",
        "_a ",
        "**a ",
        "__a ",
        "~~a ",
        "[a ",
        "[a](http://x",
        "`a ",
        "*a **b _c ~~d [e `f ",
    ):
        text = (fragment * (4096 // len(fragment) + 1))[:4096]
        assert markdown_to_html(text) == reference_inline(text), fragment
    heading = "# a" + " " * 2000 + "x  ##  "
    assert markdown_to_html(heading) == "<b>a" + " " * 2000 + "x</b>"
