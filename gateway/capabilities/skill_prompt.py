"""The skills section of the system prompt: one line per skill, within a character budget.

Progressive disclosure: the prompt carries only each skill's name and its description cut to
one line; the model opens the SKILL.md (read_file for the workspace's own skills, read_skill for
shared ones) when a task calls for it. Measured cost (bench/prompt_budget.py): the header is 265
characters, and a skill with a description of 60-200 characters about 130 characters (~32
tokens), so twenty skills cost ~2,900 characters (~730 tokens), under the default 4,000 budget.
Past the budget, the remaining skills are listed by name only, then counted.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gateway.capabilities.skill_file import Skill

HEADER = """\
## Skills
Skills are instructions for particular tasks. When a task matches a skill below, read its
SKILL.md before acting and follow it: skills/<name>/SKILL.md with read_file, or read_skill
for skills marked (shared). Files a skill mentions are in the same folder."""
# A group's own skills live in its area: the same header with that folder.
GROUP_HEADER = """\
## Skills
Skills are instructions for particular tasks. When a task matches a skill below, read its
SKILL.md before acting and follow it: {root}/<name>/SKILL.md with read_file. Files a skill
mentions are in the same folder."""
MORE = "More skills (names only): "


@dataclass(frozen=True, slots=True)
class SkillSection:
    text: str  # empty when there are no skills
    listed: int = 0  # with their description
    names_only: int = 0
    omitted: int = 0  # not even named: the budget ran out

    @property
    def chars(self) -> int:
        return len(self.text)


def skill_line(skill: Skill, line_max_chars: int) -> str:
    description = skill.description
    if len(description) > line_max_chars:
        description = description[: line_max_chars - 1].rstrip() + "…"
    shared = " (shared)" if skill.source == "shared" else ""
    return f"- {skill.name}{shared}: {description}"


def render_skill_section(
    skills: Sequence[Skill], *, max_chars: int, line_max_chars: int, root: str = "skills"
) -> SkillSection:
    if not skills:
        return SkillSection("")
    header = HEADER if root == "skills" else GROUP_HEADER.format(root=root)
    if len(header) > max_chars:
        return SkillSection("", omitted=len(skills))
    lines = [header]
    used = len(header)
    listed = 0
    for skill in skills:
        line = skill_line(skill, line_max_chars)
        if used + 1 + len(line) > max_chars:
            break
        lines.append(line)
        used += 1 + len(line)
        listed += 1
    rest = skills[listed:]
    names: list[str] = []
    if rest:
        room = max_chars - used - 1 - len(MORE) - len(" (+999 more)")
        for skill in rest:
            cost = len(skill.name) + 2
            if room - cost < 0:
                break
            names.append(skill.name)
            room -= cost
        omitted = len(rest) - len(names)
        if names:
            lines.append(f"{MORE}{', '.join(names)}" + (f" (+{omitted} more)" if omitted else ""))
        elif used + 1 + len(counted := f"({omitted} more skills not listed)") <= max_chars:
            lines.append(counted)
        return SkillSection("\n".join(lines), listed, len(names), omitted)
    return SkillSection("\n".join(lines), listed)
