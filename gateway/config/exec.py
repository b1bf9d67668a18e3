"""The `[exec]` settings section: the `exec` tool, its approvals and its limits (docs/exec.md).

```toml
[exec]
mode = "allowlist"          # allowlist (default) | ask | off
allow = ["ls", "git status", "python3 plot.py"]
people = []                 # approved people besides the owner who may run commands
network = []                # people whose commands may reach public addresses
```

Every limit has a default that is safe for a person's assistant on a small machine: a command
that meets one ends as a tool result saying which, and nobody else is slowed. The sandbox
itself has no setting that weakens it (no host fallback, no extra mounts of the host); `mode`
only says when the owner is asked, never whether the sandbox holds.
"""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator
from pydantic_settings import NoDecode

from memory.layout import PRIVATE, is_group_readable, is_private_relpath, write_refusal

__all__ = ["ExecSettings"]


def _words(value: Any) -> Any:
    """A TOML list, or in the environment a JSON list or a comma-separated string."""
    if isinstance(value, str) and value.lstrip().startswith("["):
        import json

        try:
            return json.loads(value)
        except json.JSONDecodeError as exc:
            raise ValueError(f"not a JSON list: {exc.msg}") from exc
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    return value


_PERSON = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$"


class ExecSettings(BaseModel):
    """`[exec]`: who may run commands, when the owner is asked, what one command may use."""

    model_config = ConfigDict(extra="forbid")

    # The exec tool where the sandbox runs (it is never offered without it).
    enabled: bool = True
    # allowlist: commands matching `allow` run, others ask the owner; ask: every command
    # asks; off: nothing asks (the sandbox still holds).
    mode: Literal["allowlist", "ask", "off"] = "allowlist"
    # Commands that run without asking, as words ("ls", "git status", "git status $").
    allow: Annotated[list[str], NoDecode, BeforeValidator(_words)] = Field(default_factory=list)
    # Approved people besides the owner whose own DMs get the tool (person ids, as in
    # `clawgate users`); the owner decides their commands too.
    people: Annotated[list[str], NoDecode, BeforeValidator(_words)] = Field(default_factory=list)
    # People (the owner's id included) whose commands may reach public addresses through
    # the proxy; nobody's by default.
    network: Annotated[list[str], NoDecode, BeforeValidator(_words)] = Field(default_factory=list)
    # A pending approval expires after this many seconds.
    approval_seconds: float = Field(600.0, ge=10, le=7 * 86400)
    # How long the turn that asked waits for the decision; later decisions run the command
    # and post the result in the chat that asked.
    wait_seconds: float = Field(120.0, ge=0, le=3600)
    # Where bubblewrap is ("" finds it on PATH or where distributions install it).
    bwrap: str = ""

    # Wall time of one command; at the end the whole sandbox (its pid namespace) is killed.
    wall_seconds: float = Field(60.0, gt=0, le=3600)
    # CPU seconds of each process (RLIMIT_CPU): a busy loop ends even inside the wall time.
    cpu_seconds: int = Field(60, ge=1, le=3600)
    # Address space of each process (RLIMIT_AS), in MiB.
    memory_mb: int = Field(1024, ge=64, le=65536)
    # Processes and threads inside the sandbox (RLIMIT_NPROC in its own user namespace).
    processes: int = Field(64, ge=4, le=4096)
    # Largest file a command may write (RLIMIT_FSIZE), in MiB.
    file_mb: int = Field(256, ge=1, le=65536)
    # Bytes one command may add to the workspace (measured while it runs and after it),
    # in MiB; the workspace's own quota ([tools] workspace_max_bytes) caps it further.
    write_mb: int = Field(512, ge=1, le=65536)
    # New files (inodes) one command may create.
    max_new_files: int = Field(100_000, ge=100)
    # The private /tmp (memory-backed), in MiB.
    tmp_mb: int = Field(128, ge=1, le=8192)
    # Output kept for the model (stdout and stderr together, head and tail), in bytes.
    output_max_bytes: int = Field(16_384, ge=1_024, le=1_048_576)
    # Output saved as a workspace file when longer than that, in MiB (the rest is counted).
    output_file_mb: int = Field(16, ge=1, le=1024)
    # Where longer output is saved, relative to the workspace.
    output_dir: str = "exec-output"
    # Commands running at once on this gateway (the rest wait their turn).
    max_running: int = Field(20, ge=1, le=256)
    # Ports a command with network allowed may connect to through the proxy ([] = any).
    network_ports: list[int] = Field(default_factory=lambda: [80, 443])

    @field_validator("output_dir")
    @classmethod
    def _plain_folder(cls, value: str) -> str:
        """A folder the owner's files may live in: relative, no dot-names, not private,
        not read by groups, not the transcripts."""
        path = PurePosixPath(value.strip())
        if (
            not path.parts
            or path.is_absolute()
            or any(p in ("..", ".") or p.startswith(".") for p in path.parts)
        ):
            raise ValueError("must be a plain folder inside the workspace, like exec-output")
        text = str(path)
        if is_group_readable(text) or is_private_relpath(text) or write_refusal(PRIVATE, text):
            raise ValueError(f"{text} is read by groups or kept private; choose another folder")
        return text

    @field_validator("people", "network")
    @classmethod
    def _people(cls, value: list[str]) -> list[str]:
        import re

        bad = [person for person in value if not re.match(_PERSON, person)]
        if bad:
            raise ValueError(f"not a person id: {bad[0]!r}")
        return sorted(set(value))

    @field_validator("allow")
    @classmethod
    def _entries(cls, value: list[str]) -> list[str]:
        if any(not entry.strip() or "\n" in entry for entry in value):
            raise ValueError('an allow entry is one line of words, like "git status"')
        return [entry.strip() for entry in value]

    @field_validator("network_ports")
    @classmethod
    def _ports(cls, value: list[int]) -> list[int]:
        if any(not 0 < port < 65536 for port in value):
            raise ValueError("ports are 1 to 65535")
        return sorted(set(value))
