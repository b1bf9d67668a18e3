"""The scheduler talks to the gateway only through `SchedulerHost`: it never imports it. Of
the heartbeat it uses the reply check (`heartbeat.ack`) and the one time-of-day reader
(`heartbeat.timeofday`), which the heartbeat's active hours use too."""

from __future__ import annotations

import ast
from pathlib import Path

ALLOWED = (
    "scheduler",
    "memory.atomic",
    "memory.layout",
    "heartbeat.ack",
    "heartbeat.timeofday",
    "cronsim",
)


def test_the_scheduler_imports_neither_gateway_nor_channels() -> None:
    package = Path(__file__).resolve().parents[2] / "scheduler"
    found: set[str] = set()
    for source in package.glob("*.py"):
        for node in ast.walk(ast.parse(source.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found.add(node.module)
            elif isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
    ours = {
        name
        for name in found
        if name.split(".")[0]
        in ("scheduler", "gateway", "channels", "memory", "heartbeat", "cronsim")
    }
    assert ours, "no imports found: the test is looking in the wrong place"
    bad = sorted(n for n in ours if not any(n == a or n.startswith(a + ".") for a in ALLOWED))
    assert bad == []


def test_the_heartbeat_imports_only_the_memory_layout_and_atomic_writes() -> None:
    package = Path(__file__).resolve().parents[2] / "heartbeat"
    found: set[str] = set()
    for source in package.glob("*.py"):
        for node in ast.walk(ast.parse(source.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found.add(node.module)
            elif isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
    ours = {
        name
        for name in found
        if name.split(".")[0] in ("scheduler", "gateway", "channels", "memory", "heartbeat")
    }
    allowed = ("heartbeat", "memory.atomic", "memory.layout")
    assert "heartbeat.timeofday" in ours, "the active hours read times with the shared reader"
    bad = sorted(n for n in ours if not any(n == a or n.startswith(a + ".") for a in allowed))
    assert bad == []
