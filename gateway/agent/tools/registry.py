"""Dispatch from a model's tool call to a tool, turning every failure into a readable result.

The agent loop must survive anything a tool does: a refusal, a bug, an enormous output. The
registry is where that is guaranteed, so the loop only ever sees a `ToolOutcome`.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from gateway.agent.conversation import ToolSpec
from gateway.agent.provenance import result_source
from gateway.agent.tools.args import run_checked
from gateway.agent.tools.base import OutsideText, Tool, ToolContext, ToolError

__all__ = ["MAX_TOOL_OUTPUT_CHARS", "ToolOutcome", "ToolRegistry"]

log = logging.getLogger(__name__)

# Roughly 25k tokens: enough for any sensible result, small enough that one runaway tool output
# cannot eat the context window.
MAX_TOOL_OUTPUT_CHARS = 100_000
_NOT_IN_A_NAME = re.compile(r"[^A-Za-z0-9_-]")


@dataclass(frozen=True, slots=True)
class ToolOutcome:
    """A tool's result as the model will see it; `is_error` marks refusals and failures;
    `untrusted` names the outside source of its text ("" for none; provenance.py)."""

    text: str
    is_error: bool = False
    untrusted: str = ""


class ToolRegistry:
    """The set of tools one agent may call, looked up by name."""

    def __init__(
        self,
        tools: Iterable[Tool],
        *,
        max_output_chars: int = MAX_TOOL_OUTPUT_CHARS,
        redact: Callable[[str], str] | None = None,
    ):
        self._tools: dict[str, Tool] = {}
        for tool in tools:
            name = tool.spec.name
            if name in self._tools:
                raise ValueError(f"duplicate tool name: {name}")
            self._tools[name] = tool
        self._max_output_chars = max_output_chars
        # Every result reaches the model, hence the transcript, the recall index and backups:
        # an error that echoes a key (an embeddings endpoint's 401 did) is masked here.
        self._redact = redact or (lambda text: text)

    def redact_with(self, redact: Callable[[str], str]) -> ToolRegistry:
        """Mask every result with `redact` from now on (registries built elsewhere, e.g. with
        capability tools, get the gateway's redaction this way); returns self."""
        self._redact = redact
        return self

    def shown_name(self, name: str) -> str:
        """A called tool's name as it is recorded (transcript, history, metrics): a secret in
        it masked like one in a result, in the characters a tool name may have, since the
        provider is sent the name again with the history."""
        masked = self._redact(name)
        return name if masked == name else _NOT_IN_A_NAME.sub("_", masked)

    def specs(self) -> list[ToolSpec]:
        return [tool.spec for tool in self._tools.values()]

    def names(self) -> list[str]:
        return list(self._tools)

    def tools(self) -> list[Tool]:
        """The tools themselves, to build a wider registry on top of this one."""
        return list(self._tools.values())

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __len__(self) -> int:
        return len(self._tools)

    async def run(self, name: str, args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
        """Run one tool call. Never raises except for cancellation, which must propagate."""
        outcome = await self._run(name, args, ctx)
        return ToolOutcome(self._redact(outcome.text), outcome.is_error, outcome.untrusted)

    async def _run(self, name: str, args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
        tool = self._tools.get(name)
        if tool is None:
            available = ", ".join(self._tools) or "none"
            return ToolOutcome(f"unknown tool {name!r}; available tools: {available}", True)
        # Whatever such a tool says, an error too, may carry outside text (a server's error
        # message, a page's status line).
        declared = result_source(name) if tool.spec.untrusted_output else ""
        try:
            result = await run_checked(tool, args, ctx)
        except ToolError as exc:
            return ToolOutcome(str(exc) or f"{name} failed", True, declared)
        except Exception as exc:
            log.exception("tool %s raised", name)
            return ToolOutcome(f"internal error in tool {name}: {type(exc).__name__}", True)
        if not isinstance(result, str):
            log.error("tool %s returned %s instead of str", name, type(result).__name__)
            return ToolOutcome(
                f"internal error in tool {name}: returned {type(result).__name__}", True
            )
        marked = result.source if isinstance(result, OutsideText) else ""
        return ToolOutcome(self._cap(str(result)), False, marked or declared)

    def _cap(self, text: str) -> str:
        text = self._redact(text)  # before cutting: a cut must not leave half a key behind
        limit = self._max_output_chars
        if len(text) <= limit:
            return text
        return (
            f"{text[:limit]}\n[output truncated: showed the first {limit} of {len(text)} "
            "characters]"
        )
