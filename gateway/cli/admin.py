"""`clawgate pairing ...` and `clawgate users ...`: the owner's admin commands.

They open the gateway state database directly, so they work while the gateway runs (SQLite
in WAL mode, one writer at a time, a busy timeout for the other).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Awaitable, Callable
from typing import Any

from gateway.assembly.platforms import PLATFORMS
from gateway.config.settings import load_settings
from gateway.ops.state import StateDB
from gateway.pipeline.links import LinkError, link_accounts
from gateway.pipeline.pairing import Pairing, PairingError


def register(sub: Any) -> None:
    """Add the `pairing` and `users` subcommands to the main parser."""
    pairing = sub.add_parser("pairing", help="approve or deny people who asked to talk")
    psub = pairing.add_subparsers(title="pairing commands", required=True)
    listing = psub.add_parser("list", help="pending pairing requests")
    listing.add_argument("channel", nargs="?", choices=PLATFORMS)
    listing.set_defaults(handler=_sync(_pairing_list))
    for name, verb in (("approve", "let this sender talk to the assistant"),
                       ("deny", "refuse this request")):
        cmd = psub.add_parser(name, help=verb)
        cmd.add_argument("channel", choices=PLATFORMS)
        cmd.add_argument("code")
        cmd.set_defaults(handler=_sync(_pairing_decide), decision=name)

    users = sub.add_parser("users", help="identity links and approved senders")
    usub = users.add_subparsers(title="users commands", required=True)
    link = usub.add_parser(
        "link", help="join accounts into one person: clawgate users link telegram:ID discord:ID"
    )
    link.add_argument("accounts", nargs="+", metavar="ACCOUNT",
                      help="channel:user_id, or a bare person id (e.g. your owner name) first")
    link.set_defaults(handler=_sync(_users_link))
    unlink = usub.add_parser("unlink", help="make an account its own person again")
    unlink.add_argument("account", metavar="channel:user_id")
    unlink.set_defaults(handler=_sync(_users_unlink))
    ulist = usub.add_parser("list", help="linked accounts and approved senders")
    ulist.set_defaults(handler=_sync(_users_list))


def _sync(command: Callable[[StateDB, argparse.Namespace], Awaitable[int]]) -> Callable[..., int]:
    def run(args: argparse.Namespace) -> int:
        settings = load_settings()

        async def go() -> int:
            async with StateDB.for_root(settings.workspaces_dir) as state:
                return await command(state, args)

        return asyncio.run(go())

    return run


async def _pairing_list(state: StateDB, args: argparse.Namespace) -> int:
    requests = await Pairing(state).pending(args.channel)
    if not requests:
        print("no pending pairing requests")
        return 0
    for r in requests:
        left = max(0, int((r.expires_at - r.created_at).total_seconds() // 60))
        name = f" ({r.sender_name})" if r.sender_name else ""
        print(f"{r.channel}  {r.code}  user {r.sender_id}{name}  asked "
              f"{r.created_at:%Y-%m-%d %H:%M}, expires in at most {left} min")
    print("approve with: clawgate pairing approve CHANNEL CODE")
    return 0


async def _pairing_decide(state: StateDB, args: argparse.Namespace) -> int:
    pairing = Pairing(state)
    try:
        if args.decision == "approve":
            request = await pairing.approve(args.channel, args.code)
        else:
            request = await pairing.deny(args.channel, args.code)
    except PairingError as exc:
        print(f"clawgate: {exc}", file=sys.stderr)
        return 1
    verb = "approved" if args.decision == "approve" else "denied"
    name = f" ({request.sender_name})" if request.sender_name else ""
    print(f"{verb} {request.channel} user {request.sender_id}{name}")
    return 0


def _account(text: str) -> tuple[str, str]:
    channel, sep, user_id = text.partition(":")
    if not sep or channel not in PLATFORMS or not user_id.strip():
        raise ValueError(f"{text!r} is not CHANNEL:USER_ID (channels: {', '.join(PLATFORMS)})")
    return channel, user_id.strip()


async def _users_link(state: StateDB, args: argparse.Namespace) -> int:
    settings = load_settings()
    try:  # the same function as the panel's "link accounts" (gateway/pipeline/links.py)
        result = await link_accounts(state, settings.workspaces_dir, settings.owner,
                                     list(args.accounts))
    except LinkError as exc:
        print(f"clawgate: {exc}", file=sys.stderr)
        return 2
    joined = " and ".join(f"{c}:{u}" for c, u in result.accounts)
    print(f"linked {joined} as person {result.person} (workspace {result.workspace})")
    return 0


async def _users_unlink(state: StateDB, args: argparse.Namespace) -> int:
    try:
        channel, user_id = _account(args.account)
    except ValueError as exc:
        print(f"clawgate: {exc}", file=sys.stderr)
        return 2
    if not await state.unlink(channel, user_id):
        print(f"clawgate: {channel}:{user_id} is not linked", file=sys.stderr)
        return 1
    print(f"unlinked {channel}:{user_id}")
    return 0


async def _users_list(state: StateDB, args: argparse.Namespace) -> int:
    links = await state.links()
    approved = await state.approved()
    print("linked accounts:" if links else "no linked accounts")
    for person, channel, user_id in links:
        print(f"  {person}: {channel}:{user_id}")
    print("approved senders:" if approved else "no approved senders")
    for channel, user_id, at, via in approved:
        print(f"  {channel}:{user_id}  since {at[:16]}  ({via})")
    return 0
