"""A small MCP server for the tests, run as a stdio subprocess through the SDK's server side.

Its tools cover what a real server may do to the gateway: answer (`echo`, `add`), fail with a
tool error (`fail`), never answer (`hang`), die mid-call (`crash`), answer with a huge result
(`flood`), and show what it was given in its environment (`env`, to prove secrets reach the
server but not the model). Modes from the command line simulate servers that are broken from
the start: `--exit-at-start` dies before speaking, `--garbage` writes non-protocol lines,
`--silent` never answers the handshake. With FAKE_MCP_LOG_ENV=NAME in its environment it
prints that variable's value on stderr at start (a careless server leaking its own token).
`--leaky` adds tools whose listing carries its FAKE_TOKEN: in a property's description,
default, enum, title and examples (`lookup`), in a tool name (`tok_<token>`), in a schema key
(`keyed`), plus a name outside [A-Za-z0-9_-] (`list.events`) and a schema nested 40 deep.

Run: python -m tests.fakes.mcp_server [--exit-at-start | --garbage | --silent | --leaky |
--http PORT]
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

REPO_ROOT = Path(__file__).resolve().parents[2]


def stdio_config(*flags: str, env: dict[str, str] | None = None, **extra: Any) -> dict[str, Any]:
    """An `[mcp.servers.<name>]` table that runs this server with this interpreter."""
    return {
        "command": sys.executable,
        "args": ["-m", "tests.fakes.mcp_server", *flags],
        "cwd": str(REPO_ROOT),
        "env": {"PYTHONPATH": str(REPO_ROOT), **(env or {})},
        **extra,
    }


def build_server(name: str = "fake") -> MCPServer:
    server: MCPServer = MCPServer(name)

    @server.tool(description="Echo the text back, prefixed with 'echo: '.")
    def echo(text: str) -> str:
        return f"echo: {text}"

    @server.tool(description="Add two integers.")
    def add(a: int, b: int) -> str:
        return str(a + b)

    @server.tool(description="Always fails with a tool error.")
    def fail(reason: str = "it always fails") -> str:
        raise ToolError(f"fail tool: {reason}")

    @server.tool(description="Never returns.")
    async def hang() -> str:
        await asyncio.sleep(3600)
        return "unreachable"

    @server.tool(description="Kills the server process in the middle of the call.")
    def crash() -> str:
        os._exit(3)

    @server.tool(description="Returns `size` characters.")
    def flood(size: int = 200_000) -> str:
        return "x" * size

    @server.tool(description="Reads one environment variable of the server process.")
    def env(name: str) -> str:
        return os.environ.get(name, "(unset)")

    return server


def add_leaky_tools(server: MCPServer, token: str) -> None:
    """Tools whose listings carry `token` where a careless server would put its config."""

    @server.tool(description="Look a record up.")
    def lookup(query: str = "") -> str:
        return f"found {query}"

    server._tool_manager.get_tool("lookup").parameters = {
        "type": "object",
        "title": f"lookup with {token}",
        "properties": {
            "query": {
                "type": "string",
                "title": f"Query ({token})",
                "description": f"Search text; the API key is {token}.",
                "default": token,
                "enum": ["a", token],
                "examples": [[token]],
            }
        },
    }

    def leak() -> str:
        return "leaked through the name"

    server.add_tool(leak, name=f"tok_{token}", description="A tool named after a secret.")

    @server.tool(description="A schema with a secret as a property name.")
    def keyed() -> str:
        return "keyed"

    server._tool_manager.get_tool("keyed").parameters = {
        "type": "object",
        "properties": {token: {"type": "string"}},
    }

    def dotted() -> str:
        return "dotted"

    server.add_tool(dotted, name="list.events", description="A name with a dot.")

    @server.tool(description="A schema nested 40 levels deep.")
    def deep() -> str:
        return "deep"

    nested: dict[str, Any] = {"type": "string"}
    for _ in range(40):
        nested = {"type": "object", "properties": {"x": nested}}
    server._tool_manager.get_tool("deep").parameters = nested


def main(argv: list[str]) -> None:
    if "--exit-at-start" in argv:
        print("fake server: cannot start (as asked)", file=sys.stderr)
        sys.exit(1)
    if "--silent" in argv:
        sys.stdin.read()  # never answers the handshake
        return
    if "--garbage" in argv:
        for line in sys.stdin:
            sys.stdout.write("this is not JSON-RPC {{{\n")
            sys.stdout.flush()
            del line
        return
    if "--http" in argv:  # streamable HTTP on 127.0.0.1:PORT/mcp instead of stdio
        port = int(argv[argv.index("--http") + 1])
        build_server().run("streamable-http", host="127.0.0.1", port=port)
        return
    if os.environ.get("FAKE_MCP_LOG_ENV"):  # a server that logs its own secret on stderr
        name = os.environ["FAKE_MCP_LOG_ENV"]
        print(f"starting with {name}={os.environ.get(name, '')}", file=sys.stderr, flush=True)
    server = build_server()
    if "--leaky" in argv:
        add_leaky_tools(server, os.environ.get("FAKE_TOKEN", ""))
    server.run("stdio")


if __name__ == "__main__":
    main(sys.argv[1:])
