"""What a recall index reports (memory.index): a sync's figures, the progress of computing
vectors, the index's status, and the callbacks that receive progress."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["EmbedProgress", "IndexStatus", "Progress", "SyncStats", "VectorProgress"]

Progress = Callable[[int, int], None]  # (files done, files to read)


@dataclass(frozen=True)
class EmbedProgress:
    """Where computing the missing vectors stands, told after every batch."""

    done: int
    total: int
    seconds: float  # since embedding started

    @property
    def per_second(self) -> float:
        return self.done / self.seconds if self.seconds > 0 else 0.0

    @property
    def eta_seconds(self) -> float | None:
        """Seconds left at the rate so far; None before the first batch."""
        if not self.done or self.seconds <= 0:
            return None
        return max(0.0, (self.total - self.done) * self.seconds / self.done)


VectorProgress = Callable[[EmbedProgress], None]


@dataclass
class SyncStats:
    files_seen: int = 0
    files_indexed: int = 0
    files_removed: int = 0
    chunks_added: int = 0
    chunks_removed: int = 0
    embedded: int = 0  # chunk vectors computed (cache misses)
    lines_embedded: int = 0  # line vectors computed (cache misses)
    cached: int = 0  # vectors reused from the cache
    rebuilt: bool = False
    seconds: float = 0.0
    embed_error: str = ""
    pending: int = 0  # chunks still without a vector when the sync returned


@dataclass(frozen=True)
class IndexStatus:
    path: str
    files: int
    chunks: int
    vectors: int
    embedder: str
    model: str
    dimension: int
    mode: str  # "hybrid" | "keyword-only"
    dirty: bool
    last_sync: str | None
    note: str = ""
    line_model: str = ""  # the second model for line vectors, "" when none
