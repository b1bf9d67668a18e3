"""The `[panel]` settings section: the owner's web control panel (gateway/panel/).

The panel can change memory files and approve strangers, so it listens on loopback unless the
operator asks twice: a non-loopback `host` is refused at start unless `allow_remote = true`
(and then it belongs behind a TLS reverse proxy, see docs/panel.md).
"""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost"})


def is_loopback(host: str) -> bool:
    """Whether `host` only accepts connections from this machine."""
    name = host.strip().strip("[]").lower()
    if name in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


class PanelSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    # Required to listen on anything but loopback (0.0.0.0, a LAN address): say it twice.
    # (Declared before `host` so the host check can see it.)
    allow_remote: bool = False
    host: str = "127.0.0.1"
    port: int = Field(8788, ge=0, le=65535)  # 0: any free port (tests)
    # The address people type when the panel is behind a reverse proxy, for `clawgate panel
    # url`, e.g. https://panel.example.org (default: http://host:port). Its host name is the
    # one name besides loopback the panel answers to (the Host header check).
    public_url: str = ""
    session_hours: float = Field(12.0, gt=0, le=24 * 30)  # a login lasts this long
    link_minutes: float = Field(10.0, gt=0, le=24 * 60)  # a one-time login link lasts this long

    @field_validator("host")
    @classmethod
    def _loopback_unless_allowed(cls, host: str, info: ValidationInfo) -> str:
        if (
            info.data.get("enabled", True)
            and not info.data.get("allow_remote", False)
            and not is_loopback(host)
        ):
            raise ValueError(
                f"the panel would listen on {host}, which is not a loopback address; "
                "set panel.allow_remote = true to allow it (and put it behind TLS), or use "
                "127.0.0.1"
            )
        return host

    @field_validator("public_url")
    @classmethod
    def _an_http_url(cls, url: str) -> str:
        if url and (urlsplit(url).scheme not in ("http", "https") or not urlsplit(url).hostname):
            raise ValueError(f"use an http:// or https:// address with a host name, got {url!r}")
        return url

    def host_allowed(self, host: str) -> bool:
        """Whether a request's Host header names this panel: a loopback name, the address it
        listens on, or `public_url`'s host. Anything else is a page on another site reaching
        the panel through DNS rebinding, or a misrouted proxy."""
        try:
            name = urlsplit(f"//{host}").hostname or ""
        except ValueError:
            return False
        if not name:
            return False
        if is_loopback(name):
            return True
        allowed = {self.host.strip("[]").lower()} - {"0.0.0.0", "::", ""}
        if self.public_url:
            allowed.add((urlsplit(self.public_url).hostname or "").lower())
        return name in allowed

    def base_url(self, port: int | None = None) -> str:
        if self.public_url:
            return self.public_url.rstrip("/")
        host = "127.0.0.1" if self.host in ("0.0.0.0", "::", "") else self.host
        if ":" in host and not host.startswith("["):
            host = f"[{host}]"
        return f"http://{host}:{port if port is not None else self.port}"
