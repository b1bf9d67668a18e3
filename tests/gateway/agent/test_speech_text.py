"""What a reply sounds like read aloud (gateway/agent/media/speech_text.py).

Examples for each rule (code and tables omitted, links by host, markup and emoji gone, the
cap at a part's end), and properties over any text: the functions never raise, the speech
stays within the cap, what is not read is the reply's own suffix, and no markup, URL or emoji
reaches the voice.
"""

from __future__ import annotations

import os
import re
import unicodedata

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from gateway.agent.media.speech_text import (
    CODE_OMITTED,
    MORE_IN_TEXT,
    TABLE_OMITTED,
    pieces,
    readout,
    speech_seconds,
    to_speech,
)

CPS = 19.0
# SPEECH_EXAMPLES=5000 for a longer hunt (the suite's default keeps this file at a few seconds).
ANY = settings(
    max_examples=int(os.environ.get("SPEECH_EXAMPLES", "300")),
    deadline=None,
    suppress_health_check=list(HealthCheck),
)

MARKDOWN_BITS = st.sampled_from(
    [
        "# Heading",
        "## Sub",
        "- item",
        "* item",
        "1. first",
        "2) second",
        "> quote",
        "---",
        "```",
        "```python",
        "~~~",
        "| a | b |",
        "|---|---|",
        "a | b",
        "--- | ---",
        "**bold**",
        "*it*",
        "_u_",
        "`code`",
        "[text](https://example.com/x)",
        "![alt](p.png)",
        "<https://a.example.org/x>",
        "https://www.example.net/a?b=c",
        "www.example.com",
        "<b>",
        "</b>",
        "<!--",
        "-->",
        "&amp;",
        "🎉",
        "👍🏽",
        "❤️",
        "🇩🇪",
        "1️⃣",
        "\u200d",
        "e.g.",
        "Done.",
        "Why?",
        "Wow!",
        "...",
        "\n",
        "\n\n",
        "\r\n",
        " ",
        "\t",
        "word",
        "snake_case_name",
        "[ref][1]",
        "[a. b](http://x.y/z)",
        "|",
        "\\",
        "(",
        ")",
        "[",
        "]",
        "\x00",
        "\u2028",
    ]
)
REPLIES = st.one_of(
    st.text(max_size=400),
    st.lists(st.one_of(MARKDOWN_BITS, st.text(max_size=12)), max_size=60).map("".join),
    st.lists(st.one_of(MARKDOWN_BITS, st.text(max_size=12)), max_size=40).map(" ".join),
)
MARKUP_LEFT = set("*`~#|<>[]{}\\^_")


def _is_emoji(char: str) -> bool:
    return unicodedata.category(char) == "So" and char not in "°©®™℃℉№"


def test_code_blocks_and_tables_are_said_to_be_left_out():
    reply = (
        "Here is the fix:\n\n```python\nprint('hi')\n```\n\nAnd the numbers:\n\n"
        "| month | cost |\n|---|---|\n| May | 3 |\n\nThat is all."
    )
    assert to_speech(reply) == (
        f"Here is the fix: {CODE_OMITTED} And the numbers: {TABLE_OMITTED} That is all."
    )


def test_a_run_of_code_blocks_is_said_once_and_an_unclosed_fence_swallows_the_rest():
    assert to_speech("```\na\n```\n\n~~~\nb\n~~~\nAfter.") == f"{CODE_OMITTED} After."
    assert to_speech("Look:\n```sh\nrm -rf /\nno end") == f"Look: {CODE_OMITTED}"


def test_a_table_without_outer_pipes_is_a_table():
    assert to_speech("Name | Value\n--- | ---\nx | y\n\nEnd.") == f"{TABLE_OMITTED} End."


def test_links_are_said_by_their_host():
    said = to_speech(
        "See [the docs](https://docs.python.org/3/library/asyncio.html), "
        "<https://www.example.com/a/b> and https://sub.example.org/x?y=1#z."
    )
    assert said == "See the docs (docs.python.org), example.com and sub.example.org."
    assert (
        to_speech("[https://a.example.net/long/path](https://a.example.net/long/path)")
        == "a.example.net."
    )
    assert to_speech("Mail [me](mailto:a@b.example)") == "Mail me."
    assert to_speech("Open www.example.com/page now.") == "Open example.com now."


def test_markup_and_emoji_are_not_read():
    said = to_speech(
        "# Plan 🎉\n\n- **Buy** *green* tea 👍🏽\n- Call `mom` ❤️\n\n"
        "> A <b>quoted</b> &amp; kept line\n\nsnake_case_name done"
    )
    assert said == ("Plan. Buy green tea. Call mom. A quoted & kept line. snake case name done.")


def test_a_long_token_is_not_spelled_out():
    digest = "3f786850e387550fdab836ed7e6dc881de23001b" * 2
    assert to_speech(f"The commit is {digest}. Done.") == "The commit is. Done."


def test_a_short_reply_is_read_whole():
    assert readout("Tea at five.", max_seconds=120, chars_per_second=CPS) == ("Tea at five.", "")


def test_a_long_reply_stops_at_a_sentence_within_the_cap_and_says_so():
    sentences = [f"Sentence number {n} is here." for n in range(200)]
    reply = " ".join(sentences)
    spoken, rest = readout(reply, max_seconds=20, chars_per_second=CPS)
    assert spoken.endswith(MORE_IN_TEXT)
    assert speech_seconds(spoken, CPS) <= 20
    assert speech_seconds(spoken, CPS) > 15  # the cap is used, not wasted
    read = spoken.removesuffix(MORE_IN_TEXT).strip()
    assert reply.startswith(read) and rest == reply[len(read) :].strip()
    assert rest.startswith("Sentence number")


def test_the_rest_keeps_the_reply_as_written():
    reply = "Short intro.\n\n" + "\n".join(
        f"- **item** {n} with [a link](https://x.example)" for n in range(100)
    )
    spoken, rest = readout(reply, max_seconds=10, chars_per_second=CPS)
    assert spoken.startswith("Short intro. item 0 with a link (x.example).")
    assert rest.startswith("- **item** ") and reply.endswith(rest)


def test_one_endless_sentence_is_cut_between_words():
    reply = " ".join(["word"] * 5000)
    spoken, rest = readout(reply, max_seconds=30, chars_per_second=CPS)
    assert speech_seconds(spoken, CPS) <= 30 and spoken.startswith("word word")
    assert rest.startswith("word") and reply.endswith(rest)


def test_nothing_sayable_gives_empty_speech():
    assert readout("```\ncode only\n```", max_seconds=60, chars_per_second=CPS) == (
        CODE_OMITTED,
        "",
    )
    assert readout("🎉👍🏽 ** __ ``", max_seconds=60, chars_per_second=CPS) == ("", "")


def test_pieces_cut_at_sentences_then_spaces_then_anywhere():
    assert pieces("One. Two three four five. Six seven eight nine ten eleven.", 20) == [
        "One.",
        "Two three four five.",
        "Six seven eight nine",
        "ten eleven.",
    ]
    assert pieces("First part, second part; third", 16) == ["First part,", "second part;", "third"]
    assert pieces("x" * 25, 10) == ["x" * 10, "x" * 10, "x" * 5]
    assert pieces("  \n ", 10) == []


@ANY
@given(
    REPLIES,
    st.floats(min_value=0, max_value=200, allow_nan=False),
    st.floats(min_value=0.5, max_value=40, allow_nan=False),
)
@example("- a\n" * 2000, 5.0, 19.0)
@example("[" * 3000 + "](" * 3000, 60.0, 19.0)
@example("<!--" * 3000, 60.0, 19.0)
@example("```\n" * 999, 10.0, 19.0)
@example("0000000000000<A >", 2.0, 8.0)  # found by longer runs: a cut inside a tag,
@example("00000000<!-- 0-->", 1.0, 15.0)  # a comment,
@example("000[0](00000) 0) 0", 2.0, 4.0)  # "0) " read as a list marker mid-paragraph,
@example("00000000000[0 ][]", 2.0, 7.0)  # a reference link,
@example("0 ()#0", 1.0, 5.0)  # two spaces left by empty parentheses
def test_readout_is_total_capped_and_leaves_a_suffix(reply, max_seconds, cps):
    spoken, rest = readout(reply, max_seconds=max_seconds, chars_per_second=cps)
    assert isinstance(spoken, str) and isinstance(rest, str)
    assert speech_seconds(spoken, cps) <= max_seconds + 1e-9
    assert reply.rstrip().endswith(rest)
    if not rest:  # all of it was read (the parts may be cut elsewhere than uncapped)
        assert re.findall(r"\w+", spoken) == re.findall(r"\w+", to_speech(reply))
    assert spoken == " ".join(spoken.split())
    assert "://" not in spoken
    assert not MARKUP_LEFT & set(spoken)
    assert not any(_is_emoji(char) for char in spoken)


@ANY
@given(st.text(max_size=600), st.integers(min_value=1, max_value=200))
def test_pieces_are_total_bounded_and_lose_no_word(text, limit):
    parts = pieces(text, limit)
    assert all(0 < len(part) <= limit for part in parts)
    assert "".join(" ".join(parts).split()) == "".join(text.split())
