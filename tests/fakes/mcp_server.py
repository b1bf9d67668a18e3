"""A small MCP server for the tests, run as a stdio subprocess through the SDK's server side.

Its tools cover what a real server may do to the gateway: answer (`echo`, `add`), fail with a
tool error (`fail`), never answer (`hang`), die mid-call (`crash`), answer with a huge result
(`flood`), and show what it was given in its environment (`env`, to prove secrets reach the
server but not the model). Modes from the command line simulate servers that are broken from
the start: `--exit-at-start` dies before speaking, `--garbage` writes non-protocol lines,
`--silent` never answers the handshake.

Run: python -m tests.fakes.mcp_server [--exit-at-start | --garbage | --silent]
"""

from __future__ import annotations

import asyncio
import os
import sys

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError


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
    build_server().run("stdio")


if __name__ == "__main__":
    main(sys.argv[1:])
