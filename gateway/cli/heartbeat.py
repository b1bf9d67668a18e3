"""`clawgate heartbeat run --workspace PATH` and `clawgate heartbeat status`."""

from __future__ import annotations

import argparse
import asyncio
import sys
import textwrap
from datetime import UTC, datetime, tzinfo
from pathlib import Path
from typing import Any

from gateway.config.settings import Settings, load_settings
from heartbeat import BeatOutcome, Heartbeat, HeartbeatPolicy, load_state
from heartbeat.checklist import format_interval


def register(sub: Any) -> None:
    """Add the `heartbeat` subcommands to the main parser."""
    heartbeat = sub.add_parser("heartbeat", help="HEARTBEAT.md checks: run one now, or status")
    hsub = heartbeat.add_subparsers(title="heartbeat commands", required=True)
    run = hsub.add_parser(
        "run", help="one beat now for one workspace; prints what happened and why (an alert is "
                    "printed here, not sent: the running gateway sends alerts)"
    )
    run.add_argument("--workspace", required=True, type=Path, metavar="PATH",
                     help="the workspace directory, e.g. workspaces/telegram-12345")
    run.set_defaults(handler=cmd_run)
    status = hsub.add_parser("status", help="per workspace: next beat, last outcome, tokens today")
    status.set_defaults(handler=cmd_status)


def cmd_run(args: argparse.Namespace) -> int:
    settings = load_settings()
    settings.api_key()
    workspace: Path = args.workspace
    if not workspace.is_dir():
        print(f"clawgate: no workspace directory at {workspace}", file=sys.stderr)
        return 2
    person_id = workspace.resolve().name
    outcome, policy = asyncio.run(_run_once(settings, workspace, person_id))
    print(f"heartbeat for {person_id} ({workspace})")
    print(f"  policy: {describe_policy(policy)}")
    print(f"  outcome: {outcome.describe()}")
    if outcome.text:
        print("  message:")
        print(textwrap.indent(outcome.text, "    "))
    return 1 if outcome.status == "error" else 0


async def _run_once(
    settings: Settings, workspace: Path, person_id: str
) -> tuple[BeatOutcome, HeartbeatPolicy]:
    from gateway.agent.providers import build_provider
    from gateway.assembly.heartbeat_host import GatewayHeartbeatHost, policy_for
    from gateway.assembly.platforms import build_gateway

    gateway = build_gateway(settings, build_provider(settings))  # channels are not started
    policy = policy_for(settings, person_id)
    try:
        try:
            await gateway.state.open()
        except Exception as exc:  # the beat then skips for want of a DM route, and says so
            print(f"  (state database unavailable: {exc})", file=sys.stderr)
        host = GatewayHeartbeatHost(gateway, require_running_channel=False)
        beat = Heartbeat(workspace, person_id, host, policy, gateway.clock, deliver=False)
        return await beat.beat(), policy
    finally:
        await gateway.provider.close()
        await gateway.state.close()


def cmd_status(args: argparse.Namespace) -> int:
    from gateway.assembly.heartbeat_host import discover_workspaces, policy_for

    settings = load_settings()
    root = settings.workspaces_dir
    rows = list(discover_workspaces(root))
    if not rows:
        print(f"no workspaces under {root}")
        return 0
    now = datetime.now(UTC)
    for person_id, workspace in rows:
        policy = policy_for(settings, person_id)
        state = load_state(workspace)
        zone = policy.active_hours.zone
        day = policy.active_hours.local_date(now)
        print(f"{person_id} ({workspace})")
        print(f"  policy: {describe_policy(policy)}")
        if policy.every is None:
            print("  next beat: never (heartbeats are off)")
        else:
            planned = _when(state.next_beat_at, zone, "not planned (is the gateway running?)")
            print(f"  next beat: {planned}")
        last = _when(state.last_beat_at, zone, "never")
        outcome = f" - {state.last_status}: {state.last_reason}" if state.last_status else ""
        print(f"  last beat: {last}{outcome}")
        cap = f" of {policy.daily_token_cap:,}" if policy.daily_token_cap else " (no cap)"
        print(f"  tokens today: {state.tokens_on(day):,}{cap}")
    return 0


def describe_policy(policy: HeartbeatPolicy) -> str:
    if policy.every is None:
        return "off"
    cap = f"{policy.daily_token_cap:,} tokens a day" if policy.daily_token_cap else "no token cap"
    return (f"every {format_interval(policy.every)}, active {policy.active_hours.describe()}, "
            f"{cap}")


def _when(moment: datetime | None, zone: tzinfo, missing: str) -> str:
    if moment is None:
        return missing
    return moment.astimezone(zone).strftime("%Y-%m-%d %H:%M %Z")
