"""The parts around the gateway see it through gateway/pipeline/ports.py, not its insides.

Read from the source with `ast`: the heartbeat host, the scheduler's host, tidying, the web
tools and the panel never import the Gateway class (so they cannot be typed with it), and
never reach through the gateway into one of its parts (`gateway.lanes.submit`,
`gateway.state.links`): what they need is a method of their protocol. mypy checks that the
Gateway implements each protocol where the assembly hands it over.
"""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

from gateway.pipeline.parts import GatewayParts

ROOT = Path(__file__).resolve().parents[3]
NARROW = [
    "gateway/features/heartbeat_host.py",
    "gateway/features/scheduling.py",
    "gateway/features/tidying.py",
    "gateway/assembly/web.py",
    "gateway/panel/host.py",
    "gateway/panel/pages.py",
    "gateway/panel/actions.py",
]
GATEWAY_NAMES = {"gateway", "_gateway"}
# Plain values every part may read (configuration and time), not parts with behaviour.
VALUES = {"settings", "clock"}


def _is_gateway(node: ast.expr) -> bool:
    if isinstance(node, ast.Name):
        return node.id in GATEWAY_NAMES
    return (isinstance(node, ast.Attribute) and node.attr in GATEWAY_NAMES
            and isinstance(node.value, ast.Name) and node.value.id in ("self", "host"))


def _reach_ins(tree: ast.AST) -> list[str]:
    """`gateway.<part>.<anything>` for a part of the Gateway (GatewayParts' fields)."""
    parts = {field.name for field in dataclasses.fields(GatewayParts)} - VALUES
    found = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute)
                and _is_gateway(node.value.value) and node.value.attr in parts):
            found.append(f"line {node.lineno}: .{node.value.attr}.{node.attr}")
    return found


def test_the_assembly_does_not_reach_into_the_gateways_parts() -> None:
    problems = {}
    for name in NARROW:
        tree = ast.parse((ROOT / name).read_text(encoding="utf-8"))
        imports = [alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                   and node.module == "gateway.pipeline.gateway" for alias in node.names]
        found = _reach_ins(tree) + [f"imports {n} from gateway.pipeline.gateway" for n in imports]
        if found:
            problems[name] = found
    assert problems == {}


def test_the_check_finds_a_reach_in() -> None:
    """The walk above would see one (it is not looking at the wrong names)."""
    tree = ast.parse("async def f(gateway):\n    await gateway.lanes.submit('k', job)\n"
                     "    self._gateway.state.links()\n    gateway.settings.owner\n")
    assert sorted(_reach_ins(tree)) == ["line 2: .lanes.submit", "line 3: .state.links"]
