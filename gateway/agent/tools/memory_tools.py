"""Recall tools: `memory_search` and `memory_get`, for the owner's DM sessions only.

They adapt the `memory` package to the tool interface. The gateway registers them as private
tools, so in any other session they do not exist at all; as a second lock they also refuse to
run in a session that is not private.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import gateway.workspace.paths as paths
from gateway.agent.conversation import ToolSpec
from gateway.agent.tools.args import require_private
from gateway.agent.tools.base import Tool, ToolContext, ToolError, outside
from memory.chunking import transcript_lines
from memory.defaults import DEFAULT_MAX_RESULTS, MAX_RESULTS
from memory.layout import outside_source
from memory.sources import is_memory_path

if TYPE_CHECKING:  # the recall index (numpy, sqlite-vec) loads at the first search
    from memory.service import MemoryService

__all__ = ["MemoryGetTool", "MemorySearchTool", "memory_tools"]

DEFAULT_GET_LINES = 40
MAX_PHRASINGS = 4  # `queries`: other wordings of the question, fused with `query`
MAX_GET_LINES = 400


class MemorySearchTool:
    spec = ToolSpec(
        name="memory_search",
        description=(
            "Search long-term memory (MEMORY.md, USER.md, daily notes, past conversations "
            "with the owner) by meaning and exact strings (names, numbers, IDs). Use it "
            "before answering about the past that is not in view. Memory may word it "
            "otherwise: add 1-3 phrasings in `queries` (synonyms, the answer's likely words). "
            "Results give path and lines; memory_get reads around them."
        ),
        parameters={
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "What to look for."},
                "queries": {
                    "type": "array",
                    "items": {"type": "string"},
                    "maxItems": MAX_PHRASINGS - 1,
                    "description": "Other phrasings.",
                },
                "max_results": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": MAX_RESULTS,
                    "default": DEFAULT_MAX_RESULTS,
                    "description": "How many results.",
                },
                "min_score": {
                    "type": "number",
                    "minimum": 0,
                    "maximum": 1,
                    "default": 0,
                    "description": "Drop results scoring lower.",
                },
            },
            "required": ["query"],
            "additionalProperties": False,
        },
    )

    def __init__(
        self, service: MemoryService, on_search: Callable[[float], None] | None = None
    ) -> None:
        self.service = service
        self.on_search = on_search  # told each search's duration in seconds (for /metrics)

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> str:
        name = self.spec.name
        require_private(ctx, name, "memory is")
        query = args["query"]
        if not query.strip():
            raise ToolError(f"{name}: argument 'query' must not be blank")
        more = [
            q
            for q in dict.fromkeys(q.strip() for q in args.get("queries", ()))
            if q and q != query.strip()
        ]
        limit, min_score = args["max_results"], float(args["min_score"])
        started = time.perf_counter()
        try:
            response = await self.service.search(
                ctx.workspace,
                query,
                max_results=limit,
                min_score=min_score,
                more=more,
            )
        except Exception as exc:
            raise ToolError(
                f"{name}: memory search is unavailable right now ({type(exc).__name__}: {exc}); "
                "read MEMORY.md or the daily notes with read_file instead"
            ) from exc
        if self.on_search is not None:
            self.on_search(time.perf_counter() - started)
        # A received document's text is indexed too: a hit from it is outside text.
        sources = [outside_source(result.path) for result in response.results]
        return outside(format_results(query, response), next(filter(None, sources), ""))


def format_results(query: str, response: Any) -> str:
    head = f"mode: {response.mode}"
    if response.note:
        head += f" ({response.note})"
    if not response.results:
        return f"No memory matched {query!r}. {head}"
    lines = [f"{len(response.results)} result(s) for {query!r}, best first; {head}"]
    for number, result in enumerate(response.results, start=1):
        best = f", best match line {result.line}" if result.line is not None else ""
        lines.append(
            f"\n{number}. {result.path} lines {result.start_line}-{result.end_line}{best} "
            f"(score {result.score:.2f}, {result.source})\n{result.snippet}"
        )
    return "\n".join(lines)


class MemoryGetTool:
    spec = ToolSpec(
        name="memory_get",
        description=(
            "Read numbered lines of a memory file or a past conversation (sessions/), e.g. "
            "around a memory_search result."
        ),
        parameters={
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "A path from memory_search."},
                "from_line": {
                    "type": "integer",
                    "minimum": 1,
                    "default": 1,
                    "description": "First line (1-based).",
                },
                "lines": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": MAX_GET_LINES,
                    "default": DEFAULT_GET_LINES,
                    "description": "How many lines.",
                },
            },
            "required": ["path"],
            "additionalProperties": False,
        },
    )

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> str:
        name = self.spec.name
        require_private(ctx, name, "memory is")
        user_path, start, count = args["path"], args["from_line"], args["lines"]
        target = await asyncio.to_thread(
            paths.resolve_in_workspace, ctx.workspace, user_path, private=True, write=False
        )
        rel = target.relative_to(os.path.realpath(ctx.workspace)).as_posix()
        if not is_memory_path(rel):
            raise ToolError(
                f"{name}: {rel} is not a memory file; memory_get reads MEMORY.md, USER.md, "
                "memory/*.md and sessions/*.jsonl (use read_file for other files)"
            )
        text = await asyncio.to_thread(_read_lines, target, rel, start, count, ctx, name)
        return outside(text, outside_source(rel))


def _read_lines(target: Path, rel: str, start: int, count: int, ctx: ToolContext, tool: str) -> str:
    if not target.is_file():
        raise ToolError(f"{tool}: no such file: {rel}")
    data = target.read_bytes()[: max(ctx.max_file_bytes, 8 * 1024 * 1024)]
    text = data.decode("utf-8", errors="replace")
    if rel.endswith(".jsonl"):
        numbered = [(line.number, line.text) for line in transcript_lines(text)]
    else:
        numbered = list(enumerate(text.splitlines(), start=1))
    shown = [(n, t) for n, t in numbered if n >= start][:count]
    total = numbered[-1][0] if numbered else 0
    if not shown:
        return f"[{rel}: nothing at or after line {start}; the file has {total} lines]"
    body = "\n".join(f"{n}: {t}" for n, t in shown)
    last = shown[-1][0]
    more = f"; continue with from_line={last + 1}" if last < total else "; end of file"
    return f"{body}\n[{rel} lines {shown[0][0]}-{last} of {total}{more}]"


def memory_tools(
    service: MemoryService, on_search: Callable[[float], None] | None = None
) -> list[Tool]:
    return [MemorySearchTool(service, on_search), MemoryGetTool()]
