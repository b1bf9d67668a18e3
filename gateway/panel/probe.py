"""Whether a clawgate panel answers on this machine, and on which port: `clawgate panel url`
links to the running panel (also one on any free port, `[panel] port = 0`) and says so
honestly when none runs, and the terminal chat tells a taken port that is a running gateway's
panel apart from one that is not. Standard library only (no aiohttp import for a yes or no)."""

from __future__ import annotations

import urllib.error
import urllib.request
from pathlib import Path

from gateway.config.panel import PanelSettings
from gateway.panel.address import running_ports


def local_url(panel: PanelSettings, port: int | None = None) -> str:
    """The panel's own address on this machine (not `public_url`'s proxy), on `port`
    (default: the configured one)."""
    return panel.model_copy(update={"public_url": ""}).base_url(port)


def panel_answers(panel: PanelSettings, timeout: float = 1.5, *, port: int | None = None) -> bool:
    """Whether a clawgate panel answers on this machine at the configured address (on `port`
    if given): its login page, which needs no login. Blocking: call from a thread in async
    code."""
    try:
        with urllib.request.urlopen(local_url(panel, port) + "/login", timeout=timeout) as reply:
            return reply.status == 200 and b"clawgate" in reply.read(65536)
    except (urllib.error.URLError, OSError, ValueError):
        return False


def running_port(panel: PanelSettings, state_dir: Path) -> int | None:
    """The port of a panel that answers now: one a running process recorded
    (gateway/panel/address.py), else the configured one; None when none answers."""
    for port in running_ports(state_dir):
        if panel_answers(panel, port=port):
            return port
    if panel.port and panel_answers(panel):
        return panel.port
    return None
