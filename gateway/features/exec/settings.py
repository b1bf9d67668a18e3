"""The limits and switches of command execution (`[exec]` once the wiring phase adds it).

Every limit has a default that is safe for a person's assistant on a small machine: a command
that meets one ends as a tool result saying which, and nobody else is slowed. The sandbox
itself has no setting that weakens it (no host fallback, no extra mounts of the host).
"""

from __future__ import annotations

from pathlib import PurePosixPath

from pydantic import BaseModel, ConfigDict, Field, field_validator

from memory.layout import PRIVATE, is_group_readable, is_private_relpath, write_refusal

__all__ = ["ExecSettings"]


class ExecSettings(BaseModel):
    """`[exec]`: where commands may run and what one command may use."""

    model_config = ConfigDict(extra="forbid")

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
        if (not path.parts or path.is_absolute() or any(p in ("..", ".") or p.startswith(".")
                                                        for p in path.parts)):
            raise ValueError("must be a plain folder inside the workspace, like exec-output")
        text = str(path)
        if is_group_readable(text) or is_private_relpath(text) or write_refusal(PRIVATE, text):
            raise ValueError(f"{text} is read by groups or kept private; choose another folder")
        return text

    @field_validator("network_ports")
    @classmethod
    def _ports(cls, value: list[int]) -> list[int]:
        if any(not 0 < port < 65536 for port in value):
            raise ValueError("ports are 1 to 65535")
        return sorted(set(value))
