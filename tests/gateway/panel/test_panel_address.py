"""`clawgate panel url` links to the port the running panel bound (issue 32, item 9): with
`[panel] port = 0` it printed `http://127.0.0.1:0/...`. Real processes: `clawgate run`
against the loopback fakes, and the command from another "shell"."""

from __future__ import annotations

import asyncio
import re
import signal
import sys

from aiohttp import ClientSession

from gateway.panel.address import PANELS_DIR, record_port, running_ports
from gateway.panel.server import COOKIE, state_dir
from tests.fakes.telegram_server import FakeTelegramServer
from tests.reliability.process import gateway_env, start_gateway

PERSON = 3209
HANG = 30.0  # a bound for a process that hangs, not a speed figure


async def _panel_url(env: dict[str, str]) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "gateway",
        "panel",
        "url",
        env=env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), HANG)
    return process.returncode or 0, out.decode(), err.decode()


async def _bound_port(log) -> int:  # type: ignore[no-untyped-def]
    """The port the gateway says its panel is on (its notice in the log)."""
    async with asyncio.timeout(HANG):
        while not (
            found := re.search(
                r"panel on http://127\.0\.0\.1:(\d+)", log.read_text(errors="replace")
            )
        ):
            await asyncio.sleep(0.05)
    return int(found.group(1))


async def test_panel_url_links_to_the_port_a_running_gateway_bound(tmp_path, anthropic_server):
    async with FakeTelegramServer(max_poll=0.3) as tg:
        env = gateway_env(
            tmp_path,
            tg,
            anthropic_server.base_url,
            [PERSON],
            CLAWGATE_PANEL__ENABLED="true",
            CLAWGATE_PANEL__PORT="0",
        )
        log = tmp_path / "gateway.log"
        gateway = await start_gateway(env, log)
        try:
            port = await _bound_port(log)
            code, out, err = await _panel_url(env)
            assert code == 0, err
            link = out.strip()
            assert link.startswith(f"http://127.0.0.1:{port}/login/link?code="), (link, err)
            assert "one use" in err and "no gateway" not in err
            async with ClientSession() as http, http.get(link, allow_redirects=False) as reply:
                assert reply.status == 303 and COOKIE in reply.cookies  # redeemed: logged in
        finally:
            gateway.send_signal(signal.SIGKILL)  # no stop: its record stays behind
            await gateway.wait()
        code, out, err = await _panel_url(env)
        assert code == 1 and out == "", (out, err)
        assert "no gateway is running" in err and "port = 0" in err, err
        assert not list((state_dir(tmp_path / "workspaces") / PANELS_DIR).iterdir())


async def test_a_stopped_panel_takes_its_record_with_it(make_gateway, anthropic_server):
    from gateway.assembly.builder import start_panel

    gateway, _ = await make_gateway(anthropic_server, panel={"port": 0})
    directory = state_dir(gateway.settings.workspaces_dir)
    panel = await start_panel(gateway, gateway.settings)
    try:
        assert running_ports(directory) == [panel.port] and panel.port != 0
    finally:
        await panel.stop()
    assert running_ports(directory) == []
    assert not list((directory / PANELS_DIR).iterdir())


def test_records_that_are_not_ports_are_ignored(tmp_path):
    directory = tmp_path / "state"
    record_port(directory, 8788)  # this process: alive
    panels = directory / PANELS_DIR
    (panels / "1").write_text("not a port\n")
    (panels / "2").write_text("70000\n")
    (panels / "notes.txt").write_text("8000\n")
    (panels / "0").write_text("8001\n")
    assert running_ports(directory) == [8788]
