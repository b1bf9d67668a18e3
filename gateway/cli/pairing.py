"""`clawgate pairing list|approve|deny|revoke`: who may talk to the assistant.

It opens the gateway state database directly, so it works while the gateway runs (SQLite in
WAL mode, one writer at a time, a busy timeout for the other).
"""

import asyncio
import sys
from collections.abc import Awaitable, Callable
from enum import Enum
from typing import Annotated, Any, TypeVar

import typer

from gateway.cli.common import (
    EXIT_FAILED,
    EXIT_USAGE,
    CliError,
    fail,
    json_time,
    print_json,
    print_table,
    settings,
)
from gateway.cli.options import JsonOption
from gateway.pipeline.links import PLATFORMS
from gateway.pipeline.pairing import AlreadyDecided, Pairing, PairingError, UnknownCode
from gateway.stores.state import StateDB, state_path

Platform = Enum("Platform", {name: name for name in PLATFORMS}, type=str)  # type: ignore[misc]
T = TypeVar("T")

app = typer.Typer(help="approve or deny people who asked to talk", no_args_is_help=True)


def register(root: typer.Typer) -> None:
    root.add_typer(app, name="pairing")


def state_exists() -> bool:
    """Read-only commands report "nothing" rather than create the state database."""
    return state_path(settings().workspaces_dir).exists()


def with_state(command: Callable[[StateDB], Awaitable[T]]) -> T:
    """Run `command` with the gateway state database of the configured workspaces root."""
    config = settings()

    async def go() -> T:
        async with StateDB.for_root(
            config.workspaces_dir, inbox_retention=config.inbox_retention
        ) as state:
            return await command(state)

    return asyncio.run(go())


@app.command("list", help="pending pairing requests (code, user id, name, age)")
def list_command(
    channel: Annotated[Platform | None, typer.Argument(case_sensitive=False)] = None,
    as_json: JsonOption = False,
) -> None:
    name = channel.value if channel is not None else None
    requests = [] if not state_exists() else with_state(lambda state: Pairing(state).pending(name))
    rows: list[dict[str, Any]] = [
        {
            "channel": r.channel,
            "code": r.code,
            "user_id": r.sender_id,
            "name": r.sender_name or "",
            "asked_at": json_time(r.created_at),
            "expires_in_minutes": max(0, int((r.expires_at - r.created_at).total_seconds() // 60)),
        }
        for r in requests
    ]
    if as_json:
        print_json(rows)
        return
    if not rows:
        print("no pending pairing requests")
        return
    print_table(
        ("channel", "code", "user", "name", "asked", "expires in"),
        (
            (
                r["channel"],
                r["code"],
                r["user_id"],
                r["name"],
                r["asked_at"][:16].replace("T", " "),
                f"at most {r['expires_in_minutes']} min",
            )
            for r in rows
        ),
    )
    print("approve with: clawgate pairing approve CHANNEL CODE")


def _decide(channel: Platform, code: str, decision: str, *, owner: str | None = None) -> None:
    async def go(state: StateDB) -> Any:
        pairing = Pairing(state)
        try:
            if decision == "approve":
                return await pairing.approve(channel.value, code, owner=owner)
            return await pairing.deny(channel.value, code)
        except PairingError as exc:
            return exc

    outcome = with_state(go)
    if (
        isinstance(outcome, AlreadyDecided)
        and outcome.status == "approved"
        and decision == "approve"
    ):
        print(str(outcome))  # approving twice is done, not a mistake
        if owner is not None:
            print(
                "to make that account yours: clawgate users link <owner> CHANNEL:ID "
                "(`clawgate users list` shows the ids)".replace("<owner>", owner)
            )
        return
    if isinstance(outcome, PairingError):
        status = EXIT_USAGE if isinstance(outcome, UnknownCode) else EXIT_FAILED
        raise typer.Exit(fail(str(outcome), status))
    verb = "approved" if decision == "approve" else "denied"
    name = f" ({outcome.sender_name})" if outcome.sender_name else ""
    print(f"{verb} {outcome.channel} user {outcome.sender_id}{name}")
    if owner is not None:
        print(
            f"linked {outcome.channel}:{outcome.sender_id} to you ({owner}): its DMs are your "
            "own workspace and conversation, the same as `clawgate chat`"
        )
    if decision == "approve":
        print(
            "the running gateway welcomes them within a few seconds and answers what they "
            "wrote while waiting"
        )


@app.command("approve", help="let this sender talk to the assistant (--owner: it is you)")
def approve_command(
    channel: Annotated[Platform, typer.Argument(case_sensitive=False)],
    code: Annotated[str, typer.Argument(help="the code the sender was given")],
    owner: Annotated[
        bool,
        typer.Option(
            "--owner",
            help="this account is yours: link it to the owner's workspace and "
            "conversation instead of giving it a workspace of its own",
        ),
    ] = False,
) -> None:
    _decide(channel, code, "approve", owner=settings().owner if owner else None)


@app.command("deny", help="refuse this request")
def deny_command(
    channel: Annotated[Platform, typer.Argument(case_sensitive=False)],
    code: Annotated[str, typer.Argument(help="the code the sender was given")],
) -> None:
    _decide(channel, code, "deny")


@app.command("revoke", help="take back an approval (IDs are in `clawgate users list`)")
def revoke_command(
    channel: Annotated[Platform, typer.Argument(case_sensitive=False)],
    sender_id: Annotated[str, typer.Argument(metavar="ID", help="the sender's platform id")],
) -> None:
    # The logic is Pairing.revoke (gateway/pipeline/pairing.py), shared with the panel.
    if not with_state(lambda state: Pairing(state).revoke(channel.value, sender_id)):
        raise CliError(f"{channel.value}:{sender_id} is not approved; see `clawgate users list`")
    print(f"revoked {channel.value}:{sender_id}")
    if sender_id in getattr(settings(), channel.value).allow_from:
        print(
            f"note: {sender_id} is still in {channel.value}.allow_from in the settings",
            file=sys.stderr,
        )
