"""Chunking: nothing lost, nothing over the limit, code fences balanced in every chunk."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from channels.chunking import fences, split_chunks, utf16_len
from channels.telegram import render
from channels.telegram_html import markdown_to_html

_pieces = st.sampled_from(
    [
        "word ",
        "longerword ",
        "\n",
        "\n\n",
        "```python\n",
        "```\n",
        "~~~\n",
        "😀",
        "é",
        "x" * 50,
        "`inline` ",
        "**b** ",
        "<&> ",
    ]
)


def _balanced(text: str) -> bool:
    """Every code block that opens in `text` also closes in it."""
    return all(block.close_start < len(text) for block in fences(text))


@settings(max_examples=300, deadline=None)
@given(
    st.lists(_pieces, max_size=400),
    st.sampled_from([64, 100, 500]),
    st.sampled_from(["chars", "utf16"]),
)
def test_chunks_join_to_the_reply_and_fit(pieces, limit, units):
    text = "".join(pieces)
    chunks = split_chunks(text, limit, units)
    assert "".join(c.body for c in chunks) == text
    measure = utf16_len if units == "utf16" else len
    for chunk in chunks:
        assert measure(chunk.text) <= limit
    for chunk in chunks[:-1]:
        assert _balanced(chunk.text)
    if _balanced(text):
        assert all(_balanced(chunk.text) for chunk in chunks)


def test_prefers_paragraph_then_line_then_word():
    text = "a" * 60 + "\n\n" + "b" * 30 + "\n" + "c" * 20
    assert [c.body for c in split_chunks(text, 100)] == [
        "a" * 60 + "\n\n",
        "b" * 30 + "\n" + "c" * 20,
    ]
    text = "a" * 60 + "\n" + "b " * 30
    assert split_chunks(text, 80)[0].body == "a" * 60 + "\n"
    words = "alpha beta gamma " * 10
    assert all(c.body.endswith(" ") for c in split_chunks(words, 40)[:-1])


def test_code_block_is_closed_and_reopened_with_its_language():
    code = "\n".join(f"x = {i}" for i in range(40))
    text = f"Here:\n\n```python\n{code}\n```\nbye"
    chunks = split_chunks(text, 120)
    assert len(chunks) > 2
    assert chunks[0].close == "```" or chunks[0].close == "\n```"
    assert all(c.reopen == "```python\n" for c in chunks[1:-1])
    for chunk in chunks:
        assert chunk.text.count("```") % 2 == 0


def test_discord_and_telegram_limits():
    reply = ("paragraph " * 300 + "\n\n") * 5
    assert all(len(c.text) <= 2000 for c in split_chunks(reply, 2000))
    emoji = "😀" * 5000  # 10000 UTF-16 units
    chunks = split_chunks(emoji, 4096, "utf16")
    assert [utf16_len(c.text) for c in chunks] == [4096, 4096, 1808]
    assert "".join(c.body for c in chunks) == emoji


def test_html_rendering_stays_within_the_limit_after_escaping():
    reply = "<>&" * 3000
    for html, plain in render(reply):
        assert utf16_len(html) <= 4096 and utf16_len(plain) <= 4096
    assert "".join(plain for _, plain in render(reply)) == reply


def test_markdown_to_html():
    html = markdown_to_html(
        "# T\n**b** *i* ~~s~~ `a<b` [x](https://e.com/?a=1&b=2)\n"
        "```py\nif a < b: pass\n```\n> quoted"
    )
    assert html == (
        "<b>T</b>\n<b>b</b> <i>i</i> <s>s</s> <code>a&lt;b</code> "
        '<a href="https://e.com/?a=1&amp;b=2">x</a>\n'
        '<pre><code class="language-py">if a &lt; b: pass</code></pre>\n'
        "<blockquote>quoted</blockquote>"
    )
    assert markdown_to_html("snake_case_name and 2*3*4") == "snake_case_name and 2*3*4"
