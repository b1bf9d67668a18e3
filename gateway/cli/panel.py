"""`clawgate panel url|rotate`: a one-time login link for the web panel; a new panel token.

Both work from another shell while `clawgate run` serves the panel: the link's code is a 0600
file in the state directory that the server redeems (and deletes) on first use, and the
running panel notices a replaced token file on its next request (every login ends).
The token itself is never printed.
"""

import sys

import typer

from gateway.cli.common import CliError, settings
from gateway.panel.probe import local_url, panel_answers

__all__ = ["app", "panel_answers", "register"]

app = typer.Typer(help="the web control panel: a one-time login link, a new token",
                  no_args_is_help=True)


def register(root: typer.Typer) -> None:
    root.add_typer(app, name="panel")


@app.command("url", help="print a one-time login link (valid panel.link_minutes, 10 by "
                         "default)")
def url_command() -> None:
    from gateway.panel.auth import ensure_token, issue_link_code
    from gateway.panel.server import state_dir

    config = settings()
    panel = config.panel
    if not panel.enabled:  # a setting: the person's to change (exit status 2)
        raise CliError("the panel is off (panel.enabled = false)")
    directory = state_dir(config.workspaces_dir)
    ensure_token(directory)  # the panel may not have started yet: the link works once it has
    code = issue_link_code(directory, panel.link_minutes * 60)
    print(f"{panel.base_url()}/login/link?code={code}")
    if panel_answers(panel):
        print(f"(one use, valid {panel.link_minutes:g} minutes)", file=sys.stderr)
    else:
        print(f"clawgate: no panel answers at {local_url(panel)}: it runs inside `clawgate "
              "run` and the terminal chat (`clawgate chat` in a terminal), and neither is "
              f"running here; the link works if one starts within {panel.link_minutes:g} "
              "minutes", file=sys.stderr)


@app.command("rotate", help="replace the panel token: every panel login and unused login "
                            "link stops working at once")
def rotate_command() -> None:
    from gateway.panel.auth import rotate_token
    from gateway.panel.server import state_dir

    directory = state_dir(settings().workspaces_dir)
    rotate_token(directory)
    print(f"panel token replaced in {directory}/panel-token: every panel login and unused "
          "login link has stopped working; `clawgate panel url` for a new link")
