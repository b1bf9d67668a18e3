"""A tool call's arguments, checked against the JSON schema the model was shown.

A model's arguments are untrusted JSON. The schema in each `ToolSpec` is what the model reads
to write a call, so it is also the one statement of the rules: `check_arguments` validates a
call against it (jsonschema) before the tool runs and fills in the schema's defaults, and the
tool reads plain values. Every refusal is a `ToolError` that names the tool, the argument and
what was expected, so the model can correct itself on the next call; it never echoes a long
value back (a hostile call may carry megabytes).

Two deliberate differences from a bare validator: a null argument counts as absent (models
send `null` for optional arguments they do not use), and an integer means a JSON integer
(`2.0` and `true` are refused, not taken as 2 and 1).
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Sequence
from itertools import islice
from typing import Any

from gateway.agent.conversation import ToolSpec
from gateway.agent.tools.base import Tool, ToolContext, ToolError

__all__ = ["check_arguments", "require_private", "run_checked"]

# How many of a call's problems are looked at to pick the one to report: a list of a million
# wrong items yields a million errors, and the first few say enough.
_MAX_ERRORS = 32
_SHOWN = 40  # characters of a value or a name quoted back in a message

_EXPECTED = {
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "true or false",
    "array": "a list",
    "object": "an object",
    "null": "null",
}
# Which problem is reported first: the call's shape, then what is missing, then each value.
_ORDER = {"additionalProperties": 0, "required": 1}


def require_private(ctx: ToolContext, tool: str, what: str) -> None:
    """Refuse a private tool outside the owner's private contexts (a second wall: such tools
    are only registered there)."""
    if not ctx.private:
        raise ToolError(f"{tool}: {what} only available in the owner's direct messages")


async def run_checked(tool: Tool, args: Any, ctx: ToolContext) -> str:
    """Run `tool` on `args` checked against its schema: how the registry calls every tool."""
    if tool.spec.checked:
        args = check_arguments(tool.spec, args)
    elif not isinstance(args, dict):  # a schema we do not run still wants an object
        raise ToolError(f"{tool.spec.name}: arguments must be a JSON object")
    return await tool.run(args, ctx)


def check_arguments(spec: ToolSpec, args: Any) -> dict[str, Any]:
    """`args` validated against `spec.parameters`, with the schema's defaults filled in."""
    if not isinstance(args, dict):
        raise ToolError(f"{spec.name}: arguments must be a JSON object")
    given = {key: value for key, value in args.items() if value is not None}
    schema = spec.parameters
    try:
        errors = list(islice(_validator(schema).iter_errors(given), _MAX_ERRORS))
    except ValueError:  # an integer too long to print (over 4,300 digits) in jsonschema's message
        raise ToolError(f"{spec.name}: a number in the arguments is too large") from None
    error = min(errors, key=lambda e: _ORDER.get(str(e.validator), 2), default=None)
    if error is not None:
        raise ToolError(f"{spec.name}: {_explain(error, schema)}")
    for name, prop in (schema.get("properties") or {}).items():
        if name not in given and isinstance(prop, dict) and "default" in prop:
            given[name] = copy.deepcopy(prop["default"])
    return given


def _validator(schema: dict[str, Any]) -> Any:
    return _validator_class()(schema)


@functools.cache
def _validator_class() -> Any:
    """Draft 2020-12 with JSON's own integers; jsonschema loads at the first tool call, not at
    start-up."""
    from jsonschema import Draft202012Validator, validators

    def is_integer(_checker: Any, value: Any) -> bool:
        return isinstance(value, int) and not isinstance(value, bool)

    strict = Draft202012Validator.TYPE_CHECKER.redefine("integer", is_integer)
    return validators.extend(Draft202012Validator, type_checker=strict)


def _explain(error: Any, schema: dict[str, Any]) -> str:
    """One sentence a model can act on, naming the argument."""
    kind, value, rule = str(error.validator), error.instance, error.validator_value
    path = list(error.absolute_path)
    if not path:
        return _explain_call(kind, value, rule, schema, error.message)
    label = _shown(str(path[0])) + "".join(f"[{step}]" for step in path[1:])
    subject = f"argument '{label}'"
    if kind == "type":
        expected = " or ".join(_EXPECTED.get(t, str(t)) for t in _listed(rule))
        return f"{subject} must be {expected}, got {_kind_of(value)}"
    if kind == "enum":
        choices = ", ".join(_quoted(choice) for choice in rule)
        return f"{subject} must be one of {choices}; got {_quoted(value)}"
    if kind in ("minimum", "maximum"):
        return f"{subject} must be {_range(error.schema)}, got {_quoted(value)}"
    if kind == "exclusiveMinimum":
        return f"{subject} must be more than {rule}, got {_quoted(value)}"
    if kind == "exclusiveMaximum":
        return f"{subject} must be less than {rule}, got {_quoted(value)}"
    if kind == "minLength":
        if rule == 1:
            return f"{subject} must not be empty"
        return f"{subject} must be at least {rule} characters, got {len(value)}"
    if kind == "maxLength":
        return f"{subject} must be at most {rule} characters, got {len(value)}"
    if kind == "maxItems":
        return f"{subject} takes at most {rule} items, got {len(value)}"
    if kind == "minItems":
        return f"{subject} needs at least {rule} items, got {len(value)}"
    return f"{subject} is not valid: {_shown(error.message, 200)}"


def _explain_call(kind: str, value: Any, rule: Any, schema: dict[str, Any], message: str) -> str:
    """A problem with the call as a whole: a name too many, one missing."""
    allowed = list(schema.get("properties") or {})
    if kind == "additionalProperties":
        unknown = sorted(str(name) for name in set(value) - set(allowed))
        names = ", ".join(_shown(str(name)) for name in unknown[:5])
        more = f" and {len(unknown) - 5} more" if len(unknown) > 5 else ""
        if not allowed:
            return f"takes no arguments; got {names}{more}"
        return f"unknown argument(s) {names}{more}; allowed: {', '.join(allowed)}"
    if kind == "required":
        missing = [name for name in rule if name not in value]
        if not missing:
            return "missing an argument"
        choices = (schema.get("properties") or {}).get(missing[0], {}).get("enum")
        listed = f" (one of {', '.join(_quoted(c) for c in choices)})" if choices else ""
        return f"missing required argument '{missing[0]}'{listed}"
    if kind == "type":
        return "arguments must be a JSON object"
    return f"arguments are not valid: {_shown(message, 200)}"


def _range(prop: dict[str, Any]) -> str:
    low, high = prop.get("minimum"), prop.get("maximum")
    if low is not None and high is not None:
        return f"between {low} and {high}"
    return f"at least {low}" if low is not None else f"at most {high}"


def _listed(rule: Any) -> Sequence[Any]:
    return rule if isinstance(rule, list) else [rule]


def _kind_of(value: Any) -> str:
    """The JSON name of a value's type, as the model wrote it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true or false"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number with a decimal point"
    if isinstance(value, str):
        return "a string"
    return "a list" if isinstance(value, list) else "an object"


def _quoted(value: Any) -> str:
    text = repr(value) if isinstance(value, str) else _kind_or_number(value)
    return _shown(text)


def _kind_or_number(value: Any) -> str:
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 64:
        return "a very large number"
    if isinstance(value, int | float) and not isinstance(value, bool):
        return _shown(str(value))
    return _kind_of(value)


def _shown(text: str, limit: int = _SHOWN) -> str:
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text):,} characters)"
