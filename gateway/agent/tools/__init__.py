"""Tools the assistant can call, and the registry that runs them safely."""

from gateway.agent.tools.base import Tool, ToolContext, ToolError
from gateway.agent.tools.files import file_tools
from gateway.agent.tools.registry import ToolOutcome, ToolRegistry

__all__ = ["Tool", "ToolContext", "ToolError", "ToolOutcome", "ToolRegistry", "file_tools"]
