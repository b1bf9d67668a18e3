"""Crash-safe writes and bounded reads of workspace files.

A memory file is the assistant's only long-term state, so a crash, a full disk or a killed process
in the middle of a write must leave either the old file or the new one, never a truncated mix.
The recipe: write a temp file next to the target, fsync it, `os.replace` it over the target
(atomic on POSIX and Windows when both are on one filesystem), then fsync the directory so the
rename itself survives a power cut.

`path` is replaced as given: if it is a symlink, the link is replaced by a regular file. Callers
that want to write through a link pass the resolved path (`gateway.workspace.paths` returns one).

The other half is reading what a person or the model may have written (a schedule, a state
file, a transcript line): such bytes are hostile input, so they are read under a size cap
(`read_bounded`) and JSON is parsed only after its nesting was measured (`loads_bounded`): a
file nested 100,000 deep or holding a 5,000-digit number becomes one `BrokenFile` error naming
the problem, never a RecursionError, MemoryError or a stall. They live here, beside the writes,
because every package that owns such a file (heartbeat, scheduler, gateway) may import this one.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import stat
from pathlib import Path
from typing import Any

__all__ = [
    "MAX_JSON_DEPTH",
    "PRIVATE_DIR_MODE",
    "PRIVATE_FILE_MODE",
    "BrokenFile",
    "atomic_write_bytes",
    "atomic_write_text",
    "create_private_file",
    "fsync_directory",
    "json_depth",
    "loads_bounded",
    "make_private_dirs",
    "make_private_tree",
    "read_bounded",
]

# Everything under the workspaces root is private to the service user, whatever the umask:
# memory is someone's private life, and a 022 umask would make it world-readable.
PRIVATE_FILE_MODE = 0o600
PRIVATE_DIR_MODE = 0o700
_NEW_FILE_MODE = PRIVATE_FILE_MODE
_CREATE_ATTEMPTS = 16
_TEMP_STEM_BYTES = 200  # + "." + 12 hex digits + ".tmp" stays under NAME_MAX (255)


def fsync_directory(directory: Path) -> None:
    """Make a rename or create inside `directory` durable.

    Best effort: some platforms (Windows) and filesystems cannot open or fsync a directory, and
    there is nothing more a caller could do about that.
    """
    flags = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0)
    try:
        fd = os.open(directory, flags)
    except OSError:
        return
    try:
        with contextlib.suppress(OSError):
            os.fsync(fd)
    finally:
        os.close(fd)


def make_private_dirs(path: Path) -> Path:
    """`mkdir -p` where every directory created is 0700 (mkdir's `mode` only covers the leaf
    and is masked by the umask; an explicit chmod is not)."""
    path = Path(path)
    missing: list[Path] = []
    here = path
    while not here.exists():
        missing.append(here)
        if here.parent == here:
            break
        here = here.parent
    for directory in reversed(missing):
        with contextlib.suppress(FileExistsError):
            directory.mkdir(mode=PRIVATE_DIR_MODE)
            os.chmod(directory, PRIVATE_DIR_MODE)
    return path


def create_private_file(path: Path) -> None:
    """Create `path` empty and 0600 if it does not exist (before SQLite opens it: SQLite gives
    its -wal and -shm files the mode of the database file)."""
    with contextlib.suppress(FileExistsError):
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE_MODE))
        os.chmod(path, PRIVATE_FILE_MODE)


def make_private_tree(root: Path) -> None:
    """Narrow every directory under `root` to 0700 and every file to at most 0600 (owner bits
    kept, so a read-only file stays read-only). Symlinks are left alone (never followed)."""
    root = Path(root)
    if not root.is_dir() or root.is_symlink():
        return
    os.chmod(root, PRIVATE_DIR_MODE)
    for directory, dirs, files in os.walk(root):
        for name in dirs:
            child = os.path.join(directory, name)
            if not os.path.islink(child):
                os.chmod(child, PRIVATE_DIR_MODE)
        for name in files:
            child = os.path.join(directory, name)
            with contextlib.suppress(FileNotFoundError):
                st = os.lstat(child)
                if stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) & 0o077:
                    os.chmod(child, stat.S_IMODE(st.st_mode) & 0o700)


def _create_temp(directory: Path, name: str) -> tuple[int, Path]:
    """Open a fresh temp file beside the target.

    The name starts with "." so listings and path confinement treat a leftover as internal.
    O_EXCL guarantees we never write into someone else's file.
    """
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    flags |= getattr(os, "O_BINARY", 0)
    # A name of up to 255 bytes must still get a temp name the file system accepts.
    stem = name.encode("utf-8", "surrogateescape")[:_TEMP_STEM_BYTES].decode("utf-8", "ignore")
    for _ in range(_CREATE_ATTEMPTS):
        tmp = directory / f".{stem}.{secrets.token_hex(6)}.tmp"
        try:
            return os.open(tmp, flags, _NEW_FILE_MODE), tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"could not create a temp file in {directory}")


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Replace `path` with `data` so readers and crashes see the old or the new file, never half.

    A new file is 0600. An existing file keeps its owner bits (the owner may have made it
    read-only) and loses any group and other bits: a rewrite never widens access.
    """
    path = Path(path)
    directory = path.parent
    try:
        old_mode: int | None = stat.S_IMODE(os.stat(path).st_mode) & 0o700
    except FileNotFoundError:
        old_mode = None

    fd, tmp = _create_temp(directory, path.name)
    try:
        try:
            if old_mode is not None and hasattr(os, "fchmod"):
                os.fchmod(fd, old_mode)
            view = memoryview(data)
            while view:
                written = os.write(fd, view)
                view = view[written:]
            os.fsync(fd)
        finally:
            os.close(fd)
        if old_mode is not None and not hasattr(os, "fchmod"):
            os.chmod(tmp, old_mode)
        os.replace(tmp, path)
    except BaseException:
        # BaseException too: a cancelled task or Ctrl-C must not leave temp files behind.
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    fsync_directory(directory)


def atomic_write_text(path: Path, text: str) -> None:
    """Replace `path` with `text` as UTF-8, byte for byte (no newline translation).

    Memory files are Markdown the model edits with exact-match replacements, so what was written
    must be exactly what is read back on every platform.
    """
    atomic_write_bytes(path, text.encode("utf-8"))


# --- bounded reads ----------------------------------------------------------------------------

# Deeper than any file clawgate writes (its deepest is 3) and far below the interpreter's
# recursion limit, so a hand-made file can never reach it.
MAX_JSON_DEPTH = 64
_JSON_STRING = re.compile(r'"[^"]*"')  # escaped quotes and backslashes removed first
_NOT_BRACKET = bytes(b for b in range(256) if b not in b"[]{}")
_AS_SQUARE = bytes.maketrans(b"{}", b"[]")  # one kind of pair: nesting is all that counts
_OPEN = ord("[")
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_C_PASSES = 4  # deeper than any file clawgate writes: the common case never loops in Python


class BrokenFile(ValueError):
    """A file that cannot be used as it is; `str()` says why in one line (for the owner)."""


def read_bounded(path: Path, max_bytes: int) -> bytes:
    """The whole file, or BrokenFile when it is larger than `max_bytes` (the excess is never
    read, so a 10 GB file costs one stat). FileNotFoundError and other OSErrors propagate."""
    with open(path, "rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        if size > max_bytes:
            raise BrokenFile(f"the file is {size:,} bytes; at most {max_bytes:,} are read")
        data = handle.read(max_bytes + 1)
    if len(data) > max_bytes:  # grew while we read it
        raise BrokenFile(f"the file is over {max_bytes:,} bytes; at most {max_bytes:,} are read")
    return data


def json_depth(text: str, cap: int = MAX_JSON_DEPTH) -> int:
    """How deep the arrays and objects of `text` nest (brackets inside strings do not count),
    or `cap + 1` as soon as it is known to be deeper than `cap`.

    Escapes and strings are cut out and the brackets kept by C code (replace, a regex,
    translate); a few passes remove the innermost pairs (each pass one level, also in C),
    and only what is still nested deeper is walked here, stopping past `cap`. A 100,000-deep
    text costs a few milliseconds, a 7 MB file of 100,000 jobs about 0.2 s (parsing it costs
    as much). Brackets left unclosed count as nesting: a parser would recurse into them too."""
    plain = _JSON_STRING.sub("", text.replace("\\\\", "").replace('\\"', ""))
    rest = plain.encode("ascii", "ignore").translate(_AS_SQUARE, _NOT_BRACKET)
    levels = 0
    while rest and levels < _C_PASSES:
        shorter = rest.replace(b"[]", b"")
        if len(shorter) == len(rest):
            break
        rest, levels = shorter, levels + 1
    depth = deepest = 0
    for byte in rest:
        if byte == _OPEN:
            depth += 1
            if depth > deepest:
                deepest = depth
                if levels + depth > cap:
                    break
        else:
            depth -= 1
    return min(levels + deepest, cap + 1)


def loads_bounded(text: str | bytes, *, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """`json.loads`, total: any way the text is unusable (not UTF-8, not JSON, nested deeper
    than `max_depth`, a number too long to convert) is a BrokenFile naming where and why."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise BrokenFile(f"not UTF-8 text (byte {exc.start})") from None
    if json_depth(text, max_depth) > max_depth:
        raise BrokenFile(f"nested more than {max_depth} levels deep")
    try:
        value = json.loads(text)
        if _SURROGATE_ESCAPE.search(text):  # "\ud800" alone decodes to text no file can hold
            json.dumps(value, ensure_ascii=False).encode("utf-8")
        return value
    except UnicodeEncodeError:
        raise BrokenFile("holds a lone surrogate escape (\\udXXX), which is no character") from None
    except json.JSONDecodeError as exc:
        raise BrokenFile(
            f"not valid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"
        ) from None
    except (ValueError, RecursionError, MemoryError) as exc:  # a 5,000-digit number, say
        raise BrokenFile(f"not usable JSON: {str(exc)[:120]}") from None
