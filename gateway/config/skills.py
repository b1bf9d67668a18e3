"""The `[skills]` settings section: where skills are found and what their prompt section costs.

docs/skills-and-mcp.md. A skill is `skills/<name>/SKILL.md` in a workspace or in `shared_dir`; only
its name and a one-line description go into the prompt, within `prompt_max_chars`.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field


class SkillsSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    # A directory of `<name>/SKILL.md` folders offered in every workspace's private chats.
    shared_dir: Path | None = None
    # The whole skills section of the system prompt; past it skills are listed by name only.
    prompt_max_chars: int = Field(4_000, ge=400, le=200_000)
    # One skill's description as shown in the prompt (one line, cut with an ellipsis).
    line_max_chars: int = Field(160, ge=40, le=2_000)
    # A description longer than this makes the skill invalid (the common SKILL.md limit).
    description_max_chars: int = Field(1_024, ge=40, le=20_000)
