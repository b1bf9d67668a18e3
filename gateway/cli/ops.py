"""Operating commands: `backup`, `restore`, `clone`, `status`, `healthcheck`."""

import asyncio
import json
import sqlite3
import urllib.error
import urllib.request
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import typer

from gateway.assembly.backup import (
    BackupError,
    BackupMistake,
    backup,
    clone,
    list_workspaces,
    restore,
)
from gateway.cli.common import (
    EXIT_FAILED,
    EXIT_USAGE,
    CliError,
    fail,
    json_time,
    print_json,
    resolve_workspace,
    settings,
)
from gateway.cli.options import JsonOption
from gateway.config.settings import Settings
from gateway.ops.versioning import Versioning
from gateway.stores.state import state_path
from gateway.workspace.seed import SESSIONS_DIR, WorkspaceError
from memory.layout import RECALL_DIR


def register(app: typer.Typer) -> None:
    app.command("backup", help="archive workspaces (consistent while running)")(backup_command)
    app.command("restore", help="unpack a backup (never overwrites unless --force)")(
        restore_command
    )
    app.command("clone", help="copy a workspace under a new name")(clone_command)
    app.command("status", help="channels, workspaces, sessions, heartbeats, index")(status_command)
    app.command(
        "healthcheck", help="exit 0 if this gateway's /healthz answers (prints the result)"
    )(healthcheck_command)


# --- backup / restore / clone -----------------------------------------------------------------


def backup_command(
    output: Annotated[
        Path, typer.Option("--output", "-o", metavar="FILE.tar.gz", help="the archive to write")
    ],
    workspace: Annotated[
        str | None,
        typer.Option(
            "--workspace",
            "-w",
            metavar="NAME|PATH",
            help="only this workspace: a person id (e.g. ana) or a directory; without it, every "
            "workspace and the gateway state database",
        ),
    ] = None,
    all_: Annotated[
        bool,
        typer.Option(
            "--all",
            help="every workspace and the gateway state database (the same as giving "
            "no --workspace)",
        ),
    ] = False,
    force: Annotated[bool, typer.Option("--force", help="replace an existing archive")] = False,
) -> None:
    if workspace is not None and all_:
        raise CliError("give --workspace or --all, not both")
    if output.exists() and not force:
        raise CliError(
            f"{output} already exists: choose another --output, or add --force to replace it"
        )
    config = settings()
    root = config.workspaces_dir
    if workspace is not None:
        workspaces, state = [resolve_workspace(workspace, config)], None
    else:
        workspaces, state = list_workspaces(root), state_path(root)
    try:
        report = backup(output, workspaces, state_db=state)
    except BackupMistake as exc:
        raise CliError(str(exc)) from None
    except (BackupError, OSError, sqlite3.Error) as exc:
        raise typer.Exit(fail(f"backup failed: {exc}")) from None
    print(
        f"wrote {report.output}: {len(report.workspaces)} workspace(s), {report.files} files, "
        f"{report.databases} database(s) copied via the SQLite backup API"
        + (", gateway state included" if report.state else "")
    )
    for skipped in report.skipped:
        print(f"  skipped {skipped}")


def restore_command(
    archive: Annotated[Path, typer.Argument(metavar="FILE.tar.gz")],
    root: Annotated[
        Path | None,
        typer.Option("--root", metavar="DIR", help="workspaces root (default: workspaces_dir)"),
    ] = None,
    rename: Annotated[
        str,
        typer.Option("--as", metavar="NAME", help="restore a one-workspace backup under this name"),
    ] = "",
    force: Annotated[
        bool, typer.Option("--force", help="replace what exists (it is moved to <root>/.trash/)")
    ] = False,
    no_state: Annotated[
        bool, typer.Option("--no-state", help="leave the gateway state database out")
    ] = False,
) -> None:
    config = settings()
    target = root or config.workspaces_dir
    try:
        report = restore(archive, target, force=force, rename=rename, with_state=not no_state)
    except (BackupError, WorkspaceError) as exc:
        hint = ""
        if rename and not no_state and str(state_path(target)) in str(exc):
            hint = " (with --as, add --no-state to keep the current gateway state)"
        mistake = isinstance(exc, (BackupMistake, WorkspaceError))
        raise typer.Exit(fail(f"{exc}{hint}", EXIT_USAGE if mistake else EXIT_FAILED)) from None
    for name in report.workspaces:
        print(f"restored workspace {target / name}")
    if report.state:
        print("restored the gateway state database (restart the gateway to use it)")
    for path in report.moved_aside:
        print(f"moved the previous copy to {path}")


def clone_command(
    source: Annotated[
        str, typer.Argument(metavar="SOURCE", help="the workspace to copy (person id or path)")
    ],
    new: Annotated[str, typer.Argument(metavar="NEW", help="the new workspace's name")],
    no_sessions: Annotated[
        bool,
        typer.Option(
            "--no-sessions", help="leave conversations behind: same memory, fresh sessions"
        ),
    ] = False,
) -> None:
    config = settings()
    path = resolve_workspace(source, config)
    root = path.resolve().parent
    try:
        target = clone(root, path.name, new, sessions=not no_sessions)
    except (BackupMistake, WorkspaceError) as exc:
        raise CliError(str(exc)) from None
    except (BackupError, OSError) as exc:
        raise typer.Exit(fail(str(exc))) from None
    asyncio.run(
        Versioning(enabled=config.versioning.enabled).commit(
            target, "clone", note=f"cloned from {source}"
        )
    )
    print(f"cloned {source} to {target}")


# --- status / healthcheck ---------------------------------------------------------------------


def _health_url(config: Settings, path: str) -> str:
    host = "127.0.0.1" if config.health.host in ("0.0.0.0", "::", "") else config.health.host
    return f"http://{host}:{config.health.port}{path}"


def _get(url: str, timeout: float) -> tuple[int, str] | None:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.status, response.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode("utf-8", "replace")
    except (OSError, ValueError):
        return None


def _probe(config: Settings, path: str, timeout: float = 2.0) -> tuple[int, str] | None:
    return _get(_health_url(config, path), timeout)


def _index_health(workspace: Path) -> dict[str, Any]:
    path = workspace / RECALL_DIR / "index.sqlite"
    if not path.exists():
        return {"present": False}
    info: dict[str, Any] = {"present": True, "bytes": path.stat().st_size}
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=2)
        try:
            info["chunks"] = db.execute("SELECT count(*) FROM chunks").fetchone()[0]
            row = db.execute("SELECT value FROM meta WHERE key = 'last_sync'").fetchone()
            info["last_sync"] = row[0] if row else None
        finally:
            db.close()
    except sqlite3.Error as exc:
        info["error"] = str(exc)
    return info


def _heartbeat(workspace: Path) -> dict[str, Any] | None:
    try:
        from heartbeat.store import load_state
    except ImportError:
        return None
    state = load_state(workspace)
    return {
        "next_beat_at": json_time(state.next_beat_at),
        "last_status": state.last_status or None,
    }


def _messages(workspaces_dir: Path) -> dict[str, Any] | None:
    """Inbox and outbox counts by status, read-only (the gateway may be running)."""
    path = state_path(workspaces_dir)
    if not path.exists():
        return None
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=2)
        try:
            inbox = dict(db.execute("SELECT status, count(*) FROM inbox GROUP BY status"))
            outbox = dict(db.execute("SELECT status, count(*) FROM outbox GROUP BY status"))
        finally:
            db.close()
    except sqlite3.Error as exc:
        return {"error": str(exc)}
    return {
        "pending": inbox.get("pending", 0),
        "given_up": inbox.get("failed", 0),
        "outbox_pending": outbox.get("pending", 0),
    }


def collect_status(config: Settings) -> dict[str, Any]:
    from gateway.assembly.platforms import configured_platforms
    from gateway.pipeline.links import PLATFORMS

    configured = configured_platforms(config)
    versioning = Versioning(enabled=config.versioning.enabled)
    workspaces = []
    for ws in list_workspaces(config.workspaces_dir):
        transcripts = (
            sorted((ws / SESSIONS_DIR).glob("*.jsonl")) if (ws / SESSIONS_DIR).is_dir() else []
        )
        last = max((p.stat().st_mtime for p in transcripts), default=None)
        head = asyncio.run(versioning.head(ws)) if versioning.enabled else None
        workspaces.append(
            {
                "name": ws.name,
                "sessions": len(transcripts),
                "last_activity": json_time(datetime.fromtimestamp(last, UTC)) if last else None,
                "last_commit": f"{head.rev} {head.date} {head.subject}" if head else None,
                "heartbeat": _heartbeat(ws),
                "index": _index_health(ws),
            }
        )
    report: dict[str, Any] = {
        "channels": {p: p in configured for p in PLATFORMS},
        "workspaces_dir": str(config.workspaces_dir.resolve()),
        "workspaces": workspaces,
        "versioning": "on" if versioning.enabled else "off",
        "messages": _messages(config.workspaces_dir),
        "gateway": {"running": False},
    }
    if config.health.enabled:
        probe = _probe(config, "/readyz")
        if probe is not None:
            try:
                report["gateway"] = {"running": True, **json.loads(probe[1])}
            except ValueError:
                report["gateway"] = {"running": True, "ready": probe[0] == 200}
    return report


def status_command(as_json: JsonOption = False) -> None:
    config = settings()
    report = collect_status(config)
    if as_json:
        print_json(report)
        return
    channels = ", ".join(
        f"{n} ({'configured' if on else 'not configured'})" for n, on in report["channels"].items()
    )
    print(f"channels: {channels}")
    probed = report["gateway"]  # what its /readyz said
    if probed["running"]:
        state = "ready" if probed.get("ready") else "NOT ready"
        print(f"gateway: running, {state}; queue depth {probed.get('queue_depth', '?')}")
        for name, detail in (probed.get("channels") or {}).items():
            print(f"  {name}: {'ready' if detail['ready'] else 'down'} ({detail['detail']})")
    else:
        print("gateway: not reachable on its health port (not running, or [health] disabled)")
    print(f"versioning: {report['versioning']}")
    messages = report["messages"]
    if messages is not None:
        if "error" in messages:
            print(f"messages: state database unreadable ({messages['error']})")
        else:
            print(
                f"messages: {messages['pending']} waiting for an answer, "
                f"{messages['outbox_pending']} answer(s) waiting to be sent, "
                f"{messages['given_up']} given up or unreadable"
                + (' (see the log: "gave up on", "skipped")' if messages["given_up"] else "")
            )
    print(f"workspaces in {report['workspaces_dir']}: {len(report['workspaces'])}")
    for ws in report["workspaces"]:
        print(
            f"  {ws['name']}: {ws['sessions']} session(s), last activity "
            f"{ws['last_activity'] or 'never'}"
        )
        if ws["last_commit"]:
            print(f"    last change: {ws['last_commit']}")
        beat = ws["heartbeat"]
        if beat is not None:
            print(f"    next heartbeat: {beat['next_beat_at'] or 'not planned'}")
        index = ws["index"]
        if index.get("present"):
            detail = index.get("error") or (
                f"{index.get('chunks', '?')} chunks, last sync {index.get('last_sync') or 'never'}"
            )
            print(f"    recall index: {detail}")
        else:
            print("    recall index: not built yet")


def healthcheck_command(
    url: Annotated[str, typer.Option("--url", help="default: from the [health] settings")] = "",
) -> None:
    config = settings()
    target = url or _health_url(config, "/healthz")
    probe = _get(target, timeout=3)
    if probe is None:
        raise typer.Exit(fail(f"unhealthy: nothing answers at {target}"))
    status, body = probe
    if status != 200:
        raise typer.Exit(fail(f"unhealthy: {target} answered HTTP {status}"))
    try:
        answer = json.loads(body)
    except ValueError:
        answer = None
    if not url:
        from gateway.pipeline.health import instance_id

        mine = instance_id(config.workspaces_dir)
        theirs = answer.get("instance") if isinstance(answer, dict) else None
        if theirs != mine:
            raise typer.Exit(
                fail(
                    f"unhealthy: what answers at {target} is not this gateway (another clawgate "
                    f"with other workspaces, or another program): check [health] port"
                )
            )
    print(f"healthy: {target} answered 200")
