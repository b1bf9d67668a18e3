"""`clawgate memory find` and `clawgate memory correct`: the owner fixes a fact by hand.

The same operations as the assistant's `memory_find` / `memory_correct` tools
(memory/corrections.py), on MEMORY.md, USER.md and memory/*.md only, through the workspace's
path confinement, written atomically. A correction is its own commit (reason `hand edit`), so
`clawgate memory undo` takes it back.
"""

import asyncio
import os
from datetime import date
from typing import Annotated

import typer

from gateway.cli.common import CliError, print_json, resolve_workspace, settings
from gateway.cli.options import JsonOption, WorkspaceOption
from gateway.ops.versioning import Versioning, VersioningError
from memory.atomic import atomic_write_text
from memory.corrections import (
    ACTIONS,
    CorrectionError,
    correct_text,
    find_in_files,
    written_lines,
)
from memory.sources import is_memory_path


def add_commands(app: typer.Typer) -> None:
    """`memory find` and `memory correct` on the `memory` command group (gateway/cli/memory.py
    calls this; this module does not import it back). Once: the command tree is built again
    for every command line run in one process (tests)."""
    if any(command.name == "find" for command in app.registered_commands):
        return
    app.command("find", help="lines of MEMORY.md, USER.md and memory/*.md mentioning TEXT")(
        find_command
    )
    app.command(
        "correct",
        help="replace, strike (keep as superseded) or delete one line of "
        "a memory file; undo with `clawgate memory undo`",
    )(correct_command)


def find_command(
    text: Annotated[str, typer.Argument(help="the words the lines must contain")],
    workspace: WorkspaceOption = None,
    limit: Annotated[int, typer.Option("--limit", "-n", min=1, max=500)] = 50,
    as_json: JsonOption = False,
) -> None:
    path = resolve_workspace(workspace, settings())
    try:
        found = find_in_files(path, text, limit=limit)
    except CorrectionError as exc:
        raise CliError(str(exc)) from exc
    if as_json:
        print_json(
            [{"path": f.path, "line": f.line, "text": f.text, "struck": f.struck} for f in found]
        )
        return
    if not found:
        print(f"no line mentions {text!r}")
    for item in found:
        print(
            f"{item.path}:{item.line}: {item.text.strip()}" + (" [struck]" if item.struck else "")
        )


def correct_command(
    file: Annotated[str, typer.Argument(metavar="FILE", help="MEMORY.md, USER.md or memory/...md")],
    old_text: Annotated[str, typer.Argument(metavar="OLD", help="text of the line to change")],
    action: Annotated[
        str, typer.Option("--action", "-a", help="replace, strike or delete")
    ] = "strike",
    new_text: Annotated[str, typer.Option("--to", help="the corrected fact")] = "",
    reason: Annotated[str, typer.Option("--reason", help="why (strike)")] = "",
    line: Annotated[
        int, typer.Option("--line", min=0, help="the line, when OLD is on several")
    ] = 0,
    workspace: WorkspaceOption = None,
) -> None:
    import gateway.workspace.paths as paths

    config = settings()
    root = resolve_workspace(workspace, config)
    if action not in ACTIONS:
        raise CliError(f"--action must be one of {', '.join(ACTIONS)}")
    try:
        target = paths.resolve_in_workspace(
            root, file, private=True, write=True, attended=True
        )  # the owner at the keyboard
    except paths.PathRefused as exc:
        raise CliError(str(exc)) from exc
    rel = os.path.relpath(target, os.path.realpath(root)).replace(os.sep, "/")
    if not is_memory_path(rel) or rel.endswith(".jsonl"):
        raise CliError(f"{rel} is not a memory file (MEMORY.md, USER.md, memory/*.md)")
    if not target.is_file():
        raise CliError(f"no such file: {rel}")
    today = date.today().isoformat()
    versioning = Versioning(enabled=config.versioning.enabled)
    versioned = (root / ".git").exists()

    async def commit(note: str) -> None:
        if versioned:
            await versioning.commit(root, "hand edit", note=note)

    try:
        asyncio.run(commit("noticed by `clawgate memory correct`"))  # earlier edits apart
        text = target.read_text(encoding="utf-8")
        result, changed = correct_text(
            text, old_text, action, new_text=new_text, line=line or None, when=today, reason=reason
        )
        atomic_write_text(target, result)
        asyncio.run(commit(f"clawgate memory correct: {action} {rel}:{changed}"))
    except CorrectionError as exc:
        raise CliError(f"{exc}; nothing was written") from exc
    except (OSError, UnicodeDecodeError, VersioningError) as exc:
        raise CliError(f"could not correct {rel}: {exc}") from exc
    done = {"replace": "replaced", "strike": "struck", "delete": "deleted"}[action]
    was = text.split("\n")[changed - 1]
    now = written_lines(result, changed, action, new_text)
    if action == "strike":
        print(f"struck line {changed} of {rel}; it now reads:")
        for shown in now:
            print(f"  {shown}")
    else:
        print(f"{done} line {changed} of {rel}:")
        print(f"  was: {was}")
        for shown in now:
            print(f"  now: {shown}")
    if versioned:
        print("`clawgate memory undo` takes it back")
