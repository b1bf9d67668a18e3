"""One argument check for every tool: unknown names, missing values, wrong types, ranges.

A model's arguments are untrusted JSON. Each tool used to check them its own way, with slightly
different messages; here every refusal is a `ToolError` that names the tool, the argument and
what was expected, so the model can correct itself on the next call.
"""

from __future__ import annotations

from typing import Any, TypeVar

from gateway.agent.tools.base import ToolContext, ToolError

__all__ = ["MISSING", "check_known", "get_arg", "get_int", "get_number", "require_private"]

T = TypeVar("T")

MISSING: Any = object()  # "no default": the argument is required

_EXPECTED = {str: "a string", int: "an integer", bool: "true or false", float: "a number"}


def require_private(ctx: ToolContext, tool: str, what: str) -> None:
    """Refuse a private tool outside the owner's private contexts (a second wall: such tools
    are only registered there)."""
    if not ctx.private:
        raise ToolError(f"{tool}: {what} only available in the owner's direct messages")


def check_known(args: dict[str, Any], allowed: tuple[str, ...], tool: str) -> None:
    """Refuse anything but a JSON object whose keys are all in `allowed`."""
    if not isinstance(args, dict):
        raise ToolError(f"{tool}: arguments must be a JSON object")
    unknown = sorted(set(args) - set(allowed))
    if unknown:
        raise ToolError(
            f"{tool}: unknown argument(s) {', '.join(unknown)}; allowed: {', '.join(allowed)}"
        )


def get_arg(args: dict[str, Any], name: str, kind: type[T], tool: str,
            default: Any = MISSING) -> T:
    """One argument of type `kind`; absent or null means `default` (required if MISSING)."""
    if name not in args or args[name] is None:
        if default is MISSING:
            raise ToolError(f"{tool}: missing required argument '{name}'")
        return default  # type: ignore[no-any-return]
    value = args[name]
    # bool is an int subclass; `start_line: true` is a model mistake, not line 1.
    if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
        expected = _EXPECTED.get(kind, kind.__name__)
        raise ToolError(f"{tool}: argument '{name}' must be {expected}, got {type(value).__name__}")
    return value


def get_int(args: dict[str, Any], name: str, tool: str, default: int, lo: int, hi: int) -> int:
    """An integer argument within [lo, hi]."""
    value = get_arg(args, name, int, tool, default)
    if not lo <= value <= hi:
        raise ToolError(f"{tool}: argument '{name}' must be between {lo} and {hi}, got {value}")
    return value


def get_number(args: dict[str, Any], name: str, tool: str, default: float, lo: float,
               hi: float) -> float:
    """A number (integer or not) within [lo, hi]."""
    value = args.get(name)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ToolError(f"{tool}: argument '{name}' must be a number between {lo} and {hi}")
    if not lo <= value <= hi:
        raise ToolError(f"{tool}: argument '{name}' must be between {lo} and {hi}, got {value}")
    return float(value)
