"""A hostile SKILL.md is one broken skill, reported, never a silenced chat.

On main a front matter of 30,000 `[` made PyYAML spend about 4 s and raise RecursionError,
which the parser did not catch: every later message in that chat failed while its tools were
built, and every attempt stalled the event loop for everyone else."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from gateway.capabilities.skill_file import Skill, SkillProblem, parse_skill
from tests.gateway.capabilities.test_capabilities_gateway import _settings, _with_skill

BRACKETS = "---\nname: evil\ndescription: " + "[" * 30_000 + "\n---\nbody\n"


@pytest.mark.parametrize(
    "head",
    [
        BRACKETS,
        "---\nname: evil\ndescription: " + "[" * 10_000 + "\n---\n",  # under the size cap
        "---\nname: evil\ndescription: " + "{a: " * 2_500 + "\n---\n",
        "---\n" + "- " * 5_000 + "\n---\n",
        "---\n" + "".join(" " * i + f"k{i}:\n" for i in range(140)) + "---\n",
        "---\nname: evil\ndescription: " + "{a: " * 20_000 + "\n---\n",
        "---\n" + "- " * 30_000 + "\n---\n",
        "---\nname: evil\ndescription: x\nsize: " + "9" * 5_000 + "\n---\n",
        "---\nname: evil\ndescription: !!python/object/apply:os.system ['true']\n---\n",
        "---\nname: evil\ndescription: x\nmeta: " + "a" * 60_000 + "\n---\n",
        "---\n" + "".join(" " * i + f"k{i}:\n" for i in range(300)) + "---\n",
        "---\nname: evil\ndescription: &a [*a]\n---\n",
    ],
)
def test_hostile_front_matter_is_a_problem_fast(tmp_path: Path, head: str) -> None:
    path = tmp_path / "evil" / "SKILL.md"
    path.parent.mkdir()
    path.write_text(head)
    started = time.perf_counter()
    result = parse_skill(path, "workspace", description_max_chars=1024)
    elapsed = time.perf_counter() - started
    assert isinstance(result, SkillProblem), result
    assert len(result.message) < 300
    print(f"\n{result.message[:70]!r}: {elapsed * 1000:.1f} ms")


@pytest.mark.parametrize(
    "data",
    [
        b"\xff\xfe---\n",
        b"---\nname: \xc3\x28\n---\n",
        b"---\nname: a\x00\n---\n",
        b"---\r\n\x1b[31m\r\n---\r\n",
    ],
)
def test_bytes_that_are_not_text_are_a_problem(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "a" / "SKILL.md"
    path.parent.mkdir()
    path.write_bytes(data)
    assert isinstance(parse_skill(path, "workspace", description_max_chars=1024), SkillProblem)


def test_an_ordinary_skill_still_parses(tmp_path: Path) -> None:
    path = tmp_path / "notes" / "SKILL.md"
    path.parent.mkdir()
    path.write_text(
        "---\nname: notes\ndescription: Keep [tidy] {notes}.\nmetadata:\n"
        "  tags: [a, [b, c]]\n---\nbody\n"
    )
    skill = parse_skill(path, "workspace", description_max_chars=1024)
    assert isinstance(skill, Skill) and skill.description == "Keep [tidy] {notes}."


async def test_a_planted_skill_neither_silences_the_group_nor_the_owner(
    anthropic_server, make_gateway, tmp_path
) -> None:
    _with_skill(tmp_path)
    server = anthropic_server
    gateway, channel = await make_gateway(server, **_settings())
    server.reply_tool_call(
        "write_file", {"path": "groups/fakechat-g1/skills/evil/SKILL.md", "content": BRACKETS}
    )
    server.reply_text("planted")
    await channel.inject("mallory", "@bot save this skill", chat_type="group", chat_id="g1")
    await channel.wait_for(1)

    server.reply_text("group answer")
    server.reply_text("dm answer")
    await channel.inject("mallory", "@bot hello again", chat_type="group", chat_id="g1")
    await channel.inject("dana", "hello")
    await channel.wait_for(3)
    assert channel.texts() == ["planted", "group answer", "dm answer"]
    assert "pdf-forms" in json.dumps(server.requests[-1]["system"])  # the owner's skills intact
    lines = gateway.capabilities.context_lines(
        gateway.settings.workspaces_dir / "fakechat-dana", "group", "groups/fakechat-g1"
    )
    assert any("broken, skipped" in line and "evil" in line for line in lines), lines
