"""Tool arguments are checked against the schema the model is shown, and nowhere else.

Each built-in tool's `parameters` is the one statement of its argument rules: these tests hold
every schema to the JSON Schema standard and to the keywords the checker explains in words, and
check that a refusal names the tool and the argument without echoing a hostile value.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from gateway.agent.conversation import ToolSpec
from gateway.agent.tools import ToolContext, ToolRegistry, file_tools
from gateway.agent.tools.args import check_arguments
from gateway.agent.tools.base import Tool, ToolError
from gateway.agent.tools.corrections import correction_tools
from gateway.agent.tools.memory_tools import memory_tools
from gateway.agent.tools.schedule_tools import schedule_tools
from gateway.agent.tools.send_file import SendFileTool
from gateway.agent.tools.web_tools import WebFetchTool, WebSearchTool
from gateway.capabilities.mcp_budget import LoadToolsTool
from gateway.capabilities.skill_tool import ReadSkillTool
from memory.service import MemoryOptions, MemoryService

# What the checker turns into a sentence; a schema using anything else would get a generic
# message, so a new keyword must be explained in gateway/agent/tools/args.py first.
EXPLAINED = {
    "type",
    "properties",
    "required",
    "additionalProperties",
    "enum",
    "minimum",
    "maximum",
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
    "items",
    "default",
    "description",
}


def builtin_tools() -> list[Tool]:
    service = MemoryService(lambda: None, MemoryOptions(watch=False))
    return [
        *file_tools(),
        SendFileTool(),
        *correction_tools(),
        *memory_tools(service),
        *schedule_tools(None),  # type: ignore[arg-type]  # the book is not used to build
        WebFetchTool(None, None, max_chars=20_000),  # type: ignore[arg-type]
        WebSearchTool(None, None, default_count=5),  # type: ignore[arg-type]
        ReadSkillTool(lambda ctx: None),  # type: ignore[arg-type,return-value]
        LoadToolsTool({"mail": []}, lambda server: None),
    ]


def _keywords(schema: Any) -> set[str]:
    if not isinstance(schema, dict):
        return set()
    found = set(schema)
    for name, value in schema.items():
        if name == "properties":
            for prop in value.values():
                found |= _keywords(prop)
        elif name == "items":
            found |= _keywords(value)
    return found


@pytest.mark.parametrize("tool", builtin_tools(), ids=lambda t: t.spec.name)
def test_every_schema_is_valid_closed_and_explained(tool: Tool) -> None:
    schema = tool.spec.parameters
    Draft202012Validator.check_schema(schema)
    assert schema["type"] == "object" and schema["additionalProperties"] is False
    assert _keywords(schema) <= EXPLAINED
    assert tool.spec.checked
    for name, prop in schema["properties"].items():
        if "default" in prop:  # a default is itself a valid value
            assert name not in schema.get("required", [])
            check_arguments(
                ToolSpec(
                    "t",
                    "",
                    {
                        "type": "object",
                        "properties": {name: {k: v for k, v in prop.items() if k != "default"}},
                    },
                ),
                {name: prop["default"]},
            )


SPEC = ToolSpec(
    "demo",
    "A tool for the checker's tests.",
    {
        "type": "object",
        "properties": {
            "path": {"type": "string", "minLength": 1},
            "count": {"type": "integer", "minimum": 1, "maximum": 20, "default": 5},
            "from": {"type": "integer", "minimum": 1, "default": 1},
            "kind": {"type": "string", "enum": ["message", "agent"], "default": "message"},
            "score": {"type": "number", "minimum": 0, "maximum": 1},
            "all": {"type": "boolean", "default": False},
            "more": {"type": "array", "items": {"type": "string"}, "maxItems": 2},
        },
        "required": ["path"],
        "additionalProperties": False,
    },
)


def refusal(args: Any) -> str:
    with pytest.raises(ToolError) as info:
        check_arguments(SPEC, args)
    return str(info.value)


def test_defaults_fill_what_is_missing_and_null_counts_as_missing() -> None:
    assert check_arguments(SPEC, {"path": "a", "count": None, "more": ["x"]}) == {
        "path": "a",
        "count": 5,
        "from": 1,
        "kind": "message",
        "all": False,
        "more": ["x"],
    }
    checked = check_arguments(SPEC, {"path": "a", "count": 20, "score": 0.5, "all": True})
    assert (checked["count"], checked["score"], checked["all"]) == (20, 0.5, True)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            {"path": "a", "lines": 3, "zz": 1},
            "demo: unknown argument(s) lines, zz; allowed: path, count, from, kind, score, all,"
            " more",
        ),
        ({}, "demo: missing required argument 'path'"),
        ({"path": None}, "demo: missing required argument 'path'"),
        ({"path": 3}, "demo: argument 'path' must be a string, got an integer"),
        ({"path": ""}, "demo: argument 'path' must not be empty"),
        ({"path": "a", "count": "2"}, "demo: argument 'count' must be an integer, got a string"),
        (
            {"path": "a", "count": True},
            "demo: argument 'count' must be an integer, got true or false",
        ),
        (
            {"path": "a", "count": 2.0},
            "demo: argument 'count' must be an integer, got a number with a decimal point",
        ),
        ({"path": "a", "count": 0}, "demo: argument 'count' must be between 1 and 20, got 0"),
        ({"path": "a", "count": 21}, "demo: argument 'count' must be between 1 and 20, got 21"),
        ({"path": "a", "from": -4}, "demo: argument 'from' must be at least 1, got -4"),
        ({"path": "a", "score": 1.5}, "demo: argument 'score' must be between 0 and 1, got 1.5"),
        (
            {"path": "a", "score": False},
            "demo: argument 'score' must be a number, got true or false",
        ),
        (
            {"path": "a", "kind": "later"},
            "demo: argument 'kind' must be one of 'message', 'agent'; got 'later'",
        ),
        ({"path": "a", "all": "yes"}, "demo: argument 'all' must be true or false, got a string"),
        ({"path": "a", "more": "x"}, "demo: argument 'more' must be a list, got a string"),
        (
            {"path": "a", "more": ["x", 2]},
            "demo: argument 'more[1]' must be a string, got an integer",
        ),
        (
            {"path": "a", "more": ["x", "y", "z"]},
            "demo: argument 'more' takes at most 2 items, got 3",
        ),
        ([1, 2], "demo: arguments must be a JSON object"),
        ("path=a", "demo: arguments must be a JSON object"),
    ],
)
def test_each_refusal_names_the_tool_and_the_argument(args: Any, message: str) -> None:
    assert refusal(args) == message


def test_the_shape_of_the_call_is_reported_before_its_values() -> None:
    assert "unknown argument(s) zz" in refusal({"zz": 1, "count": "x"})
    assert "missing required argument 'path'" in refusal({"count": "x"})


def test_hostile_calls_get_a_short_answer() -> None:
    huge = "x" * 5_000_000
    assert len(refusal({"path": "a", "kind": huge})) < 300
    assert len(refusal({"path": "a", huge: 1})) < 300
    many = refusal({"path": "a", **{f"k{i}": i for i in range(100_000)}})
    assert len(many) < 300 and "and 99995 more" in many
    assert len(refusal({"path": "a", "more": [1] * 1_000_000})) < 300
    assert "a very large number" in refusal({"path": "a", "count": 10**1000})
    too_long = refusal({"path": "a", "count": 10**5000})
    assert too_long == "demo: a number in the arguments is too large"
    assert refusal({"path": "a", "more": [[[[["deep"]]]]]}).startswith("demo: argument 'more")


def test_a_tool_without_arguments_says_so() -> None:
    empty = ToolSpec(
        "schedule_list", "", {"type": "object", "properties": {}, "additionalProperties": False}
    )
    with pytest.raises(ToolError, match=r"^schedule_list: takes no arguments; got id$"):
        check_arguments(empty, {"id": 1})


class _Recorder:
    """A tool that records the arguments it was given."""

    def __init__(self, spec: ToolSpec) -> None:
        self.spec = spec
        self.seen: list[dict[str, Any]] = []

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> str:
        self.seen.append(args)
        return "ran"


async def test_the_registry_checks_before_the_tool_runs(tmp_path: Path) -> None:
    tool = _Recorder(SPEC)
    registry = ToolRegistry([tool])
    ctx = ToolContext(tmp_path, "k", True)
    outcome = await registry.run("demo", {"path": "a", "count": 99}, ctx)
    assert outcome.is_error and "'count' must be between 1 and 20" in outcome.text
    assert tool.seen == []
    assert (await registry.run("demo", {"path": "a"}, ctx)).text == "ran"
    assert tool.seen == [{"path": "a", "count": 5, "from": 1, "kind": "message", "all": False}]


async def test_a_schema_written_by_others_is_shown_not_run(tmp_path: Path) -> None:
    # An MCP server's schema (checked=False): a catastrophic `pattern` must never run here.
    hostile = ToolSpec(
        "srv__tool",
        "",
        {"type": "object", "properties": {"q": {"type": "string", "pattern": "^(a+)+$"}}},
        checked=False,
    )
    tool = _Recorder(hostile)
    registry = ToolRegistry([tool])
    ctx = ToolContext(tmp_path, "k", True)
    outcome = await registry.run("srv__tool", {"q": "a" * 64 + "!"}, ctx)
    assert outcome.text == "ran" and tool.seen == [{"q": "a" * 64 + "!"}]
    outcome = await registry.run("srv__tool", ["not", "an", "object"], ctx)  # type: ignore[arg-type]
    assert outcome.is_error and outcome.text == "srv__tool: arguments must be a JSON object"


async def test_the_file_tools_use_their_schema_defaults(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("".join(f"line {i}\n" for i in range(1, 2501)))
    registry = ToolRegistry(file_tools())
    ctx = ToolContext(tmp_path, "k", True)
    outcome = await registry.run("read_file", {"path": "a.md", "start_line": None}, ctx)
    assert outcome.text.startswith("line 1\n") and "start_line=" in outcome.text
    listing = await registry.run("list_files", {}, ctx)
    assert "a.md" in listing.text
