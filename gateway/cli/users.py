"""`clawgate users link|unlink|list`: one person across platform accounts."""

from typing import Annotated

import typer

from gateway.assembly.platforms import PLATFORMS
from gateway.cli.common import (
    EXIT_FAILED,
    CliError,
    JsonOption,
    fail,
    print_json,
    print_table,
    settings,
)
from gateway.cli.pairing import with_state
from gateway.ops.state import StateDB
from gateway.pipeline.routing import person_id_for
from gateway.workspace.seed import WorkspaceError, workspace_path

app = typer.Typer(help="identity links and approved senders", no_args_is_help=True)


def register(root: typer.Typer) -> None:
    root.add_typer(app, name="users")


def parse_account(text: str) -> tuple[str, str]:
    channel, sep, user_id = text.partition(":")
    if not sep or channel not in PLATFORMS or not user_id.strip():
        raise CliError(f"{text!r} is not CHANNEL:USER_ID (channels: {', '.join(PLATFORMS)})")
    return channel, user_id.strip()


@app.command("link", help="join accounts into one person: clawgate users link telegram:ID "
                          "discord:ID; clawgate users link owner telegram:ID makes it yours")
def link_command(
    accounts: Annotated[list[str], typer.Argument(
        metavar="ACCOUNT...",
        help="channel:user_id, or a bare person id (e.g. your owner name) first")],
) -> None:
    config = settings()
    items = list(accounts)
    person: str | None = None
    if ":" not in items[0]:
        person = items.pop(0)
        try:
            workspace_path(config.workspaces_dir, person)  # validates the id
        except WorkspaceError as exc:
            raise CliError(str(exc)) from exc
    parsed = [parse_account(item) for item in items]
    if not parsed or (person is None and len(parsed) < 2):
        raise CliError("give two accounts (telegram:ID discord:ID), or a person id and an "
                       "account")

    async def go(state: StateDB) -> str:
        chosen = person
        if chosen is None:
            # Keep an existing person (and workspace) if one of the accounts has one already.
            for channel, user_id in parsed:
                chosen = await state.person_for(channel, user_id)
                if chosen:
                    break
            chosen = chosen or person_id_for(parsed[0][0], parsed[0][1], config.owner)
        for channel, user_id in parsed:
            await state.link(channel, user_id, chosen)
            await state.approve(channel, user_id, via="link")
        return chosen

    chosen = with_state(go)
    joined = " and ".join(f"{c}:{u}" for c, u in parsed)
    print(f"linked {joined} as person {chosen} "
          f"(workspace {workspace_path(config.workspaces_dir, chosen)})")


@app.command("unlink", help="make an account its own person again")
def unlink_command(
    account: Annotated[str, typer.Argument(metavar="CHANNEL:USER_ID")],
) -> None:
    channel, user_id = parse_account(account)
    if not with_state(lambda state: state.unlink(channel, user_id)):
        raise typer.Exit(fail(f"{channel}:{user_id} is not linked", EXIT_FAILED))
    print(f"unlinked {channel}:{user_id}")


@app.command("list", help="linked accounts and approved senders")
def list_command(as_json: JsonOption = False) -> None:
    async def go(state: StateDB) -> tuple[list, list]:
        return list(await state.links()), list(await state.approved())

    links, approved = with_state(go)
    if as_json:
        print_json({
            "links": [{"person": p, "channel": c, "user_id": u} for p, c, u in links],
            "approved": [{"channel": c, "user_id": u, "since": at, "via": via}
                         for c, u, at, via in approved],
        })
        return
    if links:
        print_table(("person", "account"), ((p, f"{c}:{u}") for p, c, u in links),
                    title="linked accounts")
    else:
        print("no linked accounts")
    if approved:
        print_table(("account", "since", "via"),
                    ((f"{c}:{u}", at[:16], via) for c, u, at, via in approved),
                    title="approved senders")
    else:
        print("no approved senders")
