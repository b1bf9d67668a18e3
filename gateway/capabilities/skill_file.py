"""One SKILL.md: its YAML front matter read and checked, or the reason it cannot be used.

The format is the common one: a Markdown file that starts with a `---` fenced YAML block
holding at least `name` (lowercase letters, digits and hyphens, the folder's own name) and
`description` (what the skill is for, so the model can tell when to open it). Other keys
(license, metadata...) are allowed and ignored. Only the head of the file is read: the body is
for the model to open with a tool when the task needs it, never for the prompt.

The file is hostile input (a group member may write its own area's skills), so reading is total
and cheap: the front matter is size-capped and its bracket nesting measured before YAML sees it
(30,000 `[` took PyYAML about 4 s and then raised RecursionError), libyaml parses when present,
and any exception at all becomes a SkillProblem naming it. The catalog caches that result until
the file changes, so a broken skill costs one parse per version, not one per message.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from memory.atomic import json_depth

SKILL_FILE = "SKILL.md"
# The front matter must close within this many bytes; bodies may be any size.
MAX_HEAD_BYTES = 64 * 1024
# Front matter past name and description: license, a little metadata. Flow collections ([...],
# {...}) nested deeper than this are refused before parsing.
FRONT_MATTER_SLACK_BYTES = 8 * 1024
MAX_FLOW_DEPTH = 16
MAX_NAME_CHARS = 64
NAME = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")

Source = Literal["workspace", "shared"]


@dataclass(frozen=True, slots=True)
class Skill:
    name: str
    description: str  # whitespace collapsed to single spaces
    path: Path  # the SKILL.md file
    source: Source


@dataclass(frozen=True, slots=True)
class SkillProblem:
    """A skill folder that cannot be used, and a message saying how to fix it."""

    path: Path
    source: Source
    message: str


def parse_skill(path: Path, source: Source, *, description_max_chars: int) -> Skill | SkillProblem:
    """Read `path` (a folder's SKILL.md) into a Skill, or a SkillProblem; never raises."""
    folder = path.parent.name

    def problem(message: str) -> SkillProblem:
        return SkillProblem(path, source, message)

    try:
        with open(path, "rb") as handle:
            head = handle.read(MAX_HEAD_BYTES)
    except OSError as exc:
        return problem(f"cannot read: {exc.strerror or exc}")
    text = head.decode("utf-8", errors="replace").removeprefix("\ufeff")
    if b"\x00" in head:
        return problem("binary content, not a Markdown file")
    front, error = _front_matter(text, complete=len(head) < MAX_HEAD_BYTES)
    if error:
        return problem(error)
    limit = FRONT_MATTER_SLACK_BYTES + 4 * description_max_chars
    if len(front.encode("utf-8", errors="replace")) > limit:
        return problem(
            f"front matter is over {limit:,} bytes; keep it to name, description "
            "and a few short keys (put the rest in the body)"
        )
    if json_depth(front, MAX_FLOW_DEPTH) > MAX_FLOW_DEPTH:
        return problem(f"front matter nests brackets more than {MAX_FLOW_DEPTH} levels deep")
    import yaml  # only when a workspace has a skill: not on every start

    # libyaml (C) when the wheel has it: about 20x faster on hostile input, with its own depth
    # limit; else PyYAML's own safe loader.
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        data = yaml.load(front, Loader=loader)  # a safe loader (C or Python)
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        line = f" (line {where.line + 2})" if where is not None else ""
        reason = str(getattr(exc, "problem", None) or exc).splitlines()[0][:200]
        return problem(f"front matter is not valid YAML{line}: {reason}")
    except Exception as exc:  # RecursionError, a 5,000-digit number, MemoryError...
        return problem(f"front matter cannot be read ({type(exc).__name__})")
    if not isinstance(data, dict):
        return problem("front matter must be a YAML mapping with name and description")
    problems = _field_problems(data, folder, description_max_chars)
    if problems:  # every one at once: fixing the first must not reveal the next
        return problem("; ".join(problems))
    name = str(data["name"]).strip()
    description = " ".join(str(data["description"]).split())
    return Skill(name, description, path, source)


def _field_problems(
    data: dict[object, object], folder: str, description_max_chars: int
) -> list[str]:
    """What is wrong with the name and the description, all of it."""
    found = []
    name, description = data.get("name"), data.get("description")
    if not isinstance(name, str) or not name.strip():
        found.append("front matter has no name")
    elif len(name.strip()) > MAX_NAME_CHARS or not NAME.match(name.strip()):
        found.append(
            f"name {name.strip()!r} must be lowercase letters, digits and hyphens "
            f"(at most {MAX_NAME_CHARS})"
        )
    elif name.strip() != folder:
        found.append(
            f"name {name.strip()!r} differs from its folder {folder!r}; rename one of them"
        )
    if not isinstance(description, str) or not description.strip():
        found.append("front matter has no description (say what the skill is for)")
    elif len(" ".join(description.split())) > description_max_chars:
        found.append(
            f"description is {len(' '.join(description.split()))} characters; at "
            f"most {description_max_chars} (put details in the body)"
        )
    return found


def _front_matter(text: str, *, complete: bool) -> tuple[str, str]:
    """The YAML between the opening and closing `---` lines, or ("", why not)."""
    lines = text.splitlines()
    if not lines or lines[0].strip() != "---":
        return (
            "",
            "no front matter: the file must start with a '---' line, then name: and "
            "description:, then '---'",
        )
    for index, line in enumerate(lines[1:], start=1):
        if line.strip() in ("---", "..."):
            return "\n".join(lines[1:index]), ""
    if not complete:
        return "", f"front matter is not closed with '---' within {MAX_HEAD_BYTES // 1024} KiB"
    return "", "front matter is not closed with a '---' line"
