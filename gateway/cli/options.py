"""Options several Typer command groups share (kept out of common.py, which `clawgate run`
imports without Typer)."""

from typing import Annotated

import typer

WorkspaceOption = Annotated[
    str | None,
    typer.Option(
        "--workspace",
        "-w",
        metavar="NAME|PATH",
        help="a person id (e.g. ana, telegram-123) or a workspace directory (default: the owner's)",
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="machine-readable JSON on stdout")]
