"""`clawgate users link|unlink|list`: one person across platform accounts."""

from typing import Annotated

import typer

from gateway.cli.common import (
    CliError,
    print_json,
    print_table,
    settings,
)
from gateway.cli.options import JsonOption
from gateway.cli.pairing import state_exists, with_state
from gateway.pipeline import links
from gateway.pipeline.links import LinkError, LinkResult, link_accounts
from gateway.stores.state import StateDB

app = typer.Typer(help="identity links and approved senders", no_args_is_help=True)


def register(root: typer.Typer) -> None:
    root.add_typer(app, name="users")


def parse_account(text: str) -> tuple[str, str]:
    try:
        return links.parse_account(text)
    except LinkError as exc:
        raise CliError(str(exc)) from exc


@app.command(
    "link",
    help="join accounts into one person: clawgate users link telegram:ID "
    "discord:ID; clawgate users link owner telegram:ID makes it yours",
)
def link_command(
    accounts: Annotated[
        list[str],
        typer.Argument(
            metavar="ACCOUNT...",
            help="channel:user_id, or a bare person id (e.g. your owner name) first",
        ),
    ],
) -> None:
    config = settings()

    async def go(state: StateDB) -> LinkResult:
        try:  # the same function as the panel's "link accounts" (gateway/pipeline/links.py)
            return await link_accounts(state, config.workspaces_dir, config.owner, list(accounts))
        except LinkError as exc:
            raise CliError(str(exc)) from exc

    result = with_state(go)
    joined = " and ".join(f"{c}:{u}" for c, u in result.accounts)
    print(f"linked {joined} as person {result.person} (workspace {result.workspace})")


@app.command("unlink", help="make an account its own person again")
def unlink_command(
    account: Annotated[str, typer.Argument(metavar="CHANNEL:USER_ID")],
) -> None:
    channel, user_id = parse_account(account)
    if not with_state(lambda state: state.links.unlink(channel, user_id)):
        raise CliError(f"{channel}:{user_id} is not linked; see `clawgate users list`")
    print(f"unlinked {channel}:{user_id}")
    if with_state(lambda state: state.access.is_approved(channel, user_id)):
        print(
            f"{channel}:{user_id} is still approved; take that back with "
            f"`clawgate pairing revoke {channel} {user_id}`"
        )


@app.command("list", help="linked accounts and approved senders")
def list_command(as_json: JsonOption = False) -> None:
    async def go(
        state: StateDB,
    ) -> tuple[list[tuple[str, str, str]], list[tuple[str, str, str, str]]]:
        return list(await state.links.all()), list(await state.access.approved())

    links, approved = with_state(go) if state_exists() else ([], [])
    if as_json:
        print_json(
            {
                "links": [{"person": p, "channel": c, "user_id": u} for p, c, u in links],
                "approved": [
                    {"channel": c, "user_id": u, "since": at, "via": via}
                    for c, u, at, via in approved
                ],
            }
        )
        return
    if links:
        print_table(
            ("person", "account"), ((p, f"{c}:{u}") for p, c, u in links), title="linked accounts"
        )
    else:
        print("no linked accounts")
    if approved:
        print_table(
            ("account", "since", "via"),
            ((f"{c}:{u}", at[:16], via) for c, u, at, via in approved),
            title="approved senders",
        )
    else:
        print("no approved senders")
