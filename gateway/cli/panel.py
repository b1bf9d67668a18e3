"""`clawgate panel url|rotate`: a one-time login link for the web panel; a new panel token.

Both work from another shell while `clawgate run` serves the panel: the link's code is a 0600
file in the state directory that the server redeems (and deletes) on first use, and the
running panel notices a replaced token file on its next request (every login ends).
The token itself is never printed.
"""

import sys

import typer

from gateway.cli.common import CliError, settings
from gateway.config.panel import PanelSettings

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
        print(f"clawgate: no panel answers at {_local_url(panel)}: it runs inside `clawgate "
              f"run`, which is not running here; the link works if it starts within "
              f"{panel.link_minutes:g} minutes", file=sys.stderr)


def _local_url(panel: PanelSettings) -> str:
    return panel.model_copy(update={"public_url": ""}).base_url()


def panel_answers(panel: PanelSettings, timeout: float = 1.5) -> bool:
    """Whether a clawgate panel answers on this machine at the configured address (its
    login page, which needs no login)."""
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(_local_url(panel) + "/login", timeout=timeout) as reply:
            return reply.status == 200 and b"clawgate" in reply.read(65536)
    except (urllib.error.URLError, OSError, ValueError):
        return False


@app.command("rotate", help="replace the panel token: every panel login and unused login "
                            "link stops working at once")
def rotate_command() -> None:
    from gateway.panel.auth import rotate_token
    from gateway.panel.server import state_dir

    directory = state_dir(settings().workspaces_dir)
    rotate_token(directory)
    print(f"panel token replaced in {directory}/panel-token: every panel login and unused "
          "login link has stopped working; `clawgate panel url` for a new link")
