"""The memory service: one recall index per workspace, opened on first use, watched after.

The gateway owns one `MemoryService`; the memory tools ask it to search a workspace. The
embedder is shared by every workspace (one model in memory), each index has its own file.
Indexes embed in the background: a search answers at once from the keyword index and the
vectors computed so far, never waiting for the model to embed new text.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import date
from importlib import import_module
from pathlib import Path
from typing import TYPE_CHECKING

from memory.defaults import DEFAULT_CHUNK_CHARS, DEFAULT_HALF_LIFE_DAYS, DEFAULT_MAX_RESULTS

if TYPE_CHECKING:  # imported at the first use (numpy, sqlite-vec): not at the gateway's start
    from memory.embedders import Embedder
    from memory.index import IndexStatus, RecallIndex, SyncStats
    from memory.search import SearchResponse

__all__ = ["MemoryOptions", "MemoryService"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class MemoryOptions:
    chunk_chars: int = DEFAULT_CHUNK_CHARS
    sessions: bool = True
    half_life_days: float = DEFAULT_HALF_LIFE_DAYS
    watch: bool = True
    watch_interval: float = 1.0
    debounce: float = 0.5


class MemoryService:
    """The recall indexes of many workspaces and the models they share. `embedder_factory`
    runs once, lazily, off the event loop."""

    def __init__(
        self,
        embedder_factory: Callable[[], Embedder | None],
        options: MemoryOptions | None = None,
        *,
        today: Callable[[], date] | None = None,
        line_model_factory: Callable[[], Embedder | None] | None = None,
    ) -> None:
        self._factory = embedder_factory
        self._line_model_factory = line_model_factory
        self._line_model: Embedder | None = None
        self.options = options or MemoryOptions()
        self._today = today
        self._embedder: Embedder | None = None
        self._embedder_error = ""
        self._embedder_ready = False
        self._indexes: dict[str, RecallIndex] = {}
        self._guard = asyncio.Lock()

    async def _get_embedder(self) -> Embedder | None:
        if not self._embedder_ready:
            from memory.embedders import EmbedderError

            try:
                self._embedder = await asyncio.to_thread(self._factory)
            except (EmbedderError, ImportError, OSError, RuntimeError, ValueError) as exc:
                log.warning("no embedder (%s): recall is keyword-only", exc)
                self._embedder_error = str(exc)
                self._embedder = None
            if self._embedder is not None and self._line_model_factory is not None:
                try:
                    self._line_model = await asyncio.to_thread(self._line_model_factory)
                except (EmbedderError, ImportError, OSError, RuntimeError, ValueError) as exc:
                    # Recall still works, on the embedder's line vectors alone.
                    log.warning("no line model (%s): lines scored by the embedder only", exc)
                    self._line_model = None
            self._embedder_ready = True
        return self._embedder

    async def index_for(self, workspace: Path) -> RecallIndex:
        key = os.path.realpath(workspace)
        async with self._guard:
            index = self._indexes.get(key)
            if index is None:
                # First use: its imports (numpy, sqlite-vec) off the event loop.
                index_module = await asyncio.to_thread(import_module, "memory.index")
                opts = self.options
                index = index_module.RecallIndex(
                    Path(key),
                    await self._get_embedder(),
                    chunk_chars=opts.chunk_chars,
                    sessions=opts.sessions,
                    half_life_days=opts.half_life_days,
                    today=self._today,
                    embed_in_background=True,  # a turn never waits for the model
                    line_model=self._line_model,
                )
                self._indexes[key] = index
                if opts.watch:
                    index.start_watching(opts.watch_interval, opts.debounce)
            return index

    async def search(
        self,
        workspace: Path,
        query: str,
        *,
        max_results: int = DEFAULT_MAX_RESULTS,
        min_score: float = 0.0,
        more: Sequence[str] = (),
        snippet_chars: int | None = None,
    ) -> SearchResponse:
        index = await self.index_for(workspace)
        extra = {} if snippet_chars is None else {"snippet_chars": snippet_chars}
        response = await index.search(
            query, max_results=max_results, min_score=min_score, more=more, **extra
        )
        if self._embedder_error and index.embedder is None:
            response.note = (
                f"keyword-only mode: the embedder failed to load ({self._embedder_error})"
            )
        return response

    async def sync(self, workspace: Path, *, force: bool = False) -> SyncStats:
        return await (await self.index_for(workspace)).sync(force=force)

    async def status(self, workspace: Path) -> IndexStatus:
        return await (await self.index_for(workspace)).status()

    async def close(self) -> None:
        async with self._guard:
            indexes, self._indexes = list(self._indexes.values()), {}
        for index in indexes:
            await index.close()
