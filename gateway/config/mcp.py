"""The `[mcp]` settings section: Model Context Protocol tool servers (docs/skills-and-mcp.md).

```toml
[mcp.servers.calendar]
command = "uvx"
args = ["mcp-calendar"]
env = { CALENDAR_TOKEN = "..." }   # secrets: redacted in logs, never shown to the model
contexts = ["owner_dm", "heartbeat"] # the default; "group" must be listed explicitly
```
Each value in `env` and `headers` is treated as a secret. A server is either `command` (stdio,
a child process) or `url` (streamable HTTP), never both.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

# Where a server's tools may appear. "owner_dm": the gateway owner's DMs; "heartbeat": the
# owner's heartbeat turns; "people": another person's DM (or heartbeat) in their own workspace;
# "group": group chats. See gateway/capabilities/contexts.py.
ContextName = Literal["owner_dm", "heartbeat", "people", "group"]
DEFAULT_CONTEXTS: tuple[ContextName, ...] = ("owner_dm", "heartbeat")
# The server name prefixes its tools' names (`name__tool`), which providers cap at 64 characters
# of [A-Za-z0-9_-].
SERVER_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9-]{0,23}$")


class McpServerSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    command: str = ""  # stdio: the program to start
    args: list[str] = Field(default_factory=list)
    env: dict[str, SecretStr] = Field(default_factory=dict)
    cwd: Path | None = None
    url: str = ""  # streamable HTTP endpoint, e.g. http://127.0.0.1:8000/mcp
    headers: dict[str, SecretStr] = Field(default_factory=dict)
    contexts: list[ContextName] = Field(default_factory=lambda: list(DEFAULT_CONTEXTS))
    # Only these of the server's tools (by their own names); empty: all of them.
    tools: list[str] = Field(default_factory=list)
    startup_timeout_seconds: float = Field(30.0, gt=0, le=600)
    # One call holds the person's conversation (its lane) while it runs: a hung server must
    # not keep them waiting a minute. Most tool calls answer in a few seconds; raise it per
    # server for slow ones (a long search, a report).
    call_timeout_seconds: float = Field(20.0, gt=0, le=3600)
    restart_initial_seconds: float = Field(1.0, ge=0, le=3600)
    restart_max_seconds: float = Field(300.0, ge=0, le=86_400)

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerSettings:
        if bool(self.command) == bool(self.url):
            raise ValueError("set either command (stdio) or url (streamable HTTP), not both")
        if self.url and not re.match(r"^https?://", self.url):
            raise ValueError(f"url must start with http:// or https://, got {self.url!r}")
        return self

    def secrets(self) -> list[str]:
        """Every value that must never reach a log line or the model."""
        values = [*self.env.values(), *self.headers.values()]
        return [v.get_secret_value() for v in values if v.get_secret_value()]


class McpSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    servers: dict[str, McpServerSettings] = Field(default_factory=dict)
    # Characters of MCP tool schemas per request; past it the least recently used servers'
    # tools are summarised in one line each and loaded when the model asks (mcp_load_tools).
    tool_schema_max_chars: int = Field(16_000, ge=0, le=1_000_000)
    # One tool result, as the model sees it (like the file tools' cap).
    result_max_chars: int = Field(50_000, ge=1_000, le=1_000_000)

    @field_validator("servers")
    @classmethod
    def _names(cls, servers: dict[str, McpServerSettings]) -> dict[str, McpServerSettings]:
        for name in servers:
            if not SERVER_NAME.match(name):
                raise ValueError(
                    f"server name {name!r}: use 1-24 letters, digits or '-' "
                    "(it prefixes tool names)"
                )
        return servers

    def secrets(self) -> list[str]:
        return [secret for server in self.servers.values() for secret in server.secrets()]
