"""What a request handler reaches: the panel (host, logins, recent errors, settings) and the
request's login session.

Its own module so the page and action handlers need not import the server that routes to
them (an import cycle otherwise).
"""

from __future__ import annotations

from dataclasses import dataclass

from aiohttp import web

from gateway.config.panel import PanelSettings
from gateway.panel.auth import PanelAuth, PanelSession
from gateway.panel.host import PanelHost
from gateway.panel.recent import RecentErrors


@dataclass
class Panel:
    """What every handler needs: the gateway adapter, logins, recent errors, settings."""

    host: PanelHost
    auth: PanelAuth
    recent: RecentErrors
    settings: PanelSettings


PANEL = web.AppKey("panel", Panel)
SESSION = web.RequestKey("session", PanelSession)


def panel_of(request: web.Request) -> Panel:
    return request.app[PANEL]


def session_of(request: web.Request) -> PanelSession:
    return request[SESSION]
