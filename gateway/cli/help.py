"""Help pages that read like a manual: no type noise, every default said once.

Typer shows each parameter's Python type (`<bool>` next to every flag, `<str>`, `<int>`,
`<list[str]>`, `{when}` in the usage line) and appends `[default: 6]` even where the help text
already says "(default 6)". `tidy` walks the finished command tree once: a flag shows no value,
a value shows a name in capitals (`--limit LIMIT`, `WHEN`), and a default is added only when
the help text does not already speak of one. Checked for every command by
tests/gateway/cli/test_help.py.
"""

from __future__ import annotations

from typing import Any

__all__ = ["tidy"]


def _placeholder(param: Any) -> str:
    """N for a whole number, NUMBER, PATH, else the parameter's name in capitals."""
    from pathlib import Path

    descriptor = getattr(param, "type_descriptor", None)
    annotation = getattr(descriptor, "annotation", None)
    named = {int: "N", float: "NUMBER", Path: "PATH"}
    if isinstance(annotation, type) and annotation in named:
        return named[annotation]
    return str(param.name or "value").upper().replace("_", "-")


def _choices(param: Any, ctx: Any) -> str | None:
    """'telegram|discord' for a parameter with fixed choices (worth showing), else None."""
    descriptor = getattr(param, "type_descriptor", None)
    if descriptor is None or not getattr(descriptor, "is_choice", False):
        return None
    return str(super(type(param), param).display_type(ctx)).strip("<>")


def _quiet_argument(kind: type) -> type:
    class QuietArgument(kind):  # type: ignore[misc]
        """An argument shown by its name alone, in the usage line too."""

        def display_type_rich(self, ctx: Any) -> str | None:
            return _choices(self, ctx)

        def display_type(self, ctx: Any) -> str:
            return _choices(self, ctx) or ""

        def _usage_display_name(self) -> str:
            name = self.display_name_raw
            many = self.nargs != 1 and not name.endswith("...")
            shown = f"{name}..." if many else name
            return shown if self.required else f"[{shown}]"

    return QuietArgument


def _quiet_option(kind: type) -> type:
    class QuietOption(kind):  # type: ignore[misc]
        """A flag shown bare, a value by its placeholder."""

        def display_type_rich(self, ctx: Any) -> str | None:
            if self.is_flag:
                return None
            return self.metavar or _choices(self, ctx) or _placeholder(self)

        def display_type(self, ctx: Any) -> str:
            return self.display_type_rich(ctx) or ""

    return QuietOption


_CLASSES: dict[type, type] = {}


def _quiet(param: Any, make: Any) -> None:
    kind = type(param)
    if kind not in _CLASSES:
        _CLASSES[kind] = make(kind)
    param.__class__ = _CLASSES[kind]


def _quiet_help_option(command: Any) -> None:
    """`--help` itself is made when help is asked for: quiet it then."""
    original = command.get_help_option

    def get_help_option(ctx: Any) -> Any:
        option = original(ctx)
        if option is not None and type(option) not in _CLASSES.values():
            _quiet(option, _quiet_option)
        return option

    command.get_help_option = get_help_option


def tidy(command: Any) -> Any:
    """`command` and every subcommand, with quiet parameter help (changed in place)."""
    from typer.core import TyperArgument, TyperOption

    _quiet_help_option(command)
    for param in getattr(command, "params", ()):
        help_text = (getattr(param, "help", None) or "").lower()
        if "default" in help_text:
            param.show_default = False  # said in words already
        if isinstance(param, TyperArgument):
            if param.metavar is None:
                param.metavar = _placeholder(param)
            _quiet(param, _quiet_argument)
        elif isinstance(param, TyperOption):
            _quiet(param, _quiet_option)
    for sub in (getattr(command, "commands", None) or {}).values():
        tidy(sub)
    return command
