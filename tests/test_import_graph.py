"""No import cycles (imports inside functions included), the import rules of
docs/architecture.md hold, and its package diagram is the one generated from the code."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

SCRIPT = Path(__file__).resolve().parent.parent / "docs" / "import_graph.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("import_graph", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


graph = _load()
Import = graph.Import


def test_there_is_no_import_cycle() -> None:
    imports = graph.all_imports()
    assert len(imports) > 300, "too few imports found: the walk is looking in the wrong place"
    assert graph.cycles(imports) == []


def test_the_import_rules_hold() -> None:
    assert graph.violations(graph.all_imports()) == []


def test_the_committed_diagram_is_the_generated_one() -> None:
    current = graph.DOC.read_text(encoding="utf-8")
    assert graph.render_doc(current, graph.all_imports()) == current, (
        "docs/architecture.md's diagram is stale: run python docs/import_graph.py"
    )


def test_imports_inside_functions_and_package_inits_are_seen() -> None:
    imports = graph.all_imports()
    # gateway/config/memory.py imports the embedders inside a function.
    assert any(
        i.importer == "gateway.config.memory" and i.imported == "memory.embedders" for i in imports
    )
    # Importing heartbeat.ack runs heartbeat/__init__ first: that is an edge for cycles.
    assert any(
        i.importer == "scheduler.service" and i.imported == "heartbeat" and i.package_init
        for i in imports
    )


def test_a_cycle_and_a_broken_rule_are_reported() -> None:
    loop = [
        Import("a.x", "a.y", 1, False),
        Import("a.y", "a.z", 1, False),
        Import("a.z", "a.x", 9, False),
        Import("a.z", "b", 2, False),
    ]
    assert graph.cycles(loop) == [["a.x", "a.y", "a.z"]]
    typing_only = [Import("a.x", "a.y", 1, False), Import("a.y", "a.x", 1, True)]
    assert graph.cycles(typing_only) == []
    broken = [
        Import("channels.telegram", "gateway.pipeline.gateway", 7, False),
        Import("heartbeat.timer", "memory.index", 3, False),
        Import("scheduler.jobs", "heartbeat.ack", 4, False),
        Import("scheduler.jobs", "heartbeat.beat", 5, False),
        Import("memory.layout", "gateway.clock", 6, True),
    ]
    assert graph.violations(broken) == [
        "channels.telegram:7 imports gateway.pipeline.gateway",
        "heartbeat.timer:3 imports memory.index",
        "memory.layout:6 imports gateway.clock",
        "scheduler.jobs:5 imports heartbeat.beat",
    ]


def test_gateways_rooms_form_layers() -> None:
    imports = graph.all_imports()
    assert graph.layer_violations(imports) == []
    assert graph.room_cycles(imports) == []
    # Every room of the layers exists, but for gateway.stores while it is being created.
    rooms = {graph.room(m) for i in imports for m in (i.importer, i.imported)}
    assert set(graph.ROOM_ORDER) - rooms <= {"gateway.stores"}


def _plant(root: Path, files: dict[str, str]) -> list[Import]:
    """A tiny tree of our packages under `root`, read the way the repository is."""
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    for package in {p.parent for p in root.rglob("*.py")}:
        (package / "__init__.py").touch()
    return graph.all_imports(root, ("gateway",))


def test_a_planted_upward_import_is_caught_also_inside_a_function(tmp_path: Path) -> None:
    imports = _plant(
        tmp_path,
        {
            "gateway/clock.py": "",
            "gateway/cli/main.py": "import gateway.pipeline.turns\n",
            "gateway/pipeline/turns.py": (
                "import gateway.clock\n\n\ndef run():\n    from gateway.cli import main\n"
            ),
        },
    )
    assert graph.layer_violations(imports) == [
        "gateway.pipeline.turns:5 imports gateway.cli.main (inside a function, gateway.pipeline "
        "[pipeline] may not import gateway.cli [app])"
    ]
    assert any(
        p.startswith("layer rule broken: gateway.pipeline.turns:5") for p in graph.problems(imports)
    )


def test_typing_only_imports_may_go_sideways_but_never_up(tmp_path: Path) -> None:
    imports = _plant(
        tmp_path,
        {
            "gateway/panel/host.py": (
                "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                "    from gateway.assembly.builder import App\n"
            ),  # sideways in app: allowed
            "gateway/assembly/builder.py": "App = 1\n",
            "gateway/agent/loop.py": (
                "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                "    from gateway.pipeline.gateway import Gateway\n"
            ),  # up: refused
            "gateway/pipeline/gateway.py": "Gateway = 1\n",
        },
    )
    assert graph.layer_violations(imports) == [
        "gateway.agent.loop:3 imports gateway.pipeline.gateway (for typing, gateway.agent "
        "[agent] may not import gateway.pipeline [pipeline])"
    ]


def test_a_planted_cycle_between_rooms_is_caught_without_a_module_cycle(tmp_path: Path) -> None:
    # config.a -> workspace.b and workspace.c -> config.d: no module imports itself back, but
    # the two rooms import each other (one of the two imports sits inside a function).
    imports = _plant(
        tmp_path,
        {
            "gateway/config/a.py": "import gateway.workspace.b\n",
            "gateway/config/d.py": "",
            "gateway/workspace/b.py": "",
            "gateway/workspace/c.py": "def f():\n    import gateway.config.d\n",
        },
    )
    assert graph.cycles(imports) == []
    assert graph.room_cycles(imports) == [["gateway.config", "gateway.workspace"]]
    assert "import cycle between rooms: gateway.config -> gateway.workspace" in (
        graph.problems(imports)
    )


def test_a_module_outside_every_room_is_reported(tmp_path: Path) -> None:
    imports = _plant(
        tmp_path, {"gateway/newroom/x.py": "import gateway.clock\n", "gateway/clock.py": ""}
    )
    assert graph.layer_violations(imports) == [
        "gateway.newroom.x: in no room of gateway/ (place it in LAYERS)"
    ]


def test_the_check_command_fails_on_a_planted_upward_import(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "import_graph.py").write_text(SCRIPT.read_text(encoding="utf-8"))
    for package in graph.PACKAGES:
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").touch()
    _plant(
        tmp_path, {"gateway/clock.py": "", "gateway/workspace/paths.py": "import gateway.clock\n"}
    )
    (tmp_path / "docs" / "architecture.md").write_text(f"{graph.START}\n{graph.END}\n")
    script = [sys.executable, str(tmp_path / "docs" / "import_graph.py")]
    assert subprocess.run(script, capture_output=True, text=True).returncode == 0  # writes it
    assert subprocess.run([*script, "--check"], capture_output=True).returncode == 0
    (tmp_path / "gateway" / "clock.py").write_text("from gateway.agent import loop\n")
    (tmp_path / "gateway" / "agent").mkdir()
    (tmp_path / "gateway" / "agent" / "__init__.py").touch()
    (tmp_path / "gateway" / "agent" / "loop.py").touch()
    done = subprocess.run([*script, "--check"], capture_output=True, text=True)
    assert done.returncode == 1
    assert "layer rule broken: gateway.clock:1 imports gateway.agent.loop" in done.stdout
