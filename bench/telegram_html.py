"""Markdown -> Telegram HTML on pathological inputs: time per 4 KB chunk and at 10x the size.

Each case repeats a fragment that opens a span and never closes it ("*a ", "[a ", ...). A
converter that searches for a closer from every opener is quadratic on these: on main, 4 KB of
"*a " took about 120 ms, and a 234 KB reply delayed another person's /help by 4.4 s. A linear
converter takes about 10x as long at 10x the size. Figures only: nothing here asserts a time.

    python bench/telegram_html.py [--size 4096] [--repeat 5]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from channels.telegram import render
from channels.telegram_html import markdown_to_html

CASES = {
    "italic *a": "*a ",
    "italic _a": "_a ",
    "bold **a": "**a ",
    "bold __a": "__a ",
    "strike ~~a": "~~a ",
    "link [a": "[a ",
    "link [a](http://": "[a](http://x",
    "code `a": "`a ",
    "heading spaces": None,
    "mixed": "*a **b _c ~~d [e `f ",
    "ordinary prose": "The quick *brown* fox jumps over the **lazy** dog. ",
}


def _text(fragment: str | None, size: int) -> str:
    if fragment is None:  # a heading followed by a long run of spaces and a word
        return "# a" + " " * (size - 4) + "x"
    return (fragment * (size // len(fragment) + 1))[:size]


def _best_ms(text: str, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        markdown_to_html(text)
        best = min(best, time.perf_counter() - started)
    return best * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=4096)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    print(f"{'case':<20} {args.size:>7} chars   {args.size * 10:>7} chars   ratio")
    for name, fragment in CASES.items():
        small = _best_ms(_text(fragment, args.size), args.repeat)
        large = _best_ms(_text(fragment, args.size * 10), max(1, args.repeat // 2))
        print(f"{name:<20} {small:8.2f} ms   {large:8.2f} ms   {large / max(small, 1e-6):5.1f}x")
    reply = _text("*a ", 234_000)
    started = time.perf_counter()
    chunks = render(reply)
    print(
        f"a 234 KB reply of '*a ' cut and rendered for Telegram: {len(chunks)} chunks in "
        f"{(time.perf_counter() - started) * 1000:.0f} ms"
    )


if __name__ == "__main__":
    main()
