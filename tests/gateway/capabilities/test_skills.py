"""Skills: SKILL.md parsing, discovery across the workspace and the shared directory, the
budgeted prompt section, read_skill's confinement, and which contexts see skills at all."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from gateway.agent.tools.args import run_checked
from gateway.agent.tools.base import ToolContext, ToolError
from gateway.capabilities.skill_catalog import SkillCatalog
from gateway.capabilities.skill_file import Skill, SkillProblem, parse_skill
from gateway.capabilities.skill_prompt import HEADER, render_skill_section
from gateway.capabilities.skill_tool import ReadSkillTool
from gateway.config.skills import SkillsSettings


def write_skill(
    root: Path,
    folder: str,
    text: str | None = None,
    *,
    description: str = "Fill in PDF forms from the person's notes.",
    body: str = "# Steps\n1. Read the form.\n",
) -> Path:
    path = root / folder / "SKILL.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    if text is None:
        text = f"---\nname: {folder}\ndescription: {description}\n---\n{body}"
    path.write_text(text, encoding="utf-8")
    return path


def parse(path: Path) -> Skill | SkillProblem:
    return parse_skill(path, "workspace", description_max_chars=1024)


def test_a_valid_skill_keeps_name_and_one_line_description(tmp_path):
    path = write_skill(
        tmp_path,
        "pdf-forms",
        "---\nname: pdf-forms\ndescription: >\n  Fill in\n  PDF forms.\nlicense: MIT\n---\nbody\n",
    )
    skill = parse(path)
    assert skill == Skill("pdf-forms", "Fill in PDF forms.", path, "workspace")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("# just markdown\n", "no front matter"),
        ("---\nname: a\ndescription: b\n", "not closed"),
        ("---\nname: [unclosed\ndescription: b\n---\n", "not valid YAML (line 3)"),
        ("---\n- a list\n---\n", "must be a YAML mapping"),
        ("---\ndescription: b\n---\n", "has no name"),
        ("---\nname: Bad_Name\ndescription: b\n---\n", "lowercase letters"),
        ("---\nname: other\ndescription: b\n---\n", "differs from its folder"),
        ("---\nname: skill\n---\n", "no description"),
        ("---\nname: skill\ndescription: '" + "x" * 1025 + "'\n---\n", "1025 characters"),
    ],
)
def test_broken_front_matter_is_a_problem_with_a_reason(tmp_path, text, message):
    result = parse(write_skill(tmp_path, "skill", text))
    assert isinstance(result, SkillProblem)
    assert message in result.message


def test_binary_and_unreadable_files_are_problems_not_crashes(tmp_path):
    path = tmp_path / "bin" / "SKILL.md"
    path.parent.mkdir()
    path.write_bytes(b"---\x00\xff\xfe")
    assert isinstance(parse(path), SkillProblem)
    assert "cannot read" in parse(tmp_path / "missing" / "SKILL.md").message  # type: ignore[union-attr]


def test_catalog_merges_workspace_and_shared_and_skips_broken_with_one_warning(tmp_path, caplog):
    workspace, shared = tmp_path / "ws", tmp_path / "shared"
    write_skill(workspace / "skills", "pdf-forms")
    write_skill(workspace / "skills", "weather", description="The workspace's own weather.")
    write_skill(workspace / "skills", "broken", "no front matter here\n")
    (workspace / "skills" / "empty-folder").mkdir()
    (workspace / "skills" / "README.md").write_text("not a skill folder: ignored\n")
    write_skill(shared, "weather", description="Shared weather.")
    write_skill(shared, "translate", description="Translate text.")
    catalog = SkillCatalog(SkillsSettings(shared_dir=shared))

    with caplog.at_level(logging.WARNING):
        scan = catalog.scan(workspace)
        catalog.scan(workspace)  # warned once per broken file, not per turn
    assert [(s.name, s.source) for s in scan.skills] == [
        ("pdf-forms", "workspace"),
        ("translate", "shared"),
        ("weather", "workspace"),
    ]
    assert [s.description for s in scan.shadowed] == ["Shared weather."]
    problems = {p.path.parent.name: p.message for p in scan.problems}
    assert set(problems) == {"broken", "empty-folder"}
    assert "no SKILL.md" in problems["empty-folder"]
    warnings = [r.getMessage() for r in caplog.records if "skill skipped" in r.getMessage()]
    assert len(warnings) == 2
    assert "skills/broken/SKILL.md" in " ".join(warnings)


def test_catalog_sees_an_edit_and_groups_see_nothing(tmp_path):
    workspace = tmp_path / "ws"
    path = write_skill(workspace / "skills", "notes", description="First version.")
    catalog = SkillCatalog(SkillsSettings())
    assert catalog.scan(workspace).skills[0].description == "First version."
    write_skill(workspace / "skills", "notes", description="Second, longer version.")
    os.utime(path, ns=(1, 1))  # a different mtime even on coarse clocks
    assert catalog.scan(workspace).skills[0].description == "Second, longer version."
    assert catalog.for_context(workspace, "group").skills == ()
    assert catalog.for_context(workspace, "owner_dm").skills != ()
    disabled = SkillCatalog(SkillsSettings(enabled=False))
    assert disabled.for_context(workspace, "owner_dm").skills == ()


def test_a_skill_symlinked_out_of_the_workspace_is_refused(tmp_path):
    outside = tmp_path / "outside"
    write_skill(outside, "evil")
    workspace = tmp_path / "ws"
    (workspace / "skills").mkdir(parents=True)
    (workspace / "skills" / "evil").symlink_to(outside / "evil")
    scan = SkillCatalog(SkillsSettings()).scan(workspace)
    assert scan.skills == ()
    assert "outside your workspace" in scan.problems[0].message


def _skills(count: int, description: str = "d" * 100) -> list[Skill]:
    return [
        Skill(f"skill-{i:02d}", description, Path(f"/x/skill-{i:02d}/SKILL.md"), "workspace")
        for i in range(count)
    ]


def test_prompt_section_lists_one_line_per_skill_within_budget():
    section = render_skill_section(
        [*_skills(2), Skill("shared-one", "z" * 500, Path("/s/SKILL.md"), "shared")],
        max_chars=4000,
        line_max_chars=160,
    )
    lines = section.text.splitlines()
    assert section.text.startswith(HEADER)
    assert lines[-3:-1] == [f"- skill-0{i}: {'d' * 100}" for i in range(2)]
    assert lines[-1].startswith("- shared-one (shared): zzz") and lines[-1].endswith("…")
    assert len(lines[-1]) == len("- shared-one (shared): ") + 160
    assert section.listed == 3 and section.chars == len(section.text)
    assert render_skill_section([], max_chars=4000, line_max_chars=160).text == ""


def test_past_the_budget_skills_are_named_then_counted():
    section = render_skill_section(_skills(40), max_chars=1500, line_max_chars=160)
    assert section.chars <= 1500
    assert section.listed == (1500 - len(HEADER)) // 113  # each line 112 chars + newline
    assert section.names_only > 0 and section.listed + section.names_only + section.omitted == 40
    first_named = section.listed
    assert (
        f"More skills (names only): skill-{first_named:02d}, skill-{first_named + 1:02d}"
        in section.text
    )
    assert f"(+{section.omitted} more)" in section.text
    for room in (10, 40):  # a budget smaller than one line: counted if that fits, else bare
        tiny = render_skill_section(_skills(3), max_chars=len(HEADER) + room, line_max_chars=160)
        assert tiny.listed == 0 and tiny.chars <= len(HEADER) + room
    assert "(3 more skills not listed)" in tiny.text


async def test_read_skill_reads_shared_skills_confined_to_their_folder(tmp_path):
    shared = tmp_path / "shared"
    write_skill(shared, "translate", body="Use formal register.\n")
    (shared / "translate" / "glossary.md").write_text("cat: Katze\n")
    (tmp_path / "secret.txt").write_text("SECRET")
    workspace = tmp_path / "ws"
    write_skill(workspace / "skills", "mine", body="My own steps.\n")
    catalog = SkillCatalog(SkillsSettings(shared_dir=shared))
    tool = ReadSkillTool(lambda ctx: catalog.for_context(ctx.workspace, "owner_dm"))
    ctx = ToolContext(workspace, "owner:dm", True)

    assert "Use formal register." in await run_checked(tool, {"name": "translate"}, ctx)
    glossary = await run_checked(tool, {"name": "translate", "file": "glossary.md"}, ctx)
    assert glossary == "cat: Katze\n"
    assert "My own steps." in await run_checked(tool, {"name": "mine"}, ctx)
    for bad in ("../../secret.txt", "/etc/passwd", ".hidden"):
        with pytest.raises(ToolError):
            await run_checked(tool, {"name": "translate", "file": bad}, ctx)
    with pytest.raises(ToolError, match="available: mine, translate"):
        await run_checked(tool, {"name": "nope"}, ctx)
