"""The panel's aiohttp application: security middleware, login, and the server's lifecycle.

Rules every request goes through (`guard`):
- The Host header (and X-Forwarded-Host, if a proxy sets it) must name the panel: a loopback
  name or `public_url`'s host (PanelSettings.host_allowed), so a page on another site cannot
  reach it by pointing its own name at 127.0.0.1 (DNS rebinding), even with a valid cookie.
- Only /login and /login/link answer without a session; everything else (pages, actions,
  static files) redirects to /login (a page) or answers 401.
- Every POST must carry the session's CSRF token (form field `csrf` or header X-CSRF-Token);
  a browser-sent Origin header must match the host. The login form has its own pre-session
  token (double-submit cookie).
- Responses carry a strict CSP (scripts only from /static), no framing, no referrer to
  other sites, no cache.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Awaitable, Callable
from importlib import resources
from pathlib import Path
from urllib.parse import urlsplit

from aiohttp import web

from gateway.config.panel import PanelSettings
from gateway.panel import actions, pages, tasks_tab
from gateway.panel.address import forget, record_port
from gateway.panel.auth import OWNER, PanelAuth, ensure_token
from gateway.panel.context import PANEL, SESSION, Panel, panel_of, session_of
from gateway.panel.host import PanelHost
from gateway.panel.recent import RecentErrors
from gateway.panel.render import render

log = logging.getLogger(__name__)

COOKIE = "clawgate_panel"
PRE_COOKIE = "clawgate_panel_login"
# The stylesheet is public: the login page needs it before any session exists.
PUBLIC = frozenset({"/login", "/login/link", "/static/panel.css"})
STATIC = {
    "htmx.min.js": "application/javascript",
    "htmx.LICENSE.txt": "text/plain",
    "panel.css": "text/css",
}
HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self' "
    "'unsafe-inline'; img-src 'self' data:; connect-src 'self'; form-action 'self'; "
    "frame-ancestors 'none'; base-uri 'none'",
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",  # no-referrer would make Chrome send Origin: null
    "Cache-Control": "no-store",
}
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def see_other(location: str) -> web.Response:
    """A 303 redirect that can still carry cookies (raising HTTPSeeOther cannot)."""
    return web.Response(status=303, headers={"Location": location})


def _secure(request: web.Request) -> bool:
    return request.secure or request.headers.get("X-Forwarded-Proto", "") == "https"


def _origin_ok(request: web.Request) -> bool:
    origin = request.headers.get("Origin")
    if origin is None:  # not a browser's cross-site request (curl, the test client)
        return True
    forwarded = request.headers.get("X-Forwarded-Host")
    expected = {request.host, *([forwarded] if forwarded else [])}
    return urlsplit(origin).netloc in expected


@web.middleware
async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        response = await _guarded(request, handler)
    except web.HTTPException as exc:  # redirects and 404s raised by handlers get them too
        for name, value in HEADERS.items():
            exc.headers.setdefault(name, value)
        raise
    for name, value in HEADERS.items():
        response.headers.setdefault(name, value)
    return response


async def _guarded(request: web.Request, handler: Handler) -> web.StreamResponse:
    panel = panel_of(request)
    hosts = [request.headers.get("Host", ""), *request.headers.getall("X-Forwarded-Host", [])]
    refused = [host for host in hosts if not panel.settings.host_allowed(host)]
    if refused:
        # info, not warning: a hostile page can send these in a loop
        log.info("panel: refused a request for host %r", refused[0][:100])
        return web.Response(
            status=421,
            text="this panel answers only to localhost and "
            "panel.public_url's host name; set panel.public_url to the address "
            "you use",
        )
    if request.method not in ("GET", "HEAD", "POST"):
        return web.Response(status=405, text="method not allowed")
    if request.method == "POST" and not _origin_ok(request):
        return web.Response(status=403, text="cross-origin request refused")
    if request.path in PUBLIC:
        return await handler(request)
    session = panel.auth.session(request.cookies.get(COOKIE))
    if session is None:
        if request.method == "GET" and "HX-Request" not in request.headers:
            raise web.HTTPSeeOther("/login")
        return web.Response(status=401, text="log in first: /login")
    if request.method == "POST":
        given = request.headers.get("X-CSRF-Token")
        if given is None:
            form = await request.post()
            value = form.get("csrf")
            given = value if isinstance(value, str) else None
        if not panel.auth.csrf_ok(session, given):
            return web.Response(status=403, text="missing or wrong CSRF token: reload the page")
    request[SESSION] = session
    await panel.host.refresh_names()  # people by name on every page (cheap; kept 5 s)
    try:
        return await handler(request)
    except (web.HTTPNotFound, web.HTTPBadRequest) as exc:
        if "HX-Request" in request.headers or exc.content_type != "text/plain":
            raise
        person = request.match_info.get("person", "")
        known = bool(person) and exc.text != pages.NO_PERSON
        message = exc.text or ""
        if message.startswith(f"{exc.status}: "):  # aiohttp's own: "404: Not Found"
            message = "There is no such page in the panel."
        return pages.error_page(request, exc.status, message, person=person if known else "")


# --- login --------------------------------------------------------------------------------


def _login_page(pre: str, error: str = "") -> str:
    return render(
        "login.html",
        title="Log in",
        person="",
        tab="",
        csrf="",
        flash=(),
        logged_in=False,
        pre=pre,
        error=error,
    )


async def login_form(request: web.Request) -> web.Response:
    pre = secrets.token_urlsafe(24)
    response = web.Response(text=_login_page(pre), content_type="text/html")
    response.set_cookie(
        PRE_COOKIE,
        pre,
        httponly=True,
        samesite="Strict",
        secure=_secure(request),
        max_age=3600,
        path="/login",
    )
    return response


async def login_submit(request: web.Request) -> web.StreamResponse:
    panel = panel_of(request)
    form = await request.post()
    pre = request.cookies.get(PRE_COOKIE, "")
    given = str(form.get("csrf", ""))
    if not pre or not secrets.compare_digest(pre.encode(), given.encode()):
        return web.Response(status=403, text="missing or wrong CSRF token: reload /login")
    if not panel.auth.check_token(str(form.get("token", ""))):
        log.warning("panel: wrong token from %s", request.remote)
        fresh = secrets.token_urlsafe(24)
        response = web.Response(
            status=401, text=_login_page(fresh, "That is not the token."), content_type="text/html"
        )
        response.set_cookie(
            PRE_COOKIE,
            fresh,
            httponly=True,
            samesite="Strict",
            secure=_secure(request),
            max_age=3600,
            path="/login",
        )
        return response
    return _start_session(request, panel)


async def login_link(request: web.Request) -> web.StreamResponse:
    panel = panel_of(request)
    if not panel.auth.redeem(request.query.get("code", "")):
        return web.Response(
            status=403,
            text="this login link is used, expired or wrong: run "
            "`clawgate panel url` for a new one",
            headers={"Content-Type": "text/plain; charset=utf-8"},
        )
    return _start_session(request, panel)


def _start_session(request: web.Request, panel: Panel) -> web.StreamResponse:
    session = panel.auth.login(OWNER)
    response = see_other("/")
    response.set_cookie(
        COOKIE,
        session.sid,
        httponly=True,
        samesite="Strict",
        secure=_secure(request),
        path="/",
        max_age=int(panel.auth.session_seconds),
    )
    response.del_cookie(PRE_COOKIE, path="/login")
    return response


async def logout(request: web.Request) -> web.StreamResponse:
    panel_of(request).auth.logout(session_of(request).sid)
    response = see_other("/login")
    response.del_cookie(COOKIE, path="/")
    return response


async def static(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    if name not in STATIC:
        raise web.HTTPNotFound()
    data = (resources.files("gateway.panel") / "static" / name).read_bytes()
    return web.Response(
        body=data, content_type=STATIC[name], headers={"Cache-Control": "private, max-age=3600"}
    )


# --- application and lifecycle --------------------------------------------------------------


def build_app(panel: Panel) -> web.Application:
    app = web.Application(middlewares=[guard], client_max_size=8 * 1024 * 1024)
    app[PANEL] = panel
    app.router.add_get("/login", login_form)
    app.router.add_post("/login", login_submit)
    app.router.add_get("/login/link", login_link)
    app.router.add_post("/logout", logout)
    app.router.add_get("/static/{name}", static)
    pages.add_routes(app.router)
    actions.add_routes(app.router)
    tasks_tab.add_routes(app.router)
    return app


def state_dir(workspaces_dir: Path) -> Path:
    from gateway.stores.state import state_path

    return state_path(workspaces_dir).parent


class PanelServer:
    """The panel inside `clawgate run`: `start()` after the gateway started, `stop()` before."""

    def __init__(
        self, host: PanelHost, settings: PanelSettings, secrets_: list[str] | None = None
    ) -> None:
        self.settings = settings
        self.port = settings.port
        auth = PanelAuth(state_dir(host.root), session_seconds=settings.session_hours * 3600)
        self.panel = Panel(host, auth, RecentErrors(secrets_ or []), settings)
        self._runner: web.AppRunner | None = None
        self._record: Path | None = None

    async def start(self) -> None:
        self.panel.recent.attach()
        self._runner = web.AppRunner(build_app(self.panel), access_log=None)
        await self._runner.setup()
        try:
            await web.TCPSite(self._runner, self.settings.host, self.settings.port).start()
        except OSError:
            await self.stop()
            raise
        for address in self._runner.addresses:
            if isinstance(address, tuple):
                self.port = int(address[1])
                break
        try:  # for `clawgate panel url` in another shell (gateway/panel/address.py)
            self._record = record_port(self.panel.auth.state_dir, self.port)
        except OSError as exc:
            log.warning("could not record the panel's port for `clawgate panel url`: %s", exc)
        log.info("panel on %s", self.url)

    async def stop(self) -> None:
        if self._record is not None:
            forget(self._record)
            self._record = None
        self.panel.recent.detach()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> PanelServer:
        """For an exit stack: `await stack.enter_async_context(PanelServer(...))`."""
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    @property
    def url(self) -> str:
        return self.settings.base_url(self.port)

    def first_start_notice(self) -> str | None:
        """What to say the first time (when the token is created): where it is and how to
        log in, never the token itself."""
        _, created = ensure_token(self.panel.auth.state_dir)
        if not created:
            return None
        return (
            f"panel on {self.url}: a login token was created in "
            f"{self.panel.auth.state_dir}/panel-token (mode 0600, never printed); run "
            "`clawgate panel url` on this machine for a one-time login link"
        )
