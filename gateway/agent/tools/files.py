"""The assistant's file tools: how it reads and maintains its Markdown memory.

Every path goes through `gateway.workspace.paths.resolve_in_workspace`, every write is atomic
(`memory.atomic`), and deletion only ever moves files into `.trash/`, because these files are a
person's long-term memory and a model's mistake must always be recoverable. Paths shown to the
model are workspace-relative, so anything a tool prints can be passed straight back to a tool.

What a private context reads of a file a group wrote, or of a received file, is outside text
(`memory.layout.outside_source`): such a result is marked (`OutsideText`), and the context may
then no longer write what groups read. A write refused by that rule is logged and counted.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import weakref
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

# A module import, not `from gateway.workspace.paths import ...`: that module imports
# gateway.agent.tools.base, which runs this package's __init__ and so this module while
# gateway.workspace.paths is half-initialized.
import gateway.workspace.paths as paths
from gateway.agent.conversation import ToolSpec
from gateway.agent.tools.base import Tool, ToolContext, ToolError, outside
from memory.atomic import atomic_write_text, fsync_directory, make_private_dirs
from memory.layout import TRASH_DIR, outside_source

__all__ = [
    "AppendFileTool",
    "DeleteFileTool",
    "EditFileTool",
    "ListFilesTool",
    "ReadFileTool",
    "WriteFileTool",
    "file_tools",
]

T = TypeVar("T")
log = logging.getLogger(__name__)

MAX_READ_LINES = 2000
# Below the registry's output cap, so a long read is paginated by lines (and can be continued)
# instead of being cut mid-line by the registry.
MAX_READ_CHARS = 90_000
MAX_LIST_ENTRIES = 500

# One lock per resolved file: two tool calls in the same turn (or two sessions of one workspace)
# doing read-modify-write on the same file must not lose each other's update. Weak values, so
# locks vanish with their last user.
_locks: weakref.WeakValueDictionary[Path, asyncio.Lock] = weakref.WeakValueDictionary()


def _lock_for(path: Path) -> asyncio.Lock:
    lock = _locks.get(path)
    if lock is None:
        lock = asyncio.Lock()
        _locks[path] = lock
    return lock


# --- shared file helpers ----------------------------------------------------------------------


def _rel(ctx: ToolContext, path: Path) -> str:
    rel = path.relative_to(os.path.realpath(ctx.workspace)).as_posix()
    return rel if rel != "." else "."


def _check_content(content: str, ctx: ToolContext, tool: str, what: str = "content") -> None:
    if "\x00" in content:
        raise ToolError(f"{tool}: {what} contains NUL characters; only text can be stored")
    try:
        size = len(content.encode("utf-8"))
    except UnicodeEncodeError as exc:  # lone surrogates from a JSON "\ud800" escape
        raise ToolError(f"{tool}: {what} is not valid Unicode text") from exc
    if size > ctx.max_file_bytes:
        raise ToolError(
            f"{tool}: the result would be {size} bytes, over the {ctx.max_file_bytes}-byte limit "
            "per file; split it into several files"
        )


def _read_text(path: Path, ctx: ToolContext, tool: str) -> str:
    """Read a workspace text file, refusing what a model cannot usefully read as text."""
    shown = _rel(ctx, path)
    if not path.exists():
        raise ToolError(f"{tool}: no such file: {shown} (use list_files to see what exists)")
    if path.is_dir():
        raise ToolError(f"{tool}: {shown} is a directory; use list_files to see its contents")
    try:
        with path.open("rb") as handle:
            data = handle.read(ctx.max_file_bytes + 1)
    except OSError as exc:
        raise ToolError(f"{tool}: could not read {shown}: {exc.strerror or exc}") from exc
    if len(data) > ctx.max_file_bytes:
        raise ToolError(
            f"{tool}: {shown} is larger than the {ctx.max_file_bytes}-byte limit for text files"
        )
    if b"\x00" in data:
        raise ToolError(f"{tool}: {shown} looks binary (it contains NUL bytes); not shown")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ToolError(f"{tool}: {shown} is not UTF-8 text; not shown") from exc


def _write_text(path: Path, text: str, ctx: ToolContext, tool: str, *, authored: int) -> None:
    """Write `text` to `path` atomically, within the turn's quotas (checked first: a refusal
    writes nothing). `authored`: the bytes this call itself puts in (see quota.py)."""
    shown = _rel(ctx, path)
    if path.is_dir():
        raise ToolError(f"{tool}: {shown} is a directory, not a file")
    data_size = len(text.encode("utf-8"))
    growth = data_size - _size(path)
    root = Path(os.path.realpath(ctx.workspace))
    if ctx.budget is not None:
        ctx.budget.check_write(tool, root, ctx.area, authored=authored, growth=growth)
    try:
        make_private_dirs(path.parent)
        atomic_write_text(path, text)
    except (FileExistsError, NotADirectoryError) as exc:
        raise ToolError(f"{tool}: cannot create {shown}: a parent is a file, not a folder") from exc
    except OSError as exc:
        raise ToolError(f"{tool}: could not write {shown}: {_os_reason(exc)}") from exc
    if ctx.budget is not None:
        ctx.budget.wrote(root, ctx.area, authored=authored, growth=growth)


def _size(path: Path) -> int:
    try:
        return path.lstat().st_size
    except OSError:
        return 0


def _os_reason(exc: OSError) -> str:
    if exc.errno == errno.ENAMETOOLONG:
        return "a name in the path is too long for the file system (at most 255 bytes each)"
    return str(exc.strerror or exc)


async def _resolve(ctx: ToolContext, user_path: str, *, write: bool) -> Path:
    try:
        return await asyncio.to_thread(
            paths.resolve_in_workspace,
            ctx.workspace,
            user_path,
            private=ctx.private,
            write=write,
            area=ctx.area,
            attended=ctx.attended,
            outside=ctx.outside,
        )
    except paths.SharedWriteRefused as exc:
        reason = "unattended" if exc.unattended else "outside_text"
        log.warning(
            "a write of a group-readable file was refused in %s (%s%s)",
            ctx.session_key,
            reason,
            f": {ctx.outside}" if ctx.outside else "",
        )
        if ctx.budget is not None:
            ctx.budget.shared_write_refused(reason)
        raise


def _marked(ctx: ToolContext, rel: str, text: str) -> str:
    """`text` read from `rel`, marked as outside text when a private context read a file a
    group wrote or a received one (a group's own context needs no mark: it may write only
    its own area anyway)."""
    return outside(text, outside_source(rel) if ctx.private else "")


async def _locked(path: Path, fn: Callable[[], T]) -> T:
    async with _lock_for(path):
        return await asyncio.to_thread(fn)


def _schema(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


_PATH_PROP = {
    "type": "string",
    "description": "Relative to your workspace, e.g. 'notes/ideas.md'.",
}


# --- tools ------------------------------------------------------------------------------------


class ReadFileTool:
    """Reads by line ranges so large notes can be paged instead of flooding the context."""

    spec = ToolSpec(
        name="read_file",
        description=(
            "Read a text file of your workspace, exactly. A long file comes in parts, ending "
            "with a note of the lines shown and the start_line to go on from."
        ),
        parameters=_schema(
            {
                "path": _PATH_PROP,
                "start_line": {
                    "type": "integer",
                    "minimum": 1,
                    "default": 1,
                    "description": "First line (1-based).",
                },
                "max_lines": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": MAX_READ_LINES,
                    "default": MAX_READ_LINES,
                    "description": "Most lines to return.",
                },
            },
            ["path"],
        ),
    )

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> str:
        name = self.spec.name
        user_path, start, limit = args["path"], args["start_line"], args["max_lines"]
        path = await _resolve(ctx, user_path, write=False)
        text = await asyncio.to_thread(_read_text, path, ctx, name)
        shown = _rel(ctx, path)
        return _marked(ctx, shown, _page(text, start, limit, shown))


def _page(text: str, start: int, limit: int, shown: str) -> str:
    if not text:
        return f"[{shown} is empty]"
    lines = text.split("\n")
    if text.endswith("\n"):
        lines.pop()
    total = len(lines)
    if start > total:
        raise ToolError(f"read_file: start_line {start} is past the end of {shown} ({total} lines)")
    chosen: list[str] = []
    used = 0
    for line in lines[start - 1 : start - 1 + limit]:
        if chosen and used + len(line) + 1 > MAX_READ_CHARS:
            break
        chosen.append(line)
        used += len(line) + 1
    end = start + len(chosen) - 1
    body = "\n".join(chosen)
    cut = len(body) > MAX_READ_CHARS  # only possible for a single enormous line
    if start == 1 and end == total and not cut:
        return text
    if cut:
        body = body[:MAX_READ_CHARS]
    note = f"[showed lines {start}-{end} of {total} in {shown}"
    if cut:
        note += f"; line {start} was cut after {MAX_READ_CHARS} characters"
    if end < total:
        note += f"; call read_file with start_line={end + 1} to continue]"
    else:
        note += "; end of file]"
    return f"{body}\n{note}"


class WriteFileTool:
    """Whole-file writes, atomic so a crash never leaves a half-written memory file."""

    spec = ToolSpec(
        name="write_file",
        description=(
            "Create a workspace text file, or replace all of one (folders are created). For "
            "part of a file use edit_file; to add at the end, append_file."
        ),
        parameters=_schema(
            {
                "path": _PATH_PROP,
                "content": {"type": "string", "description": "The complete new file content."},
            },
            ["path", "content"],
        ),
    )

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> str:
        name = self.spec.name
        user_path, content = args["path"], args["content"]
        _check_content(content, ctx, name)
        path = await _resolve(ctx, user_path, write=True)
        size = len(content.encode("utf-8"))
        await _locked(path, lambda: _write_text(path, content, ctx, name, authored=size))
        return f"wrote {len(content)} characters to {_rel(ctx, path)}"


class EditFileTool:
    """Exact-text replacement: the model must quote what it changes, so it cannot edit blind."""

    spec = ToolSpec(
        name="edit_file",
        description=(
            "Replace exact text in a workspace file. old_text must match exactly (whitespace "
            "too) and, unless replace_all, once: read the file first and quote enough to be "
            "unique."
        ),
        parameters=_schema(
            {
                "path": _PATH_PROP,
                "old_text": {"type": "string", "minLength": 1, "description": "Text to replace."},
                "new_text": {"type": "string", "description": "Replacement text (may be empty)."},
                "replace_all": {
                    "type": "boolean",
                    "default": False,
                    "description": "Every occurrence, not exactly one.",
                },
            },
            ["path", "old_text", "new_text"],
        ),
    )

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> str:
        name = self.spec.name
        user_path, old, new = args["path"], args["old_text"], args["new_text"]
        replace_all = args["replace_all"]
        if old == new:
            raise ToolError(f"{name}: old_text and new_text are identical; nothing to change")
        _check_content(new, ctx, name, "new_text")
        path = await _resolve(ctx, user_path, write=True)

        def edit() -> int:
            text = _read_text(path, ctx, name)
            shown = _rel(ctx, path)
            count = text.count(old)
            if count == 0:
                raise ToolError(
                    f"{name}: old_text not found in {shown}; read the file and copy the exact "
                    "text, including whitespace and line breaks"
                )
            if count > 1 and not replace_all:
                raise ToolError(
                    f"{name}: old_text matches {count} times in {shown}; include more "
                    "surrounding text to make it unique, or set replace_all to true"
                )
            # The size the edit would give, known before the text is built: an amplifying
            # replace_all (one byte to a thousand, everywhere) is refused before it costs
            # memory or disk.
            new_size, old_size = len(new.encode("utf-8")), len(old.encode("utf-8"))
            predicted = len(text.encode("utf-8")) + count * (new_size - old_size)
            if predicted > ctx.max_file_bytes:
                raise ToolError(
                    f"{name}: refused, nothing was written: the edited file would be "
                    f"{predicted} bytes ({count} replacements), over the "
                    f"{ctx.max_file_bytes}-byte limit per file"
                )
            result = text.replace(old, new)
            _check_content(result, ctx, name, "the edited file")
            _write_text(path, result, ctx, name, authored=count * new_size)
            return count

        count = await _locked(path, edit)
        plural = "occurrence" if count == 1 else "occurrences"
        return f"replaced {count} {plural} in {_rel(ctx, path)}"


class AppendFileTool:
    """Appending is the common memory operation (a new fact, a log line), so it gets its own tool
    rather than a read + write_file round trip that could drop a concurrent change."""

    spec = ToolSpec(
        name="append_file",
        description=("Append text to a workspace file (created if missing), on a new line."),
        parameters=_schema(
            {
                "path": _PATH_PROP,
                "content": {"type": "string", "minLength": 1, "description": "Text to append."},
            },
            ["path", "content"],
        ),
    )

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> str:
        name = self.spec.name
        user_path, content = args["path"], args["content"]
        _check_content(content, ctx, name)
        path = await _resolve(ctx, user_path, write=True)

        def append() -> int:
            existing = _read_text(path, ctx, name) if path.exists() else ""
            sep = "\n" if existing and not existing.endswith("\n") else ""
            result = existing + sep + content
            _check_content(result, ctx, name, "the resulting file")
            added = len((sep + content).encode("utf-8"))
            _write_text(path, result, ctx, name, authored=added)
            return len(result.encode("utf-8"))

        size = await _locked(path, append)
        return f"appended {len(content)} characters to {_rel(ctx, path)} (now {size} bytes)"


class ListFilesTool:
    """Shows what the assistant may touch, and nothing it may not: hidden and (outside private
    sessions) private entries are left out, as is anything a symlink would take outside."""

    spec = ToolSpec(
        name="list_files",
        description=(
            "List a workspace folder with file sizes (folders end with '/'; at most "
            f"{MAX_LIST_ENTRIES} entries)."
        ),
        parameters=_schema(
            {
                "path": {
                    **_PATH_PROP,
                    "default": ".",
                    "description": "Folder; '.' is the workspace root.",
                },
                "recursive": {
                    "type": "boolean",
                    "default": False,
                    "description": "Sub-folders too.",
                },
            },
            [],
        ),
    )

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> str:
        path = await _resolve(ctx, args["path"], write=False)
        return await asyncio.to_thread(_list, path, ctx, args["recursive"])


def _visible(ctx: ToolContext, root: Path, entry: Path) -> bool:
    rel = entry.relative_to(root)
    if paths.is_hidden_relpath(rel) or (not ctx.private and paths.is_private_relpath(rel)):
        return False
    try:  # the full check: the access rule, symlinks leading outside or onto private files
        paths.resolve_in_workspace(
            root, rel.as_posix(), private=ctx.private, write=False, area=ctx.area
        )
    except ToolError:
        return False
    return True


def _describe(root: Path, entry: Path) -> str:
    rel = entry.relative_to(root).as_posix()
    try:
        if entry.is_dir():
            return f"{rel}/"
        return f"{rel}  ({entry.stat().st_size} bytes)"
    except OSError:
        return rel


def _list(path: Path, ctx: ToolContext, recursive: bool) -> str:
    root = Path(os.path.realpath(ctx.workspace))
    shown = _rel(ctx, path)
    if not path.exists():
        raise ToolError(f"list_files: no such folder: {shown}")
    if not path.is_dir():
        raise ToolError(f"list_files: {shown} is a file; use read_file to read it")
    lines: list[str] = []
    truncated = False
    source = ""  # names people chose (a group's files, received ones) are outside text too
    try:
        for entry in _walk(path, recursive, lambda e: _visible(ctx, root, e)):
            if len(lines) >= MAX_LIST_ENTRIES:
                truncated = True
                break
            lines.append(_describe(root, entry))
            source = source or outside_source(entry.relative_to(root))
    except OSError as exc:
        raise ToolError(f"list_files: could not list {shown}: {exc.strerror or exc}") from exc
    where = "the workspace" if shown == "." else f"{shown}/"
    if not lines:
        return f"{where} is empty"
    header = f"Contents of {where}" + (" (recursive):" if recursive else ":")
    if truncated:
        lines.append(
            f"[stopped after {MAX_LIST_ENTRIES} entries; list a sub-folder to see the rest]"
        )
    listing = "\n".join([header, *lines])
    return outside(listing, source if ctx.private else "")


def _walk(top: Path, recursive: bool, visible: Callable[[Path], bool]) -> Iterator[Path]:
    """Yield visible entries in sorted order.

    Invisible folders are not entered at all (a group chat has no business even walking
    memory/), and neither are directory symlinks, so a link loop cannot make a listing endless.
    """
    with os.scandir(top) as it:
        entries = sorted(it, key=lambda e: e.name)
    for entry in entries:
        child = top / entry.name
        if not visible(child):
            continue
        yield child
        if recursive and entry.is_dir(follow_symlinks=False):
            yield from _walk(child, recursive, visible)


class DeleteFileTool:
    """Deletion is a move to `.trash/<UTC time>/`: a model that deletes the wrong memory file
    (or is talked into it) must never destroy it for good."""

    spec = ToolSpec(
        name="delete_file",
        description=(
            "Delete one workspace file (not a folder): it moves to .trash/<UTC time>/, where "
            "the owner can restore it."
        ),
        parameters=_schema({"path": _PATH_PROP}, ["path"]),
    )

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> str:
        user_path = args["path"]
        target = await _resolve(ctx, user_path, write=True)
        # Deleting a symlink means removing the link, not the file it points to.
        parent_path, _, leaf = user_path.rstrip("/").rpartition("/")
        if leaf not in ("", ".", ".."):
            parent = await _resolve(ctx, parent_path or ".", write=True)
            if (parent / leaf).is_symlink():
                target = parent / leaf
        moved_to = await _locked(target, lambda: _trash(target, ctx))
        return (
            f"deleted {_rel(ctx, target)}: moved to {moved_to}; the owner can restore it from there"
        )


def _trash(target: Path, ctx: ToolContext) -> str:
    root = Path(os.path.realpath(ctx.workspace))
    rel = target.relative_to(root)
    shown = rel.as_posix()
    if not target.is_symlink():
        if not target.exists():
            raise ToolError(f"delete_file: no such file: {shown}")
        if target.is_dir():
            raise ToolError(f"delete_file: {shown} is a folder; only single files can be deleted")
    trash = root / TRASH_DIR
    if trash.is_symlink():
        raise ToolError("delete_file: the workspace trash is misconfigured (it is a symlink)")
    stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H-%M-%SZ")
    dest = trash / stamp / rel
    counter = 1
    while dest.exists() or dest.is_symlink():
        counter += 1
        dest = trash / f"{stamp}-{counter}" / rel
    try:
        make_private_dirs(dest.parent)
        os.rename(target, dest)
    except OSError as exc:
        raise ToolError(f"delete_file: could not delete {shown}: {exc.strerror or exc}") from exc
    fsync_directory(target.parent)
    fsync_directory(dest.parent)
    return dest.relative_to(root).as_posix()


def file_tools() -> list[Tool]:
    """The file tools every assistant gets, in the order they are offered to the model."""
    return [
        ReadFileTool(),
        WriteFileTool(),
        EditFileTool(),
        AppendFileTool(),
        ListFilesTool(),
        DeleteFileTool(),
    ]
