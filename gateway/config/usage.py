"""The `[budget]` section and the `[prices.<model>]` table (docs/usage.md)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class ModelPrice(BaseModel):
    """US dollars per million tokens. Unset cache prices follow the usual rule: a cache read
    costs a tenth of an input token, a cache write (Anthropic, 5-minute cache) 1.25 times."""

    model_config = ConfigDict(extra="forbid")

    input: float = Field(ge=0)
    output: float = Field(ge=0)
    cache_read: float | None = Field(None, ge=0)
    cache_write: float | None = Field(None, ge=0)


class BudgetOverride(BaseModel):
    """One person's caps (`[budget.workspaces.<person>]`); unset values come from `[budget]`,
    except for the owner, whose only caps are the ones set here."""

    model_config = ConfigDict(extra="forbid")

    daily_tokens: int | None = Field(None, ge=0)
    monthly_tokens: int | None = Field(None, ge=0)
    daily_usd: float | None = Field(None, ge=0)
    monthly_usd: float | None = Field(None, ge=0)


class BudgetSettings(BaseModel):
    """Caps per person on what their turns cost, every kind of turn counted (0: no cap).

    Tokens count everything the provider processed: input, output, cache reads and writes.
    Days and months are calendar ones in the gateway's `timezone`.
    """

    model_config = ConfigDict(extra="forbid")

    daily_tokens: int = Field(0, ge=0)
    monthly_tokens: int = Field(0, ge=0)
    daily_usd: float = Field(0.0, ge=0)
    monthly_usd: float = Field(0.0, ge=0)
    # Tokens per group chat and day, whoever speaks there (group turns are billed to the
    # owner, whose default caps never limit); 0: no cap. Default: docs/usage.md, "Budgets".
    group_daily_tokens: int = Field(1_000_000, ge=0)
    # The owner gets a note when someone passes this share of a cap (0: no notes).
    warn_at: float = Field(0.8, ge=0, le=1)
    workspaces: dict[str, BudgetOverride] = Field(default_factory=dict)
