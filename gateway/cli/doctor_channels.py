"""`clawgate doctor`'s channel checks: each configured bot token tried against its platform.

A token of the right shape can still be the example file's placeholder, a revoked one or
another bot's; before this, only `clawgate run` found out. One request per platform, the one
the channel itself starts with: Telegram's `getMe`, Discord's login (`GET /users/@me` with the
bot token). Every line names where the token came from (the variable, or the file, line and
key), since that is where it gets fixed.
"""

from __future__ import annotations

from typing import Any

from gateway.config.settings import Settings
from gateway.config.sources import where_set

Check = tuple[bool, str, str]  # (passed, what was checked, how to fix it)
PROBE_TIMEOUT_SECONDS = 15.0
TELEGRAM_API = "https://api.telegram.org/bot"
# What clawgate.example.toml shows in place of a token: copied with the rest, it has the shape
# of a token and would be tried against the platform (and refused) at every start.
PLACEHOLDER_MARK = "replace-with-the-token"
HOW_TO_GET = {
    "telegram": "the token @BotFather gave you (/mybots, API Token)",
    "discord": "the bot's token (developer portal, Bot tab, Reset Token)",
}
TITLES = {"telegram": "Telegram", "discord": "Discord"}


async def check_channels(config: Settings) -> list[Check]:
    """One check per configured platform (none when neither is configured)."""
    checks: list[Check] = []
    for platform in ("telegram", "discord"):
        section = config.telegram if platform == "telegram" else config.discord
        if not section.configured:
            continue
        token = section.token.get_secret_value()  # type: ignore[union-attr]
        source = where_set(platform, "token")
        title = TITLES[platform]
        if PLACEHOLDER_MARK in token:
            checks.append(
                (
                    False,
                    f"{title} token ({source}) is the example's placeholder",
                    f"put {HOW_TO_GET[platform]} there, or remove the line to run without {title}",
                )
            )
            continue
        if platform == "telegram":
            checks.append(await _telegram(token, config.telegram.base_url, source))
        else:
            checks.append(await _discord(token, source))
    return checks


async def _telegram(token: str, base_url: str, source: str) -> Check:
    import httpx

    base = base_url or TELEGRAM_API
    try:
        async with httpx.AsyncClient(timeout=PROBE_TIMEOUT_SECONDS) as client:
            response = await client.post(f"{base}{token}/getMe")
    except httpx.HTTPError as exc:
        return _unreachable(
            "Telegram", _host(base), type(exc).__name__, "[telegram] base_url" if base_url else ""
        )
    return _verdict(
        "Telegram",
        response.status_code,
        _json(response),
        source,
        lambda body: body.get("result", {}).get("username", ""),
    )


async def _discord(token: str, source: str) -> Check:
    import aiohttp
    import discord.http

    base = discord.http.Route.BASE  # discord.py's own address (tests point it at a fake)
    try:
        timeout = aiohttp.ClientTimeout(total=PROBE_TIMEOUT_SECONDS)
        async with (
            aiohttp.ClientSession(timeout=timeout) as session,
            session.get(f"{base}/users/@me", headers={"Authorization": f"Bot {token}"}) as response,
        ):
            status = response.status
            body = await response.json(content_type=None) if status < 500 else {}
    except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
        return _unreachable("Discord", _host(base), type(exc).__name__, "")
    return _verdict("Discord", status, body, source, lambda found: found.get("username", ""))


def _json(response: Any) -> Any:
    try:
        return response.json()
    except ValueError:
        return {}


def _verdict(title: str, status: int, body: Any, source: str, name_of: Any) -> Check:
    platform = title.lower()
    if status == 200 and isinstance(body, dict):
        try:
            name = str(name_of(body) or "")
        except AttributeError:
            name = ""
        shown = f" as @{name}" if name else ""
        return (True, f"{title} accepts the bot token{shown} ({source})", "")
    if status in (401, 403, 404):  # Telegram answers 404 for a token it does not know
        return (
            False,
            f"{title} rejected the bot token ({source})",
            f"put {HOW_TO_GET[platform]} there; a token stops working once it is "
            "revoked or regenerated",
        )
    return (
        False,
        f"{title} answered HTTP {status} to the token check ({source})",
        "try again later; `clawgate run` keeps retrying in the background",
    )


def _unreachable(title: str, host: str, reason: str, setting: str) -> Check:
    fix = (
        f"check {setting} and the network"
        if setting
        else "check the network connection (the bot cannot work without it)"
    )
    return (False, f"{title} could not be reached at {host} to check the token ({reason})", fix)


def _host(url: str) -> str:
    from urllib.parse import urlsplit

    return urlsplit(url).netloc or url
