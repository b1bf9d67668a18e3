"""The recall index is composed of parts, not mixins: no class of memory/ derives from another
one of memory/ (parts sharing one `self` hide which job owns which state), and every part
creates its attributes in its constructor (none is born later, in whichever method runs
first). Read from the source with `ast`, as tests/test_import_graph.py reads imports."""

from __future__ import annotations

import ast
from pathlib import Path

MEMORY = Path(__file__).resolve().parents[2] / "memory"


def _classes() -> list[tuple[str, ast.ClassDef]]:
    found = []
    for path in sorted(MEMORY.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        found.extend((path.name, node) for node in tree.body if isinstance(node, ast.ClassDef))
    return found


def _self_attributes(function: ast.AST) -> set[str]:
    """Attributes of `self` that `function` assigns."""
    names = set()
    for node in ast.walk(function):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AugAssign | ast.AnnAssign):
            targets = [node.target]
        for target in targets:
            for item in ast.walk(target):
                if (
                    isinstance(item, ast.Attribute)
                    and isinstance(item.value, ast.Name)
                    and item.value.id == "self"
                ):
                    names.add(item.attr)
    return names


def test_no_class_of_memory_derives_from_another() -> None:
    classes = _classes()
    assert len(classes) > 15, "too few classes found: looking in the wrong place"
    ours = {node.name for _, node in classes}
    mixed = [
        f"{file}:{node.name}({ast.unparse(base)})"
        for file, node in classes
        for base in node.bases
        if ast.unparse(base) in ours
    ]
    assert mixed == []


def test_every_attribute_is_created_in_the_constructor() -> None:
    late = []
    for file, node in _classes():
        methods = [n for n in node.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
        init = next((m for m in methods if m.name == "__init__"), None)
        if init is None:
            continue  # a dataclass or a protocol: fields are declared in the class body
        created = _self_attributes(init)
        late.extend(
            f"{file}:{node.name}.{method.name} creates self.{name}"
            for method in methods
            if method is not init
            for name in sorted(_self_attributes(method) - created)
        )
    assert late == []
