"""Writing a downloaded attachment to disk, chunk by chunk, under a size cap.

Both platform adapters stream a download through `save_stream`, so a 20 MB voice note or PDF
never sits in memory whole, a file over the cap is cut off the moment it passes it (whatever
size the platform declared), and a failed download leaves no partial file behind.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

from channels.base import DownloadError

CHUNK_BYTES = 64 * 1024


def size_text(size: int) -> str:
    """`20 MB`, `512 KB`: how a limit is said to a person (binary units, as limits are set)."""
    if size >= 1024 * 1024:
        return f"{size / (1024 * 1024):.0f} MB"
    return f"{max(1, size // 1024)} KB"


class FileTooLarge(DownloadError):
    """The file is (or says it is) larger than `limit`, the cap this download was given."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"the file is larger than the {size_text(limit)} I accept")
        self.limit = limit


def check_declared(size: int, limit: int) -> None:
    """Refuse before downloading when the platform already says the file is too large."""
    if size > limit:
        raise FileTooLarge(limit)


async def save_stream(chunks: AsyncIterator[bytes], dest: Path, max_bytes: int) -> int:
    """Write `chunks` to a new file `dest` (0600); the bytes written. Over `max_bytes`, or on
    any error, the partial file is removed and the error raised."""
    fd = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    written = 0
    try:
        with os.fdopen(fd, "wb") as out:
            async for chunk in chunks:
                written += len(chunk)
                if written > max_bytes:
                    raise FileTooLarge(max_bytes)
                out.write(chunk)
    except BaseException:
        dest.unlink(missing_ok=True)
        raise
    return written


async def file_chunks(path: Path) -> AsyncIterator[bytes]:
    """A local file as chunks (a self-hosted Bot API server in local mode hands out paths)."""
    with open(path, "rb") as handle:
        while chunk := handle.read(CHUNK_BYTES):
            yield chunk
