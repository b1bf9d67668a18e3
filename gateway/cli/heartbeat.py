"""`clawgate heartbeat run|status`: one beat now, or where every workspace stands."""

import asyncio
import dataclasses
import shlex
import textwrap
from datetime import UTC, datetime, tzinfo
from pathlib import Path
from typing import Annotated, Any

import typer

from gateway.cli.common import (
    CliError,
    json_time,
    print_json,
    resolve_workspace,
    settings,
)
from gateway.cli.options import JsonOption, WorkspaceOption
from gateway.config.settings import Settings
from heartbeat import (
    ActiveHours,
    BeatOutcome,
    Heartbeat,
    HeartbeatPolicy,
    load_checklist,
    load_state,
)

app = typer.Typer(help="HEARTBEAT.md checks: run one now, or status", no_args_is_help=True)


def register(root: typer.Typer) -> None:
    root.add_typer(app, name="heartbeat")


@app.command(
    "run",
    help="one beat now for one workspace; prints what happened and why (an "
    "alert is printed here, not sent: the running gateway sends alerts)",
)
def run_command(
    workspace: WorkspaceOption = None,
    ignore_hours: Annotated[
        bool,
        typer.Option(
            "--ignore-hours", help="run even outside the active hours (try a checklist now)"
        ),
    ] = False,
) -> None:
    config = settings()
    config.api_key()
    path = resolve_workspace(workspace, config)
    person_id = path.resolve().name
    outcome, policy = asyncio.run(_run_once(config, path, person_id, ignore_hours))
    print(f"heartbeat for {person_id} ({path})")
    print(f"  policy: {policy.describe()}")
    print(f"  outcome: {outcome.describe()}")
    if outcome.status == "skipped" and outcome.reason.startswith("outside active hours"):
        print(
            "  to run it now anyway: clawgate heartbeat run --ignore-hours"
            + (f" --workspace {shlex.quote(workspace)}" if workspace else "")
        )
    if outcome.text:
        print("  message:")
        print(textwrap.indent(outcome.text, "    "))
    if outcome.status == "error":
        raise typer.Exit(1)


async def _run_once(
    config: Settings, workspace: Path, person_id: str, ignore_hours: bool
) -> tuple[BeatOutcome, HeartbeatPolicy]:
    from gateway.assembly.builder import ONE_BEAT, GatewayApp, StartupError
    from gateway.features.heartbeat_host import GatewayHeartbeatHost, policy_for

    policy = policy_for(config, person_id)
    if ignore_hours:
        zone = policy.active_hours.zone
        policy = dataclasses.replace(policy, active_hours=ActiveHours(zone=zone))
    try:
        async with GatewayApp(config, ONE_BEAT) as running:  # no channel starts
            host = GatewayHeartbeatHost(running.parts, require_running_channel=False)
            beat = Heartbeat(workspace, person_id, host, policy, running.parts.clock, deliver=False)
            return await beat.beat(), policy
    except StartupError as exc:
        raise CliError(str(exc)) from exc


@app.command("status", help="per workspace: next beat, last outcome, tokens today")
def status_command(as_json: JsonOption = False) -> None:
    from gateway.features.heartbeat_host import discover_workspaces, policy_for

    config = settings()
    root = config.workspaces_dir
    now = datetime.now(UTC)
    rows: list[dict[str, Any]] = []
    for person_id, workspace in discover_workspaces(root):
        policy = policy_for(config, person_id)
        state = load_state(workspace)
        checklist = load_checklist(workspace)
        day = policy.active_hours.local_date(now)
        rows.append(
            {
                "person": person_id,
                "workspace": str(workspace),
                "policy": policy.describe(),
                "enabled": policy.every is not None,
                "next_beat_at": _iso(state.next_beat_at),
                "last_beat_at": _iso(state.last_beat_at),
                "last_status": state.last_status or None,
                "last_reason": state.last_reason or None,
                "tokens_today": state.tokens_on(day),
                "daily_token_cap": policy.daily_token_cap,
                "checklist_problems": list(checklist.problems) if checklist else [],
                "_zone": policy.active_hours.zone,
                "_state": state,
            }
        )
    if as_json:
        print_json([{k: v for k, v in row.items() if not k.startswith("_")} for row in rows])
        return
    if not rows:
        print(f"no workspaces under {root}")
        return
    for row in rows:
        state, zone = row["_state"], row["_zone"]
        print(f"{row['person']} ({row['workspace']})")
        print(f"  policy: {row['policy']}")
        if not row["enabled"]:
            print("  next beat: never (heartbeats are off)")
        else:
            planned = _when(state.next_beat_at, zone, "not planned (is the gateway running?)")
            print(f"  next beat: {planned}")
        last = _when(state.last_beat_at, zone, "never")
        outcome = f" - {state.last_status}: {state.last_reason}" if state.last_status else ""
        print(f"  last beat: {last}{outcome}")
        cap = row["daily_token_cap"]
        cap_text = f" of {cap:,}" if cap else " (no cap)"
        print(f"  tokens today: {row['tokens_today']:,}{cap_text}")
        for problem in row["checklist_problems"]:
            print(f"  HEARTBEAT.md problem: {problem}")


def _iso(moment: datetime | None) -> str | None:
    return json_time(moment)


def _when(moment: datetime | None, zone: tzinfo, missing: str) -> str:
    if moment is None:
        return missing
    return moment.astimezone(zone).strftime("%Y-%m-%d %H:%M %Z")
