"""`clawgate panel url`: a one-time login link for the web panel of the running gateway.

It works from another shell while `clawgate run` serves the panel: the link's code is a 0600
file in the state directory that the server redeems (and deletes) on first use.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from gateway.config.settings import load_settings


def register(sub: Any) -> None:
    panel = sub.add_parser("panel", help="the web control panel: a one-time login link")
    psub = panel.add_subparsers(title="panel commands", required=True)
    url = psub.add_parser("url", help="print a one-time login link (valid [panel] "
                                      "link_minutes, 10 by default)")
    url.set_defaults(handler=cmd_url)


def cmd_url(args: argparse.Namespace) -> int:
    from gateway.panel.auth import ensure_token, issue_link_code
    from gateway.panel.server import state_dir

    settings = load_settings()
    panel = settings.panel
    if not panel.enabled:
        print("clawgate: the panel is off ([panel] enabled = false)", file=sys.stderr)
        return 1
    directory = state_dir(settings.workspaces_dir)
    ensure_token(directory)  # the panel may not have started yet: the link works once it has
    code = issue_link_code(directory, panel.link_minutes * 60)
    print(f"{panel.base_url()}/login/link?code={code}")
    print(f"(one use, valid {panel.link_minutes:g} minutes; the panel runs inside "
          "`clawgate run`)", file=sys.stderr)
    return 0
