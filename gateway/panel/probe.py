"""Whether a clawgate panel answers at the configured address: `clawgate panel url` says so
honestly, and the terminal chat tells a taken port that is a running gateway's panel apart
from one that is not. Standard library only (no aiohttp import for a yes or no)."""

from __future__ import annotations

import urllib.error
import urllib.request

from gateway.config.panel import PanelSettings


def local_url(panel: PanelSettings) -> str:
    """The panel's own address on this machine (not `public_url`'s proxy)."""
    return panel.model_copy(update={"public_url": ""}).base_url()


def panel_answers(panel: PanelSettings, timeout: float = 1.5) -> bool:
    """Whether a clawgate panel answers on this machine at the configured address (its
    login page, which needs no login). Blocking: call from a thread in async code."""
    try:
        with urllib.request.urlopen(local_url(panel) + "/login", timeout=timeout) as reply:
            return reply.status == 200 and b"clawgate" in reply.read(65536)
    except (urllib.error.URLError, OSError, ValueError):
        return False
