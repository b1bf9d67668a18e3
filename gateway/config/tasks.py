"""The `[tasks]` settings section: background tasks (docs/tasks.md)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator


class TasksSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    max_running_per_person: int = Field(3, ge=1, le=100)
    max_running: int = Field(20, ge=1, le=1000)  # in all, every person together
    # A task's deadline: the model may ask for less, never for more than the maximum.
    default_deadline_seconds: float = Field(900.0, gt=0)
    max_deadline_seconds: float = Field(3600.0, gt=0)
    # A task's token cap (input + output of all its model calls): the same rule.
    default_token_cap: int = Field(50_000, ge=1)
    max_token_cap: int = Field(200_000, ge=1)
    max_tool_rounds: int = Field(30, ge=1, le=500)  # model calls of one task
    # A result longer than this is sent as a file (tasks/<n>-result.md) with a short summary.
    result_max_chars: int = Field(3000, ge=200, le=100_000)
    # How often the running gateway looks for cancels written by another process (the CLI,
    # the panel) and for tasks waiting for an exec approval.
    poll_seconds: float = Field(1.0, gt=0, le=60)

    @model_validator(mode="after")
    def _defaults_within_maxima(self) -> TasksSettings:
        if self.default_deadline_seconds > self.max_deadline_seconds:
            raise ValueError("default_deadline_seconds is above max_deadline_seconds")
        if self.default_token_cap > self.max_token_cap:
            raise ValueError("default_token_cap is above max_token_cap")
        return self
