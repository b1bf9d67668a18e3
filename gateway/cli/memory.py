"""`clawgate memory ...`: a workspace's recall index (index, search, status), its history
(log, diff, undo) and corrections (find, correct: gateway/cli/memory_corrections.py).

A public contract: works on any directory with the workspace layout, without the gateway
running. `search --json` prints only a JSON array on stdout; everything else goes to stderr.
Read-only commands (status, search of an existing index, log, diff) create no file; `index`
and `undo` are the commands that change something, and say what they changed.
"""

import asyncio
import json
import re
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

import typer

from gateway.cli.common import (
    EXIT_FAILED,
    EXIT_USAGE,
    CliError,
    fail,
    json_time,
    print_json,
    print_table,
    resolve_workspace,
    settings,
)
from gateway.cli.options import JsonOption, WorkspaceOption
from gateway.config.settings import Settings
from gateway.ops.versioning import UnknownRevision, Versioning, VersioningError, undo_words
from memory.defaults import DEFAULT_MAX_RESULTS
from memory.layout import RECALL_DIR

app = typer.Typer(
    help="a workspace's memory: recall index (index, search, status) and history (log, diff, undo)",
    no_args_is_help=True,
)
RevArgument = Annotated[
    str,
    typer.Argument(metavar="[REV]", help="a revision from `memory log` (default: the last change)"),
]
# What `--since` accepts (git would silently read any other text as "now").
_SINCE = re.compile(
    r"^(now|today|yesterday|\d{4}-\d{2}-\d{2}([ T]\d{1,2}:\d{2}(:\d{2})?)?|"
    r"\d+\s*(second|minute|hour|day|week|month|year)s?( ago)?)$",
    re.IGNORECASE,
)


def register(root: typer.Typer) -> None:
    from gateway.cli.memory_corrections import add_commands

    add_commands(app)  # find, correct
    root.add_typer(app, name="memory")


# --- the recall index ------------------------------------------------------------------------


def _open_index(workspace: Path, config: Settings) -> Any:
    from gateway.config.memory import build_recall_index

    return build_recall_index(
        config.memory, workspace, lambda message: print(f"clawgate: {message}", file=sys.stderr)
    )


class _Progress:
    """A Rich progress bar on stderr, only when stderr is a terminal."""

    def __init__(self) -> None:
        self.bar: Any = None
        self.task: Any = None
        self.vector_task: Any = None
        if sys.stderr.isatty():
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeRemainingColumn,
            )

            self.bar = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeRemainingColumn(),
                console=Console(stderr=True),
                transient=True,
            )

    def __enter__(self) -> "_Progress":
        if self.bar is not None:
            self.bar.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.stop()

    def __call__(self, done: int, total: int) -> None:
        if self.bar is None or not total:
            return
        if self.task is None:
            self.task = self.bar.add_task("reading files", total=total)
        self.bar.update(self.task, completed=done, total=total)

    def vectors(self, progress: Any) -> None:
        """Per-batch progress of computing vectors (memory.index.EmbedProgress): chunks
        done of all, the rate, and the estimate the index computes."""
        if self.bar is None or not progress.total:
            return
        eta = progress.eta_seconds
        left = f", ~{_duration(eta)} left" if eta is not None else ""
        label = f"embedding ({progress.per_second:.1f} chunks/s{left})"
        if self.vector_task is None:
            self.vector_task = self.bar.add_task(label, total=progress.total)
        self.bar.update(
            self.vector_task, completed=progress.done, total=progress.total, description=label
        )


def _duration(seconds: float) -> str:
    whole = round(seconds)
    return f"{whole // 60} min {whole % 60:02d} s" if whole >= 60 else f"{whole} s"


@app.command("index", help="bring a workspace's recall index up to date")
def index_command(
    workspace: WorkspaceOption = None,
    force: Annotated[bool, typer.Option("--force", help="rebuild from scratch")] = False,
) -> None:
    config = settings()
    index = _open_index(resolve_workspace(workspace, config), config)

    async def run(progress: _Progress) -> Any:
        try:
            return (
                await index.sync(force=force, progress=progress, vector_progress=progress.vectors),
                await index.status(),
            )
        finally:
            await index.close()

    started = time.perf_counter()
    with _Progress() as progress:
        stats, status = asyncio.run(run(progress))
    print(
        f"indexed {status.files} files, {status.chunks} chunks ({status.mode}, "
        f"{status.embedder} {status.dimension}d) in {time.perf_counter() - started:.2f} s: "
        f"{stats.files_indexed} files (re)indexed, {stats.files_removed} removed, "
        f"{stats.chunks_added} chunks added, {stats.chunks_removed} removed, "
        f"{stats.embedded} embedded, {stats.cached} from cache"
        + (", rebuilt" if stats.rebuilt else "")
    )
    if stats.embed_error:
        print(
            f"warning: embedding failed ({stats.embed_error}); those chunks are "
            "keyword-only until the next index",
            file=sys.stderr,
        )


@app.command("search", help="search a workspace's memory")
def search_command(
    query: Annotated[str, typer.Argument(help="what to look for")],
    workspace: WorkspaceOption = None,
    limit: Annotated[
        int, typer.Option("--limit", help=f"number of results (default {DEFAULT_MAX_RESULTS})")
    ] = DEFAULT_MAX_RESULTS,
    min_score: Annotated[float, typer.Option("--min-score", help="drop results below this")] = 0.0,
    as_json: Annotated[
        bool, typer.Option("--json", help="print a JSON array, nothing else")
    ] = False,
    wait: Annotated[
        bool,
        typer.Option(
            "--wait",
            help="compute every missing vector before searching (default: answer at "
            "once; text not embedded yet is found by its words)",
        ),
    ] = False,
) -> None:
    if limit < 1:
        raise CliError("--limit must be 1 or more")
    config = settings()
    index = _open_index(resolve_workspace(workspace, config), config)

    async def run(progress: _Progress) -> Any:
        try:
            if wait:
                await index.sync(progress=progress, vector_progress=progress.vectors)
            return await index.search(query, max_results=limit, min_score=min_score)
        finally:
            await index.close()

    with _Progress() as progress:
        response = asyncio.run(run(progress))
    if response.pending:
        response.note += " (run `clawgate memory index` or search with --wait to embed " + (
            "them)" if response.pending > 1 else "it)"
        )
    if as_json:
        json.dump([r.as_dict() for r in response.results], sys.stdout, ensure_ascii=False)
        sys.stdout.write("\n")
        if response.note:
            print(f"note: {response.note}", file=sys.stderr)
        return
    print(f"mode: {response.mode}" + (f" ({response.note})" if response.note else ""))
    if not response.results:
        print(f"no memory matched {query!r}")
    for number, result in enumerate(response.results, start=1):
        best = f" (best line {result.line})" if result.line is not None else ""
        print(
            f"\n{number}. {result.path}:{result.start_line}-{result.end_line}{best} "
            f"score {result.score:.3f} [{result.source}]"
        )
        print("   " + result.snippet.replace("\n", "\n   "))


@app.command("status", help="files, chunks, embedder, dirty, last sync (creates nothing)")
def status_command(workspace: WorkspaceOption = None, as_json: JsonOption = False) -> None:
    config = settings()
    path = resolve_workspace(workspace, config)
    index = _open_index(path, config)
    if not index.path.exists():  # read-only: never build an index to report on it
        if as_json:
            print_json({"path": str(index.path), "present": False})
        else:
            print(
                f"no recall index yet in {path}: build it with "
                f"`clawgate memory index --workspace {path}` (the running gateway builds it "
                "at the first search)"
            )
        return

    async def run() -> Any:
        try:
            return await index.status()
        finally:
            await index.close()

    status = asyncio.run(run())
    if as_json:
        print(json.dumps(status.__dict__, ensure_ascii=False))
        return
    print(f"index:      {status.path}")
    print(f"files:      {status.files}")
    print(f"chunks:     {status.chunks} ({status.vectors} with vectors)")
    print(f"embedder:   {status.embedder}" + (f" ({status.model})" if status.model else ""))
    print(f"dimension:  {status.dimension}")
    if status.line_model:
        print(f"line model: {status.line_model}")
    print(f"mode:       {status.mode}" + (f" - {status.note}" if status.note else ""))
    print(f"dirty:      {'yes (files changed since the last sync)' if status.dirty else 'no'}")
    print(f"last sync:  {status.last_sync or 'never'}")


# --- history: log / diff / undo ---------------------------------------------------------------


def _versioning(config: Settings) -> Versioning:
    return Versioning(enabled=config.versioning.enabled)


def check_since(value: str) -> str:
    """`--since` as git understands it, or a CliError (git reads unknown text as now)."""
    if value and not _SINCE.match(value.strip()):
        raise CliError(
            f"--since {value!r} is not a time: use a date (2026-03-01), "
            "'yesterday', or '2 hours ago'"
        )
    return value.strip()


@app.command("log", help="what changed, when and why (newest first)")
def log_command(
    workspace: WorkspaceOption = None,
    limit: Annotated[int, typer.Option("--limit", "-n", help="at most this many")] = 20,
    since: Annotated[
        str, typer.Option("--since", metavar="WHEN", help='e.g. "yesterday", "2 hours ago", a date')
    ] = "",
    as_json: JsonOption = False,
) -> None:
    since = check_since(since)
    config = settings()
    path = resolve_workspace(workspace, config)
    versioning = _versioning(config)

    async def run() -> list[Any]:
        if (path / ".git").exists():  # a plain folder stays plain: log never runs git init
            await versioning.commit(path, "hand edit", note="noticed by `clawgate memory log`")
        return await versioning.log(path, limit=limit, since=since)

    try:
        commits = asyncio.run(run())
    except VersioningError as exc:
        raise typer.Exit(fail(str(exc))) from None
    if as_json:
        print_json(
            [
                {
                    "rev": c.rev,
                    "date": json_time(datetime.fromisoformat(c.date)),
                    "subject": c.subject,
                    "files": list(c.files),
                }
                for c in commits
            ]
        )
        return
    if not commits:
        print("no changes in that period")
        return
    print_table(("rev", "date", "change"), ((c.rev, c.date, c.subject) for c in commits))


def _history_failure(exc: VersioningError) -> int:
    """An unknown revision is a mistake in the command (2); anything else failed (1)."""
    return fail(str(exc), EXIT_USAGE if isinstance(exc, UnknownRevision) else EXIT_FAILED)


@app.command("diff", help="the change made by REV (default: the last one)")
def diff_command(workspace: WorkspaceOption = None, rev: RevArgument = "") -> None:
    config = settings()
    path = resolve_workspace(workspace, config)
    try:
        print(asyncio.run(_versioning(config).diff(path, rev)), end="")
    except VersioningError as exc:
        raise typer.Exit(_history_failure(exc)) from None


@app.command("undo", help="undo the change made by REV (default: the last one)")
def undo_command(
    workspace: WorkspaceOption = None,
    rev: RevArgument = "",
    to: Annotated[
        bool, typer.Option("--to", help="restore every versioned file as it was at REV instead")
    ] = False,
) -> None:
    config = settings()
    path = resolve_workspace(workspace, config)
    try:
        changed = asyncio.run(_versioning(config).undo(path, rev, to=to))
    except VersioningError as exc:
        raise typer.Exit(_history_failure(exc)) from None
    if not changed:
        print("nothing to undo: the files already have that content")
        return
    print(undo_words(changed))
    if (path / RECALL_DIR).exists():
        # The recall index compares files by mtime and size: the restored files are new to it,
        # so its next sync (the running gateway's watcher, or the next search) re-indexes them.
        print("the recall index re-indexes them at its next sync")
