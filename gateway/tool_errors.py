"""The error a tool raises to give the model a refusal or failure as the tool's result.

Below gateway/agent/tools/ so that lower layers (gateway/workspace/paths.py's PathRefused) can
subclass it without importing the tools package, which imports them back.
"""

from __future__ import annotations


class ToolError(Exception):
    """A refusal or failure the model should see as the tool's result."""
