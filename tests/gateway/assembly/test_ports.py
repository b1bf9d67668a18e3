"""The parts around the gateway are given its parts (gateway/pipeline/ports.py), never the
Gateway itself.

Read from the source with `ast`: the features (the heartbeat host, the scheduler's host,
tidying, exec), the web tools, the panel, the health server and the command line never
import the Gateway or `GatewayParts` (so they cannot be typed with them) and never use a
Gateway object: no `.gateway` attribute (`app.gateway.state`), no name or attribute bound to
one, however many aliases away (`g = app.gateway; g.lanes`, `self.g = gateway`,
`import ... as G`). What they need is a part named by their protocol; mypy checks that
`GatewayParts` has it wherever the assembly hands the parts over.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
# Every feature (heartbeats, scheduling, tidying, exec, what comes), the panel, the command
# line, health and the web tools' wiring.
NARROW = sorted(
    [
        "gateway/assembly/web.py",
        "gateway/pipeline/health.py",
        *(
            str(path.relative_to(ROOT))
            for room in ("features", "panel", "cli")
            for path in (ROOT / "gateway" / room).rglob("*.py")
        ),
    ]
)
# The Gateway's own module and the bundle of all its parts: the consumers get a protocol.
FORBIDDEN_MODULES = {"gateway.pipeline.gateway", "gateway.pipeline.parts"}
# Names and attributes that hold a Gateway by convention (`app.gateway`, `self._gateway`).
GATEWAY_NAMES = frozenset({"gateway", "_gateway"})


def _imports(tree: ast.AST) -> tuple[list[str], set[str]]:
    """Imports of the forbidden modules (also `from gateway.pipeline import gateway`), and
    the local names they bind."""
    found, bound = [], set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                if node.module in FORBIDDEN_MODULES or full in FORBIDDEN_MODULES:
                    found.append(f"line {node.lineno}: imports {full}")
                    bound.add(alias.asname or alias.name)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in FORBIDDEN_MODULES:
                    found.append(f"line {node.lineno}: imports {alias.name}")
                    if alias.asname:
                        bound.add(alias.asname)
    return found, bound


class _Holders:
    """Names and attribute names that hold a Gateway (or its class), followed through
    assignments until nothing new is found."""

    def __init__(self, names: set[str]) -> None:
        self.names = set(GATEWAY_NAMES) | names
        self.attrs = set(GATEWAY_NAMES)

    def holds(self, node: ast.expr) -> bool:
        if isinstance(node, ast.Name):
            return node.id in self.names
        if isinstance(node, ast.Attribute):
            return node.attr in self.attrs
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "getattr"
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
        ):
            return node.args[1].value in self.attrs
        return False

    def follow(self, tree: ast.AST) -> None:
        changed = True
        while changed:
            changed = False
            for node in ast.walk(tree):
                value: ast.expr | None = None
                targets: list[ast.expr] = []
                if isinstance(node, ast.Assign):
                    value, targets = node.value, list(node.targets)
                elif isinstance(node, (ast.AnnAssign, ast.NamedExpr)) and node.value is not None:
                    value, targets = node.value, [node.target]
                if value is None or not self.holds(value):
                    continue
                for target in targets:
                    if isinstance(target, ast.Name) and target.id not in self.names:
                        self.names.add(target.id)
                        changed = True
                    elif isinstance(target, ast.Attribute) and target.attr not in self.attrs:
                        self.attrs.add(target.attr)
                        changed = True


def violations(source: str) -> list[str]:
    """Every import of the Gateway's module and every use of a Gateway in `source`."""
    tree = ast.parse(source)
    found, bound = _imports(tree)
    holders = _Holders(bound)
    holders.follow(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.arg) and node.arg in holders.names:
            found.append(f"line {node.lineno}: parameter {node.arg}")
        elif (
            isinstance(node, ast.Call)
            or (isinstance(node, (ast.Name, ast.Attribute)) and isinstance(node.ctx, ast.Load))
        ) and holders.holds(node):
            label = node.id if isinstance(node, ast.Name) else ast.unparse(node)
            found.append(f"line {node.lineno}: uses the Gateway ({label})")
    return sorted(set(found), key=lambda line: (int(line.split()[1].rstrip(":")), line))


def test_the_parts_around_the_gateway_never_use_the_gateway() -> None:
    problems = {}
    for name in NARROW:
        found = violations((ROOT / name).read_text(encoding="utf-8"))
        if found:
            problems[name] = found
    assert problems == {}


def test_the_check_covers_the_panel_the_cli_and_health() -> None:
    assert {
        "gateway/panel/host.py",
        "gateway/cli/start.py",
        "gateway/cli/lifecycle.py",
        "gateway/pipeline/health.py",
        "gateway/features/heartbeat_host.py",
        "gateway/features/scheduling.py",
        "gateway/features/tidying.py",
    } <= set(NARROW)


def test_the_check_finds_a_direct_use_of_the_gateway() -> None:
    planted = "async def hint(app):\n    links = await app.gateway.state.links()\n"
    assert violations(planted) == ["line 2: uses the Gateway (app.gateway)"]


def test_the_check_finds_a_use_through_an_alias() -> None:
    """What the panel's host once did: keep the Gateway under another name, then reach its
    parts through that name."""
    planted = (
        "class Host:\n"
        "    def __init__(self, app):\n"
        "        self.door = app.gateway\n"
        "        self.state = self.door.state\n"
        "    def depth(self):\n"
        "        back = self.door\n"
        "        return back.lanes.depth()\n"
    )
    assert violations(planted) == [
        "line 3: uses the Gateway (app.gateway)",
        "line 4: uses the Gateway (self.door)",
        # `self.state` was assigned from the Gateway's `.state`, not the Gateway: a part.
        "line 6: uses the Gateway (self.door)",
        "line 7: uses the Gateway (back)",
    ]


def test_the_check_finds_an_imported_gateway_under_another_name() -> None:
    planted = (
        "from gateway.pipeline.gateway import Gateway as Door\n"
        "from gateway.pipeline import parts as everything\n"
        "def make(settings, provider):\n"
        "    return Door.build(settings, provider)\n"
    )
    assert violations(planted) == [
        "line 1: imports gateway.pipeline.gateway.Gateway",
        "line 2: imports gateway.pipeline.parts",
        "line 4: uses the Gateway (Door)",
    ]


def test_the_check_passes_the_parts_through_their_protocol() -> None:
    clean = (
        "from gateway.pipeline.ports import BackgroundParts\n"
        "class Host:\n"
        "    def __init__(self, parts: BackgroundParts):\n"
        "        self.parts = parts\n"
        "        self.lanes = parts.lanes\n"
        "    def busy(self, key):\n"
        "        return self.lanes.is_busy(key) or self.parts.lanes.depth() > 0\n"
    )
    assert violations(clean) == []
