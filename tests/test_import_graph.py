"""No import cycles (imports inside functions included), the import rules of
docs/architecture.md hold, and its package diagram is the one generated from the code."""

from __future__ import annotations

import importlib.util
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
        "docs/architecture.md's diagram is stale: run python docs/import_graph.py")


def test_imports_inside_functions_and_package_inits_are_seen() -> None:
    imports = graph.all_imports()
    # gateway/config/memory.py imports the embedders inside a function.
    assert any(i.importer == "gateway.config.memory" and i.imported == "memory.embedders"
               for i in imports)
    # Importing heartbeat.ack runs heartbeat/__init__ first: that is an edge for cycles.
    assert any(i.importer == "scheduler.service" and i.imported == "heartbeat"
               and i.package_init for i in imports)


def test_a_cycle_and_a_broken_rule_are_reported() -> None:
    loop = [Import("a.x", "a.y", 1, False), Import("a.y", "a.z", 1, False),
            Import("a.z", "a.x", 9, False), Import("a.z", "b", 2, False)]
    assert graph.cycles(loop) == [["a.x", "a.y", "a.z"]]
    typing_only = [Import("a.x", "a.y", 1, False), Import("a.y", "a.x", 1, True)]
    assert graph.cycles(typing_only) == []
    broken = [Import("channels.telegram", "gateway.pipeline.gateway", 7, False),
              Import("heartbeat.timer", "memory.index", 3, False),
              Import("scheduler.jobs", "heartbeat.ack", 4, False),
              Import("scheduler.jobs", "heartbeat.beat", 5, False),
              Import("memory.layout", "gateway.clock", 6, True)]
    assert graph.violations(broken) == [
        "channels.telegram:7 imports gateway.pipeline.gateway",
        "heartbeat.timer:3 imports memory.index",
        "memory.layout:6 imports gateway.clock",
        "scheduler.jobs:5 imports heartbeat.beat",
    ]
