"""File names the file system cannot hold, or that read differently from what they are, are a
clean refusal the model can act on. Before, a name over 255 bytes surfaced as
"internal error in tool write_file: OSError", and "invoice\u202egpj.md" (shown as
"invoicedm.jpg") was written as asked."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.agent.tools import ToolContext, ToolRegistry, file_tools

EMOJI = "\U0001f600"  # 4 bytes in UTF-8


@pytest.mark.parametrize(
    "path",
    [
        "a" * 300 + ".md",
        "notes/" + "é" * 200 + ".md",
        "/".join([EMOJI * 60] * 17) + "/x.md",  # every name fits; the whole path does not
    ],
)
@pytest.mark.parametrize(
    "tool", ["write_file", "read_file", "list_files", "delete_file", "append_file"]
)
async def test_a_name_too_long_is_a_clean_refusal(tmp_path: Path, path: str, tool: str) -> None:
    args = {"path": path}
    if tool in ("write_file", "append_file"):
        args["content"] = "x"
    outcome = await ToolRegistry(file_tools()).run(tool, args, ToolContext(tmp_path, "k", True))
    assert outcome.is_error and "refused" in outcome.text, outcome.text
    assert "internal error" not in outcome.text
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "control",
    [
        "\u202e",
        "\u202a",
        "\u202b",
        "\u202c",
        "\u202d",
        "\u2066",
        "\u2067",
        "\u2068",
        "\u2069",
        "\u200e",
        "\u200f",
        "\u061c",
    ],
)
async def test_bidi_controls_in_names_are_refused(tmp_path: Path, control: str) -> None:
    ctx = ToolContext(tmp_path, "k", True)
    outcome = await ToolRegistry(file_tools()).run(
        "write_file", {"path": f"notes/invoice{control}gpj.md", "content": "x"}, ctx
    )
    assert outcome.is_error and "bidirectional control" in outcome.text
    assert not (tmp_path / "notes").exists()


async def test_joiners_and_ordinary_unicode_names_still_work(tmp_path: Path) -> None:
    ctx = ToolContext(tmp_path, "k", True)
    names = [
        "notes/👩\u200d💻.md",
        "notes/می\u200cخواهم.md",
        "notes/日本語.md",
        "é" * 126 + ".md",
    ]  # 255 bytes: the longest name allowed
    for name in names:
        outcome = await ToolRegistry(file_tools()).run(
            "write_file", {"path": name, "content": "x"}, ctx
        )
        assert not outcome.is_error, outcome.text
