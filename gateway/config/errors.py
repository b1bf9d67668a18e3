"""Settings mistakes in the words of whoever made them.

A value can come from two places, and the person fixes it where they wrote it: a mistake in
`clawgate.toml` is named by its file, line and TOML key (`[llm] provder`), one in the
environment by its variable (`CLAWGATE_LLM__PROVDER`). A misspelt key or section gets the
closest real name ("did you mean provider?"). Every problem of one start is reported at once,
one line each, and pydantic's own wording ("Extra inputs are not permitted") never reaches
the person: each kind of error is said in plain words here.
"""

from __future__ import annotations

import difflib
import re
import types
import typing
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TypeGuard

from pydantic import BaseModel, ValidationError

__all__ = ["describe", "explain"]

_SECRET_WORDS = ("token", "key", "secret", "password")


def explain(error: Mapping[str, Any]) -> str:
    """What is wrong with one value, in plain words (without saying where it is)."""
    kind, ctx = error.get("type", ""), error.get("ctx") or {}
    simple = {
        "int_parsing": "must be a whole number",
        "int_type": "must be a whole number",
        "int_from_float": "must be a whole number",
        "float_parsing": "must be a number",
        "float_type": "must be a number",
        "bool_parsing": "must be true or false",
        "bool_type": "must be true or false",
        "string_type": "must be text (in quotes)",
        "list_type": 'must be a list, e.g. ["a", "b"]',
        "missing": "is required",
        "model_type": "must be a table (a [section] with keys)",
        "model_attributes_type": "must be a table (a [section] with keys)",
        "dict_type": "must be a table (a [section] with keys)",
    }
    if kind in simple:
        return simple[kind]
    if kind == "literal_error":
        return f"must be {ctx.get('expected', 'one of the listed choices')}"
    bounds = {
        "greater_than_equal": ("ge", "at least"),
        "less_than_equal": ("le", "at most"),
        "greater_than": ("gt", "more than"),
        "less_than": ("lt", "less than"),
    }
    if kind in bounds:
        key, words = bounds[kind]
        return f"must be {words} {ctx.get(key)}"
    if kind == "string_pattern_mismatch":
        return f"has the wrong form (it must match {ctx.get('pattern')})"
    if kind in ("value_error", "assertion_error"):
        return str(ctx.get("error") or error.get("msg", "is not valid")).removeprefix(
            "Value error, "
        )
    return str(error.get("msg", "is not valid")).removeprefix("Value error, ")


def _is_model(annotation: Any) -> TypeGuard[type[BaseModel]]:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def _model_at(model: type[BaseModel], loc: Sequence[Any]) -> type[BaseModel] | None:
    """The settings section that `loc` names (a table of named entries such as
    `[heartbeat.workspaces.<person>]` takes the entry's name as one step)."""
    current: type[BaseModel] | None = model
    parts = list(loc)
    while parts and current is not None:
        field = current.model_fields.get(str(parts.pop(0)))
        if field is None:
            return None
        annotation = field.annotation
        if _is_model(annotation):
            current = annotation
            continue
        if typing.get_origin(annotation) is dict:
            values = typing.get_args(annotation)
            if len(values) == 2 and _is_model(values[1]) and parts:
                parts.pop(0)  # the entry's own name
                current = values[1]
                continue
        if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
            found = [arg for arg in typing.get_args(annotation) if _is_model(arg)]
            current = found[0] if found else None
            continue
        return None
    return current


def _suggest(model: type[BaseModel], loc: Sequence[Any]) -> str | None:
    """The closest real name for the last step of `loc` ("provder" -> "provider")."""
    parent = _model_at(model, loc[:-1])
    if parent is None:
        return None
    close = difflib.get_close_matches(
        str(loc[-1]).lower(), list(parent.model_fields), n=1, cutoff=0.6
    )
    return close[0] if close else None


def _env_name(prefix: str, loc: Sequence[Any]) -> str:
    return prefix + "__".join(str(part) for part in loc).upper()


def _from_environment(prefix: str, loc: Sequence[Any], environ: Mapping[str, str]) -> str | None:
    """The variable a value came from (the environment wins over the file), if any."""
    names = {name.upper(): name for name in environ}
    for end in range(len(loc), 0, -1):  # CLAWGATE_LLM__PROVIDER, or a whole CLAWGATE_LLM
        found = names.get(_env_name(prefix, loc[:end]))
        if found is not None:
            return found
    return None


def _in_file(values: Mapping[str, Any], loc: Sequence[Any]) -> tuple[bool, Any]:
    current: Any = values
    for part in loc:
        listed = isinstance(current, list) and isinstance(part, int) and part < len(current)
        if not listed and not (isinstance(current, Mapping) and part in current):
            return False, None
        current = current[part]
    return True, current


def _toml_key(loc: Sequence[Any], *, section: bool) -> str:
    """`[llm] provider`, `[heartbeat.workspaces.ana] every`, `timezone`, `[lm]`."""
    names = [str(part) for part in loc if not isinstance(part, int)]
    items = "".join(f"[{part}]" for part in loc if isinstance(part, int))
    if section:
        return f"[{'.'.join(names)}]"
    if len(names) == 1:
        return names[0] + items
    return f"[{'.'.join(names[:-1])}] {names[-1]}{items}"


def _line_of(text: str, loc: Sequence[Any], *, section: bool) -> int | None:
    """Best effort: the line of a key (or a section header) in the TOML text."""
    names = [str(part) for part in loc if not isinstance(part, int)]
    table = names if section else names[:-1]
    key = None if section else names[-1]
    in_table = not table
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        header = re.fullmatch(r"\[\s*([^\]]+?)\s*\]\s*(#.*)?", stripped)
        if header:
            parts = [p.strip().strip('"') for p in header.group(1).split(".")]
            in_table = parts == table
            if section and in_table:
                return number
            continue
        if in_table and key is not None and re.match(rf'"?{re.escape(key)}"?\s*=', stripped):
            return number
    return None


_COMMENTED_HEADER = re.compile(r"#+\s*\[\s*([A-Za-z0-9_.\-]+)\s*\]\s*(#.*)?")


def _commented_header(
    model: type[BaseModel], text: str, loc: Sequence[Any], line: int | None
) -> tuple[str, int] | None:
    """(section, its line) when `loc` is a key written under a commented-out header that
    has such a key: clawgate.example.toml's `# [llm]` left commented above an uncommented
    `model = ...`. The nearest header above the key decides; a real one means no."""
    if line is None or len(loc) != 1:
        return None
    lines = text.splitlines()
    for number in range(min(line, len(lines)) - 1, 0, -1):
        stripped = lines[number - 1].strip()
        if re.fullmatch(r"\[[^\]]+\]\s*(#.*)?", stripped):
            return None  # a real section: this key is in it, or at the top level
        found = _COMMENTED_HEADER.fullmatch(stripped)
        if found:
            section = _model_at(model, found.group(1).split("."))
            if section is not None and str(loc[-1]) in section.model_fields:
                return found.group(1), number
            return None
    return None


def _shown(value: Any, loc: Sequence[Any]) -> str:
    """The value as written, unless it may be a secret or is long."""
    name = str(loc[-1]).lower() if loc else ""
    if any(word in name for word in _SECRET_WORDS) or isinstance(value, (dict, list)):
        return ""
    text = repr(value) if isinstance(value, str) else str(value)
    return f" = {text}" if len(text) <= 40 else ""


def describe(
    exc: ValidationError,
    *,
    model: type[BaseModel],
    prefix: str,
    file_values: Mapping[str, Any],
    file_text: str,
    path: Path,
    environ: Mapping[str, str],
) -> list[str]:
    """One line per problem of `exc`, naming the variable or the file, line and TOML key:
    the file's problems first, in line order, then the environment's."""
    in_file: list[tuple[int, str]] = []
    in_env: list[str] = []
    for error in exc.errors():
        loc = list(error.get("loc", ()))
        extra = error.get("type") == "extra_forbidden"
        variable = _from_environment(prefix, loc, environ) if loc else None
        found, value = _in_file(file_values, loc) if loc else (False, None)
        if variable is not None:
            in_env.append(_env_problem(error, loc, variable, model, prefix, environ))
        if found and (variable is None or extra):  # an unknown key can be in both places
            in_file.append(_file_problem(error, loc, value, model, file_text, path))
        if variable is None and not found:  # given by code (tests): name both ways to set it
            where = f"{_env_name(prefix, loc)} / {_dotted(loc)}" if loc else ""
            in_env.append(f"{where}: {explain(error)}" if where else explain(error))
    return [text for _, text in sorted(in_file, key=lambda item: item[0])] + in_env


def _env_problem(
    error: Mapping[str, Any],
    loc: list[Any],
    variable: str,
    model: type[BaseModel],
    prefix: str,
    environ: Mapping[str, str],
) -> str:
    if error.get("type") == "extra_forbidden":
        suggestion = _suggest(model, loc)
        hint = (
            f" (did you mean {_env_name(prefix, [*loc[:-1], suggestion])}?)" if suggestion else ""
        )
        return f"{variable} is not a setting{hint}"
    shown = ""
    if variable.upper() == _env_name(prefix, loc):  # not a whole section given as JSON
        shown = _shown(environ.get(variable, ""), loc).replace(" = ", "=", 1)
    return f"{variable}{shown} ({_dotted(loc)}): {explain(error)}"


def _dotted(loc: Sequence[Any]) -> str:
    """`llm.provider`: the setting's name in the README's tables (and its TOML key)."""
    return ".".join(str(part) for part in loc if not isinstance(part, int))


def _file_problem(
    error: Mapping[str, Any],
    loc: list[Any],
    value: Any,
    model: type[BaseModel],
    file_text: str,
    path: Path,
) -> tuple[int, str]:
    extra = error.get("type") == "extra_forbidden"
    section = extra and isinstance(value, Mapping)
    line = _line_of(file_text, loc, section=section)
    where = f"{path} line {line}" if line else str(path)
    key = _toml_key(loc, section=section)
    suggestion = _suggest(model, loc) if extra else None
    if section:
        hint = (
            f" (did you mean [{'.'.join([*map(str, loc[:-1]), suggestion])}]?)"
            if suggestion
            else ""
        )
        return line or 0, f"{where}: {key} is not a section{hint}"
    if extra:
        hint = f" (did you mean {suggestion}?)" if suggestion else ""
        commented = _commented_header(model, file_text, loc, line)
        if commented is not None:
            section, header_line = commented
            hint = (
                f" (did you mean [{section}] {loc[-1]}? Its section header on line "
                f"{header_line} is commented out: remove the '#' before [{section}])"
            )
        return line or 0, f"{where}: {key} is not a setting{hint}"
    return line or 0, f"{where}: {key}{_shown(value, loc)}: {explain(error)}"
