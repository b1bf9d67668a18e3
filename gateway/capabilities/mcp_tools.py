"""An MCP server's tools as our `Tool` protocol: prefixed names, checked schemas, capped results.

The model sees `<server>__<tool>` with the server's own description and input schema. A tool
whose listing is unusable (no object schema, a name that collides after cleaning) is skipped
with a warning rather than sent to the provider, which would reject the whole request.

A listing is hostile input like a result: a careless server may put its own token (from the
`env` it was given) into a description, a schema default or an enum, and a name reaches the
transcript and logs. So every string of a spec is masked with the configured secrets, a tool
whose name or schema keys hold one is refused (masking a name or an argument key would only
break calls), and names are cleaned to `[A-Za-z0-9_-]`. Metric labels never come from here:
an MCP tool is counted under its configured server's name (`metric_label`). Results
are flattened to text (images and binary resources are described, not inlined), masked for the
server's secrets and capped like the file tools' output; an `is_error` result or a failed call
becomes a `ToolError`, so the model reads what went wrong and the turn goes on.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Sequence
from typing import Any

import mcp_types as types

from gateway.agent.conversation import ToolSpec
from gateway.agent.prompt import tool_schema_chars
from gateway.agent.tools.base import ToolContext, ToolError
from gateway.capabilities.mcp_connection import McpCallError, McpConnection

log = logging.getLogger(__name__)

SEPARATOR = "__"
MAX_TOOL_NAME = 64  # what Anthropic and OpenAI accept
MAX_DESCRIPTION_CHARS = 1_024
MAX_SCHEMA_CHARS = 50_000
MAX_SCHEMA_DEPTH = 32  # JSON schemas nest a few levels; deeper is a broken or hostile listing
_BAD_NAME_CHARS = re.compile(r"[^A-Za-z0-9_-]")


def prefixed_name(server: str, tool: str) -> str:
    return (f"{server}{SEPARATOR}" + _BAD_NAME_CHARS.sub("_", tool))[:MAX_TOOL_NAME]


def metric_label(server: str) -> str:
    """The `tool` label of every MCP tool of `server` in /metrics: the configured server name,
    never a name the server chose (a label set the server could grow or fill with secrets)."""
    return f"mcp:{server}"


class _Refused(Exception):
    """The listing of one tool cannot be offered; `str()` says why (no secret in it)."""


class McpTool:
    """One remote tool; `run` goes through the server's connection (timeouts, restarts)."""

    def __init__(
        self,
        connection: McpConnection,
        remote: str,
        spec: ToolSpec,
        *,
        max_chars: int,
        on_use: Callable[[str], None],
    ) -> None:
        self.connection = connection
        self.remote = remote
        self.spec = spec
        self.max_chars = max_chars
        self._on_use = on_use
        self.schema_chars = tool_schema_chars([spec])  # measured once: the budget runs per turn

    @property
    def server(self) -> str:
        return self.connection.name

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> str:
        self._on_use(self.server)
        try:
            result = await self.connection.call(self.remote, args)
        except McpCallError as exc:
            raise ToolError(f"{self.spec.name}: {exc}") from None
        text = self.connection.redact(render_result(result))
        if len(text) > self.max_chars:
            text = (
                f"{text[: self.max_chars]}\n[result truncated: showed the first "
                f"{self.max_chars:,} of {len(text):,} characters]"
            )
        if result.is_error:
            raise ToolError(f"{self.spec.name} failed: {text}")
        return text


def wrap_tools(
    connection: McpConnection,
    listing: Sequence[types.Tool],
    *,
    max_chars: int,
    on_use: Callable[[str], None],
) -> list[McpTool]:
    """The server's listed tools that can be offered to a model, in listing order."""
    tools: list[McpTool] = []
    seen: set[str] = set()
    for remote in listing:
        spec, problem = _spec(connection, remote)
        if spec is not None and spec.name in seen:
            problem = f"another tool has the same name once cleaned ({spec.name})"
            spec = None
        if spec is None:
            shown = connection.redact(remote.name)[: MAX_TOOL_NAME * 2]
            log.warning("mcp %s: tool %r skipped: %s", connection.name, shown, problem)
            continue
        seen.add(spec.name)
        tools.append(McpTool(connection, remote.name, spec, max_chars=max_chars, on_use=on_use))
    return tools


def _spec(connection: McpConnection, tool: types.Tool) -> tuple[ToolSpec | None, str]:
    redact = connection.redact
    name = prefixed_name(connection.name, tool.name)
    if redact(tool.name) != tool.name or redact(name) != name:
        return None, "its name holds a configured secret"
    schema = tool.input_schema
    if not isinstance(schema, dict) or schema.get("type", "object") != "object":
        return None, "its input schema is not a JSON object schema"
    try:
        size = len(json.dumps(schema))
    except (TypeError, ValueError, RecursionError):
        return None, "its input schema is not JSON"
    if size > MAX_SCHEMA_CHARS:
        return None, f"its input schema is {size:,} characters (at most {MAX_SCHEMA_CHARS:,})"
    try:
        schema = _masked(schema, redact, 0)
    except _Refused as exc:
        return None, str(exc)
    schema = {"type": "object", **schema}
    schema.setdefault("properties", {})
    description = " ".join((tool.description or tool.title or "").split()) or "(no description)"
    description = redact(description)[:MAX_DESCRIPTION_CHARS]
    # The server checks its own arguments; its schema is shown to the model, never run here.
    # What a server answers is outside text, whatever it is (gateway/agent/provenance.py).
    return ToolSpec(
        name, f"[{connection.name}] {description}", schema, checked=False, untrusted_output=True
    ), ""


def _masked(value: Any, redact: Callable[[str], str], depth: int) -> Any:
    """A copy of a JSON value with every string masked (descriptions, defaults, enums,
    titles, examples, patterns...); a key holding a secret refuses the whole schema."""
    if depth > MAX_SCHEMA_DEPTH:
        raise _Refused(f"its input schema is nested deeper than {MAX_SCHEMA_DEPTH} levels")
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        masked: dict[str, Any] = {}
        for key, item in value.items():
            if redact(str(key)) != key:
                raise _Refused("a key of its input schema holds a configured secret")
            masked[key] = _masked(item, redact, depth + 1)
        return masked
    if isinstance(value, list):
        return [_masked(item, redact, depth + 1) for item in value]
    return value


def render_result(result: types.CallToolResult) -> str:
    """The result as text: text blocks verbatim, everything else described in one line."""
    parts: list[str] = []
    for block in result.content:
        if isinstance(block, types.TextContent):
            parts.append(block.text)
        elif isinstance(block, types.ImageContent | types.AudioContent):
            kind = "image" if isinstance(block, types.ImageContent) else "audio"
            size = len(block.data) * 3 // 4 - block.data[-2:].count("=")  # base64 -> bytes
            parts.append(f"[{kind} {block.mime_type}, {size:,} bytes, not shown]")
        elif isinstance(block, types.ResourceLink):
            parts.append(f"[resource {block.name}: {block.uri}]")
        elif isinstance(block, types.EmbeddedResource):
            res = block.resource
            if isinstance(res, types.TextResourceContents):
                parts.append(f"[resource {res.uri}]\n{res.text}")
            else:
                parts.append(
                    f"[binary resource {res.uri} ({res.mime_type or 'unknown type'}), not shown]"
                )
    if not parts and result.structured_content is not None:
        try:
            parts.append(json.dumps(result.structured_content, ensure_ascii=False))
        except (TypeError, ValueError):
            parts.append(str(result.structured_content))
    return "\n".join(parts) if parts else "(the tool returned nothing)"
