"""Tables of the CLI show what people wrote as plain text: a contact named "[red]eve" or a
goal holding a terminal escape neither styles the table nor reaches the terminal."""

from __future__ import annotations

import pytest

from gateway.cli.common import print_table


def test_cells_are_plain_text_on_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    print_table(
        ("name", "note"),
        [
            ("[bold red]eve[/bold red]", "clear\x1b[2J\x1b]0;owned\x07 screen"),
            ("ann\nrow two", "\u202eevil"),
        ],
    )
    out = capsys.readouterr().out
    assert "[bold red]eve[/bold red]" in out
    assert "\x1b" not in out and "\x07" not in out and "\u202e" not in out
    assert "ann row two" in out
    assert "\ufffd" in out
