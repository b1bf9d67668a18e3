"""`clawgate panel url|rotate`: a one-time login link for the web panel; a new panel token.

Both work from another shell while `clawgate run` serves the panel: the link's code is a 0600
file in the state directory that the server redeems (and deletes) on first use, and the
running panel notices a replaced token file on its next request (every login ends). The link
names the port the running panel bound (it records it: gateway/panel/address.py), so a panel
on any free port (`[panel] port = 0`) gets a working link too.
The token itself is never printed.
"""

import sys

import typer

from gateway.cli.common import EXIT_FAILED, CliError, settings
from gateway.panel.probe import local_url, panel_answers, running_port

__all__ = ["app", "panel_answers", "register"]

app = typer.Typer(
    help="the web control panel: a one-time login link, a new token", no_args_is_help=True
)


def register(root: typer.Typer) -> None:
    root.add_typer(app, name="panel")


@app.command("url", help="print a one-time login link (valid panel.link_minutes, 10 by default)")
def url_command() -> None:
    from gateway.panel.auth import ensure_token, issue_link_code
    from gateway.panel.server import state_dir

    config = settings()
    panel = config.panel
    if not panel.enabled:  # a setting: the person's to change (exit status 2)
        raise CliError("the panel is off (panel.enabled = false)")
    directory = state_dir(config.workspaces_dir)
    port = running_port(panel, directory)
    if port is None and not panel.port:
        raise CliError(
            f"no gateway is running on {config.workspaces_dir}: no panel answers, and with "
            "[panel] port = 0 its port is only chosen when it starts; start `clawgate run` "
            "(or the terminal chat), then run `clawgate panel url` again",
            EXIT_FAILED,
        )
    ensure_token(directory)  # the panel may not have started yet: the link works once it has
    code = issue_link_code(directory, panel.link_minutes * 60)
    print(f"{panel.base_url(port)}/login/link?code={code}")
    if port is not None:
        print(f"(one use, valid {panel.link_minutes:g} minutes)", file=sys.stderr)
    else:
        print(
            f"clawgate: no gateway is running here: no panel answers at {local_url(panel)} "
            "(it runs inside `clawgate run` and the terminal chat, `clawgate chat` in a "
            f"terminal); the link works if one starts within {panel.link_minutes:g} "
            "minutes",
            file=sys.stderr,
        )


@app.command(
    "rotate",
    help="replace the panel token: every panel login and unused login link stops working at once",
)
def rotate_command() -> None:
    from gateway.panel.auth import rotate_token
    from gateway.panel.server import state_dir

    directory = state_dir(settings().workspaces_dir)
    rotate_token(directory)
    print(
        f"panel token replaced in {directory}/panel-token: every panel login and unused "
        "login link has stopped working; `clawgate panel url` for a new link"
    )
