"""The `[scheduler]` settings section: reminders and scheduled tasks (docs/reminders.md)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator

from gateway.config.heartbeat import check_zone


class ScheduleOverride(BaseModel):
    """Per-workspace values (keyed by person id)."""

    model_config = ConfigDict(extra="forbid")

    timezone: str | None = None

    _zone = field_validator("timezone")(check_zone)


class SchedulerSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    # A run found this much past due (the gateway was down) is skipped instead of sent late.
    grace_hours: float = Field(12.0, gt=0)
    # A run sent this much after its time carries "(late: due 14:00)".
    late_after_seconds: float = Field(60.0, ge=0)
    max_jobs: int = Field(200, ge=1, le=100_000)  # per workspace
    agent_timeout_seconds: float = Field(180.0, gt=0)
    max_tool_rounds: int = Field(5, ge=1, le=50)  # an agent task's light turn
    rescan_seconds: float = Field(30.0, gt=0)  # hand edits and new workspaces picked up
    # Keyed by person id; a person's zone: this, else [heartbeat.workspaces.<id>] timezone,
    # else the top-level timezone, else the machine's zone.
    workspaces: dict[str, ScheduleOverride] = Field(default_factory=dict)
