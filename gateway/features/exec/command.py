"""Is a command line one simple command of literal words? A strict grammar, total on any input.

Only a simple command can match an allowlist entry: a program and its arguments, each a
literal word, optionally with redirections to literal file names. Everything else is "not
simple" and asks the owner: a pipe, `;`, `&&`, `||`, `&`, a newline or any control
character, `$` in any form (`$VAR`, `${IFS}`, `$(...)`, `$'...'`), backticks, globs (`*`, `?`,
`[`: they expand to file names in the workspace, which a command or a group could have
chosen, such as a file called `-rf`), braces, `~`, `#` (a comment hides the rest from the
shell, not from a matcher), `!`, parentheses (subshells, functions, process substitution),
here-documents and here-strings, assignments before the program (`LD_PRELOAD=... ls`), shell
keywords, and any non-ASCII character outside quotes.

Why not a full shell parser: the question is not "what does this bash program mean" but
"is it so plain that its meaning is its words", and a grammar that accepts only that is a
few dozen lines that provably end on any input. bashlex (the maintained-looking candidate)
had its last release in January 2023, raises on constructs it does not know, and is GPL
(derived from bash's own parser); it would have to be fenced in exactly like this anyway.

Quoting follows bash: single quotes keep everything literally; double quotes keep everything
but `$`, backticks, `\\` and `!` (refused inside them); a backslash outside quotes makes the
next character literal (`sud\\o` is `sudo`, so it matches what it runs).
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass

__all__ = ["MAX_COMMAND_CHARS", "NotSimple", "Redirection", "SimpleCommand", "parse_simple"]

MAX_COMMAND_CHARS = 4096

# Literal outside quotes (POSIX portable file name characters and a few harmless ones).
_PLAIN = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_@%+=:,./-^")
_BLANK = frozenset(" \t")
_RESERVED = frozenset(
    {
        "if",
        "then",
        "else",
        "elif",
        "fi",
        "case",
        "esac",
        "for",
        "select",
        "while",
        "until",
        "do",
        "done",
        "function",
        "time",
        "coproc",
        "in",
        "{",
        "}",
        "!",
        "[[",
        "]]",
    }
)
_WHY: dict[str, str] = {
    "|": "a pipe",
    ";": "a command separator (;)",
    "&": "a background or && operator",
    "$": "an expansion ($)",
    "`": "a command substitution (backticks)",
    "(": "a subshell or substitution",
    ")": "a subshell or substitution",
    "*": "a glob",
    "?": "a glob",
    "[": "a glob",
    "]": "a glob",
    "{": "a brace expansion",
    "}": "a brace expansion",
    "~": "a tilde expansion",
    "#": "a comment",
    "!": "a history or negation (!)",
    "\\": "a backslash at the end",
}


@dataclass(frozen=True, slots=True)
class Redirection:
    """`fd op target`: op is `>`, `>>`, `<`, `&>`, `&>>` (target a file name, quotes
    removed) or `>&` (target a descriptor number or `-`)."""

    fd: int | None
    op: str
    target: str


@dataclass(frozen=True, slots=True)
class SimpleCommand:
    argv: tuple[str, ...]
    redirections: tuple[Redirection, ...] = ()


@dataclass(frozen=True, slots=True)
class NotSimple:
    reason: str


def _bad_char(ch: str) -> bool:
    """Refused anywhere, quoted or not: control, format, line and odd space characters."""
    if ch in "\t":
        return False
    category = unicodedata.category(ch)
    return category in ("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp") or (
        category == "Zs" and ch != " "
    )


class _Scanner:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def peek(self, ahead: int = 0) -> str:
        i = self.pos + ahead
        return self.text[i] if i < len(self.text) else ""

    def word(self) -> tuple[str, bool] | NotSimple:
        """One word from here: (its value after quote removal, whether it was plain: no
        quotes or escapes). Stops at a blank, `<`, `>` or the end."""
        out: list[str] = []
        plain = True
        while True:
            ch = self.peek()
            if ch == "" or ch in _BLANK or ch in "<>":
                return "".join(out), plain
            if ch == "'":
                end = self.text.find("'", self.pos + 1)
                if end < 0:
                    return NotSimple("an unclosed single quote")
                out.append(self.text[self.pos + 1 : end])
                self.pos = end + 1
                plain = False
            elif ch == '"':
                self.pos += 1
                while (c := self.peek()) != '"':
                    if c == "":
                        return NotSimple("an unclosed double quote")
                    if c in "$`\\!":
                        return NotSimple(f"{_WHY.get(c, repr(c))} inside double quotes")
                    out.append(c)
                    self.pos += 1
                self.pos += 1
                plain = False
            elif ch == "\\":
                nxt = self.peek(1)
                if nxt == "" or nxt in "\n":
                    return NotSimple("a backslash at the end or before a newline")
                out.append(nxt)
                self.pos += 2
                plain = False
            elif ch in _PLAIN:
                out.append(ch)
                self.pos += 1
            else:
                why = _WHY.get(ch) or (
                    "a non-ASCII character outside quotes"
                    if ord(ch) > 127
                    else f"the character {ch!r}"
                )
                return NotSimple(why)

    def blanks(self) -> None:
        while self.peek() in _BLANK and self.peek():
            self.pos += 1


def _assignment(raw: str) -> bool:
    name, eq, _ = raw.partition("=")
    return (
        bool(eq)
        and bool(name)
        and (name[0].isalpha() or name[0] == "_")
        and all(c.isalnum() or c == "_" for c in name)
        and name.isascii()
    )


def _operator(scan: _Scanner, fd: int | None) -> Redirection | NotSimple:
    """A redirection starting at `<`, `>` or `&>`; its target word follows."""
    text = scan.text
    ops = ("&>>", "&>", ">>", ">&", ">", "<")
    op = next((o for o in ops if text.startswith(o, scan.pos)), "")
    if not op:
        return NotSimple("a background or && operator")
    after = text[scan.pos + len(op) : scan.pos + len(op) + 1]
    if op == "<" and after in ("<", ">", "("):
        return NotSimple(
            "a here-document, here-string or process substitution"
            if after != ">"
            else "a read-write redirection"
        )
    if op in (">", ">>") and after in ("|", "("):
        return NotSimple("a clobbering redirection or process substitution")
    if op.startswith("&") and fd is not None:
        return NotSimple("a redirection of a numbered descriptor with &>")
    scan.pos += len(op)
    scan.blanks()
    target = scan.word()
    if isinstance(target, NotSimple):
        return target
    value, _plain = target
    if not value:
        return NotSimple("a redirection without a target")
    if op == ">&" and not (value == "-" or (value.isdigit() and len(value) == 1)):
        return NotSimple("a >& redirection to something other than a descriptor")
    return Redirection(fd, op, value)


def parse_simple(text: str) -> SimpleCommand | NotSimple:
    """`text` as one simple command, or why it is not one. Never raises."""
    if not isinstance(text, str):
        return NotSimple("not text")
    if len(text) > MAX_COMMAND_CHARS:
        return NotSimple(f"longer than {MAX_COMMAND_CHARS} characters")
    bad = next((ch for ch in text if _bad_char(ch)), None)
    if bad is not None:
        return NotSimple(
            "a newline or control character"
            if bad in "\n\r" or ord(bad) < 32
            else f"the invisible or unusual character U+{ord(bad):04X}"
        )
    scan = _Scanner(text)
    argv: list[str] = []
    redirections: list[Redirection] = []
    scan.blanks()
    while scan.peek():
        ch = scan.peek()
        if ch in "<>" or (ch == "&" and scan.peek(1) == ">"):
            redirection = _operator(scan, None)
            if isinstance(redirection, NotSimple):
                return redirection
            redirections.append(redirection)
        else:
            start = scan.pos
            word = scan.word()
            if isinstance(word, NotSimple):
                return word
            value, plain = word
            raw = text[start : scan.pos]
            if scan.peek() in ("<", ">") and plain and len(raw) == 1 and raw.isdigit():
                redirection = _operator(scan, int(raw))
                if isinstance(redirection, NotSimple):
                    return redirection
                redirections.append(redirection)
            else:
                if not argv and _assignment(raw):
                    return NotSimple("a variable assignment before the program")
                if not argv and (value in _RESERVED or not value):
                    return NotSimple("a shell keyword" if value else "an empty program name")
                argv.append(value)
        if scan.peek() and scan.peek() not in _BLANK and scan.peek() not in "<>&":
            return NotSimple(f"the character {scan.peek()!r}")
        scan.blanks()
    if not argv:
        return NotSimple("no program")
    return SimpleCommand(tuple(argv), tuple(redirections))
