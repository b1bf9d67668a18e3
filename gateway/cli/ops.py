"""Operating commands: `memory log|diff|undo`, `backup`, `restore`, `clone`, `status`,
`healthcheck`. Registered in gateway/cli/main.py; each handler returns the exit code.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sqlite3
import sys
import urllib.error
import urllib.request
from datetime import datetime
from pathlib import Path
from typing import Any

from gateway.config.settings import Settings, load_settings
from gateway.ops.backup import BackupError, backup, clone, list_workspaces, restore
from gateway.ops.state import state_path
from gateway.ops.versioning import Versioning, VersioningError
from gateway.workspace.seed import SESSIONS_DIR, WorkspaceError, workspace_path
from memory.layout import RECALL_DIR


def _memory_commands(sub: Any) -> Any:
    """The `memory` command's subcommands; it is shared with the recall index's CLI."""
    memory = sub.choices.get("memory")
    if memory is None:
        memory = sub.add_parser("memory", help="a workspace's memory: history, undo")
        return memory.add_subparsers(title="memory commands")
    for action in memory._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action
    return memory.add_subparsers(title="memory commands")


def register(sub: Any) -> None:
    msub = _memory_commands(sub)
    log_cmd = msub.add_parser("log", help="what changed, when and why (newest first)")
    _workspace_arg(log_cmd)
    log_cmd.add_argument("-n", "--limit", type=int, default=20, help="at most this many")
    log_cmd.add_argument("--since", default="", help='e.g. "yesterday", "2 hours ago", a date')
    log_cmd.set_defaults(handler=cmd_memory_log)
    diff = msub.add_parser("diff", help="the change made by REV (default: the last one)")
    _workspace_arg(diff)
    diff.add_argument("rev", nargs="?", default="", help="a revision from `memory log`")
    diff.set_defaults(handler=cmd_memory_diff)
    undo = msub.add_parser("undo", help="undo the change made by REV (default: the last one)")
    _workspace_arg(undo)
    undo.add_argument("rev", nargs="?", default="", help="a revision from `memory log`")
    undo.add_argument("--to", action="store_true",
                      help="restore every versioned file as it was at REV instead")
    undo.set_defaults(handler=cmd_memory_undo)

    bak = sub.add_parser("backup", help="archive workspaces (consistent while running)")
    which = bak.add_mutually_exclusive_group()
    which.add_argument("--workspace", type=Path, help="one workspace directory")
    which.add_argument("--all", action="store_true",
                       help="every workspace and the gateway state database (the default)")
    bak.add_argument("--output", "-o", type=Path, required=True, help="FILE.tar.gz to write")
    bak.set_defaults(handler=cmd_backup)
    res = sub.add_parser("restore", help="unpack a backup (never overwrites unless --force)")
    res.add_argument("archive", type=Path)
    res.add_argument("--root", type=Path, help="workspaces root (default: workspaces_dir)")
    res.add_argument("--as", dest="rename", default="",
                     help="restore a one-workspace backup under this name")
    res.add_argument("--force", action="store_true",
                     help="replace what exists (it is moved to <root>/.trash/)")
    res.add_argument("--no-state", action="store_true",
                     help="leave the gateway state database out")
    res.set_defaults(handler=cmd_restore)
    cl = sub.add_parser("clone", help="copy a workspace under a new name")
    cl.add_argument("source", help="the workspace (person id) to copy")
    cl.add_argument("new", help="the new workspace's name")
    cl.add_argument("--no-sessions", action="store_true",
                    help="leave conversations behind: same memory, fresh sessions")
    cl.set_defaults(handler=cmd_clone)
    status = sub.add_parser("status", help="channels, workspaces, sessions, heartbeats, index")
    status.add_argument("--json", action="store_true", help="machine-readable output")
    status.set_defaults(handler=cmd_status)
    health = sub.add_parser("healthcheck", help="exit 0 if the running gateway's /healthz answers")
    health.add_argument("--url", default="", help="default: from the [health] settings")
    health.set_defaults(handler=cmd_healthcheck)


def _workspace_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--workspace", type=Path,
                        help="the workspace directory (default: the owner's)")


def _workspace(args: argparse.Namespace, settings: Settings) -> Path:
    if args.workspace is not None:
        return Path(args.workspace)
    return workspace_path(settings.workspaces_dir, settings.owner)


def _fail(message: str) -> int:
    print(f"clawgate: {message}", file=sys.stderr)
    return 1


def _versioning(settings: Settings) -> Versioning:
    return Versioning(enabled=settings.versioning.enabled)


# --- memory log / diff / undo ---------------------------------------------------------------


def cmd_memory_log(args: argparse.Namespace) -> int:
    settings = load_settings()
    workspace = _workspace(args, settings)
    versioning = _versioning(settings)

    async def run() -> list[Any]:
        await versioning.commit(workspace, "hand edit", note="noticed by `clawgate memory log`")
        return await versioning.log(workspace, limit=args.limit, since=args.since)

    try:
        commits = asyncio.run(run())
    except VersioningError as exc:
        return _fail(str(exc))
    if not commits:
        print("no changes in that period")
    for commit in commits:
        print(f"{commit.rev}  {commit.date}  {commit.subject}")
    return 0


def cmd_memory_diff(args: argparse.Namespace) -> int:
    settings = load_settings()
    try:
        print(asyncio.run(_versioning(settings).diff(_workspace(args, settings), args.rev)),
              end="")
    except VersioningError as exc:
        return _fail(str(exc))
    return 0


def cmd_memory_undo(args: argparse.Namespace) -> int:
    settings = load_settings()
    workspace = _workspace(args, settings)
    try:
        changed = asyncio.run(_versioning(settings).undo(workspace, args.rev, to=args.to))
    except VersioningError as exc:
        return _fail(str(exc))
    if not changed:
        print("nothing to undo: the files already have that content")
        return 0
    print(f"restored {len(changed)} file(s): {', '.join(changed)}")
    if (workspace / RECALL_DIR).exists():
        # The recall index compares files by mtime and size: the restored files are new to it,
        # so its next sync (the running gateway's watcher, or the next search) re-indexes them.
        print("the recall index re-indexes them at its next sync")
    return 0


# --- backup / restore / clone -----------------------------------------------------------------


def cmd_backup(args: argparse.Namespace) -> int:
    settings = load_settings()
    root = settings.workspaces_dir
    if args.workspace is not None:
        workspaces, state = [Path(args.workspace)], None
    else:
        workspaces, state = list_workspaces(root), state_path(root)
    try:
        report = backup(args.output, workspaces, state_db=state)
    except (BackupError, OSError, sqlite3.Error) as exc:
        return _fail(f"backup failed: {exc}")
    print(f"wrote {report.output}: {len(report.workspaces)} workspace(s), {report.files} files, "
          f"{report.databases} database(s) copied via the SQLite backup API"
          + (", gateway state included" if report.state else ""))
    for skipped in report.skipped:
        print(f"  skipped {skipped}")
    return 0


def cmd_restore(args: argparse.Namespace) -> int:
    settings = load_settings()
    root = args.root or settings.workspaces_dir
    try:
        report = restore(args.archive, root, force=args.force, rename=args.rename,
                         with_state=not args.no_state)
    except (BackupError, WorkspaceError) as exc:
        return _fail(str(exc))
    for name in report.workspaces:
        print(f"restored workspace {root / name}")
    if report.state:
        print("restored the gateway state database (restart the gateway to use it)")
    for path in report.moved_aside:
        print(f"moved the previous copy to {path}")
    return 0


def cmd_clone(args: argparse.Namespace) -> int:
    settings = load_settings()
    try:
        target = clone(settings.workspaces_dir, args.source, args.new,
                       sessions=not args.no_sessions)
    except (BackupError, WorkspaceError, OSError) as exc:
        return _fail(str(exc))
    asyncio.run(_versioning(settings).commit(target, "clone", note=f"cloned from {args.source}"))
    print(f"cloned {args.source} to {target}")
    return 0


# --- status / healthcheck ---------------------------------------------------------------------


def _probe(settings: Settings, path: str, timeout: float = 2.0) -> tuple[int, str] | None:
    host = "127.0.0.1" if settings.health.host in ("0.0.0.0", "::", "") else settings.health.host
    url = f"http://{host}:{settings.health.port}{path}"
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.status, response.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode("utf-8", "replace")
    except (OSError, ValueError):
        return None


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
        "next_beat_at": state.next_beat_at.isoformat() if state.next_beat_at else None,
        "last_status": state.last_status or None,
    }


def collect_status(settings: Settings) -> dict[str, Any]:
    from gateway.assembly.platforms import PLATFORMS, configured_platforms

    configured = configured_platforms(settings)
    versioning = Versioning(enabled=settings.versioning.enabled)
    workspaces = []
    for ws in list_workspaces(settings.workspaces_dir):
        transcripts = sorted((ws / SESSIONS_DIR).glob("*.jsonl")) if (ws / SESSIONS_DIR).is_dir() \
            else []
        last = max((p.stat().st_mtime for p in transcripts), default=None)
        head = asyncio.run(versioning.head(ws)) if versioning.enabled else None
        workspaces.append({
            "name": ws.name,
            "sessions": len(transcripts),
            "last_activity": datetime.fromtimestamp(last).isoformat(timespec="seconds")
            if last else None,
            "last_commit": f"{head.rev} {head.date} {head.subject}" if head else None,
            "heartbeat": _heartbeat(ws),
            "index": _index_health(ws),
        })
    report: dict[str, Any] = {
        "channels": {p: p in configured for p in PLATFORMS},
        "workspaces_dir": str(settings.workspaces_dir.resolve()),
        "workspaces": workspaces,
        "versioning": "on" if versioning.enabled else "off",
        "gateway": {"running": False},
    }
    if settings.health.enabled:
        probe = _probe(settings, "/readyz")
        if probe is not None:
            try:
                report["gateway"] = {"running": True, **json.loads(probe[1])}
            except ValueError:
                report["gateway"] = {"running": True, "ready": probe[0] == 200}
    return report


def cmd_status(args: argparse.Namespace) -> int:
    settings = load_settings()
    report = collect_status(settings)
    if args.json:
        print(json.dumps(report, indent=1))
        return 0
    channels = ", ".join(f"{n} ({'configured' if on else 'not configured'})"
                         for n, on in report["channels"].items())
    print(f"channels: {channels}")
    gateway = report["gateway"]
    if gateway["running"]:
        state = "ready" if gateway.get("ready") else "NOT ready"
        print(f"gateway: running, {state}; queue depth {gateway.get('queue_depth', '?')}")
        for name, detail in (gateway.get("channels") or {}).items():
            print(f"  {name}: {'ready' if detail['ready'] else 'down'} ({detail['detail']})")
    else:
        print("gateway: not reachable on its health port (not running, or [health] disabled)")
    print(f"versioning: {report['versioning']}")
    print(f"workspaces in {report['workspaces_dir']}: {len(report['workspaces'])}")
    for ws in report["workspaces"]:
        print(f"  {ws['name']}: {ws['sessions']} session(s), last activity "
              f"{ws['last_activity'] or 'never'}")
        if ws["last_commit"]:
            print(f"    last change: {ws['last_commit']}")
        beat = ws["heartbeat"]
        if beat is not None:
            print(f"    next heartbeat: {beat['next_beat_at'] or 'not planned'}")
        index = ws["index"]
        if index.get("present"):
            detail = index.get("error") or (f"{index.get('chunks', '?')} chunks, last sync "
                                            f"{index.get('last_sync') or 'never'}")
            print(f"    recall index: {detail}")
        else:
            print("    recall index: not built yet")
    return 0


def cmd_healthcheck(args: argparse.Namespace) -> int:
    settings = load_settings()
    if args.url:
        try:
            with urllib.request.urlopen(args.url, timeout=3) as response:
                return 0 if response.status == 200 else 1
        except (OSError, ValueError):
            return 1
    probe = _probe(settings, "/healthz", timeout=3)
    return 0 if probe is not None and probe[0] == 200 else 1
