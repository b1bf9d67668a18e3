"""Session keys are built and taken apart only by memory/layout.py.

The lanes, transcripts, recall index, versioning and the panel must agree on every key; a
second spelling somewhere (`f"{person}:dm"`, `key.partition(":group:")`) drifts silently. This
scans the source of every package and the benchmarks for a key's kind fragment in a string
(f-string pieces included; docstrings are prose and skipped).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from memory.layout import (
    dm_session_key,
    group_session_key,
    heartbeat_session_key,
    is_dm_session_key,
    is_group_session_key,
    is_task_session_key,
    parse_group_session_key,
    schedule_session_key,
    task_session_key,
)

ROOT = Path(__file__).resolve().parent.parent
SCANNED = ("gateway", "channels", "memory", "heartbeat", "scheduler", "bench")
BUILDER = ROOT / "memory" / "layout.py"
# The kind part of each key, taken from the builders themselves, so a new kind is scanned
# for as soon as it is added here.
_P = "p"
KINDS = (
    dm_session_key(_P).removeprefix(_P),
    heartbeat_session_key(_P).removeprefix(_P),
    schedule_session_key(_P).removeprefix(_P),
    group_session_key("c", "x").removeprefix("c").removesuffix("x"),
)
FRAGMENT = re.compile(
    "|".join(re.escape(k) + (r"(?![A-Za-z0-9_])" if not k.endswith(":") else "") for k in KINDS)
)


def _docstrings(tree: ast.AST) -> set[int]:
    found: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    return found


def hand_spelt_keys(source: str) -> list[tuple[int, str]]:
    """(line, string) of every non-docstring string that spells a session key's kind."""
    tree = ast.parse(source)
    skip = _docstrings(tree)
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in skip
        and FRAGMENT.search(node.value)
    ]


def test_no_module_but_the_layout_spells_a_session_key() -> None:
    files = [path for package in SCANNED for path in sorted((ROOT / package).rglob("*.py"))]
    assert len(files) > 150, "too few files found: the scan is looking in the wrong place"
    found = [
        f"{path.relative_to(ROOT)}:{line}: {text!r}"
        for path in files
        if path != BUILDER
        for line, text in hand_spelt_keys(path.read_text(encoding="utf-8"))
    ]
    assert found == [], "build or parse session keys with memory.layout's functions"


def test_the_scan_sees_formatting_parsing_and_literals() -> None:
    source = '''
"""A docstring may say <person>:dm."""
def f(person, key, chat):
    """So may this one: telegram:group:5."""
    a = f"{person}:dm"
    b = key.partition(":group:")
    c = "ann:heartbeat"
    d = person + ":schedule"
    e = f"{person}:dmx and http://host:80/ and a:b"  # not a key kind
'''
    assert sorted(line for line, _ in hand_spelt_keys(source)) == [5, 6, 7, 8]


def test_the_builders_and_parsers_agree() -> None:
    assert dm_session_key("ann") == "ann:dm" and is_dm_session_key("ann:dm")
    assert schedule_session_key("ann") == "ann:schedule"
    keys = {
        dm_session_key("ann"),
        heartbeat_session_key("ann"),
        schedule_session_key("ann"),
        group_session_key("telegram", "dm"),
    }
    assert len(keys) == 4
    assert [k for k in keys if is_dm_session_key(k)] == ["ann:dm"]
    for chat in ("-5", "a:b", "dm", ":group:"):
        key = group_session_key("discord", chat)
        assert is_group_session_key(key) and parse_group_session_key(key) == ("discord", chat)
    for other in ("ann:dm", "ann:heartbeat", ":group:5", "telegram:group:", "a:b:group:5", ""):
        assert parse_group_session_key(other) is None and not is_group_session_key(other)


def test_a_task_session_is_told_apart() -> None:
    assert is_task_session_key(task_session_key("ann", 7))
    for other in ("ann:dm", "ann:task:", "ann:task:x", ":task:3", "telegram:group:task:3", ""):
        assert not is_task_session_key(other)
    assert not is_task_session_key(group_session_key("telegram", "task:3"))
