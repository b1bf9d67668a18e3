"""The `[memory]` settings section: the recall index and its embedder (docs/memory.md, "Recall")."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, SecretStr

from memory.defaults import DEFAULT_CHUNK_CHARS, DEFAULT_HALF_LIFE_DAYS

if TYPE_CHECKING:
    from memory.index import RecallIndex


class MemorySettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    enabled: bool = True  # false: no recall index and no memory tools
    embedder: Annotated[
        Literal["local", "openai", "none"],
        BeforeValidator(lambda v: v.strip().lower() if isinstance(v, str) else v),
    ] = "local"
    # A second model for line vectors only (memory.minilm), scored with the embedder's.
    line_model: Annotated[
        Literal["minilm", "none"],
        BeforeValidator(lambda v: v.strip().lower() if isinstance(v, str) else v),
    ] = "minilm"
    model: str = ""  # openai: the embeddings model (default text-embedding-3-small)
    base_url: str | None = None  # openai: any OpenAI-compatible embeddings endpoint
    api_key: SecretStr | None = None  # openai: else OPENAI_API_KEY
    dimension: int = Field(384, ge=8, le=8192)  # openai: vector size asked of the endpoint
    chunk_chars: int = Field(DEFAULT_CHUNK_CHARS, ge=100, le=8000)
    sessions: bool = True  # index the owner's DM transcripts too
    half_life_days: float = Field(DEFAULT_HALF_LIFE_DAYS, ge=0)  # daily notes fade; 0: never
    watch: bool = True  # notice hand edits by polling the workspace
    watch_interval_seconds: float = Field(1.0, gt=0, le=3600)
    # Auto-recall (gateway/pipeline/auto_recall.py): before each turn of the owner's DM that
    # is more than small talk, the hits for the message at least min_similarity alike (cosine;
    # the default is measured for the local embedder; 0.03 less for a hit sharing a topic
    # word) that name whom it names, at most max_hits within max_tokens.
    auto_recall: bool = True
    auto_recall_min_similarity: float = Field(0.81, ge=-1, le=1)
    auto_recall_max_hits: int = Field(3, ge=1, le=10)
    auto_recall_max_tokens: int = Field(400, ge=50, le=4000)
    # A private reply claiming "I'll remember that" while the turn wrote no file gets a silent
    # capture step that writes it (gateway/pipeline/capture.py).
    capture_claims: bool = True
    # A standing rule the owner sets in their DM ("never delete anything without asking me")
    # is written to INSTRUCTIONS.md with its day and place, and carried verbatim by
    # compaction summaries (gateway/agent/instructions.py).
    standing_instructions: bool = True
    # Daily MEMORY.md tidying (gateway/features/tidying.py): at most once a day per person,
    # a pass costing at most tidy_max_tokens (estimated), refused when the rewrite would drop
    # more than tidy_max_drop_share of the lines.
    tidy: bool = True
    tidy_max_tokens: int = Field(12_000, ge=500, le=1_000_000)
    tidy_max_drop_share: float = Field(0.3, ge=0, le=1)
    # Nightly consolidation (gateway/features/consolidation.py): once a day per person, at the
    # first check from consolidate_hour (local time) on, the daily notes and DM transcripts
    # since the last pass promote durable facts to MEMORY.md / USER.md with provenance; a
    # request over consolidate_max_tokens waits (oldest sources first), a pass striking more
    # than consolidate_max_change_share of the lines is refused; consolidate_report sends
    # its short report to the owner's DM.
    consolidate: bool = True
    consolidate_hour: int = Field(3, ge=0, le=23)
    consolidate_max_tokens: int = Field(16_000, ge=1_000, le=1_000_000)
    consolidate_max_change_share: float = Field(0.3, ge=0, le=1)
    consolidate_report: bool = False

    def resolved_api_key(self) -> str:
        if self.api_key is not None and self.api_key.get_secret_value():
            return self.api_key.get_secret_value()
        return os.environ.get("OPENAI_API_KEY", "")


def build_recall_index(
    settings: MemorySettings, workspace: Path, warn: Callable[[str], None] | None = None
) -> RecallIndex:
    """The index of one workspace as these settings describe it, for the command line and the
    recall benchmarks (so a benchmark measures exactly what `clawgate memory search` runs).

    A model that fails to load is reported through `warn` and left out: the index is then
    keyword-only, or scores lines with the embedder alone.
    """
    from memory.embedders import EmbedderError, build_embedder, build_line_model
    from memory.index import RecallIndex

    say = warn or (lambda message: None)
    try:
        embedder = build_embedder(
            settings.embedder,
            model=settings.model,
            dim=settings.dimension,
            api_key=settings.resolved_api_key(),
            base_url=settings.base_url,
        )
    except (EmbedderError, ImportError, OSError, RuntimeError) as exc:
        say(f"embedder unavailable ({exc}); keyword-only")
        embedder = None
    line_model = None
    if embedder is not None:
        try:
            line_model = build_line_model(settings.line_model)
        except (EmbedderError, ImportError, OSError, RuntimeError) as exc:
            say(f"line model unavailable ({exc}); lines scored by the embedder only")
    return RecallIndex(
        workspace.resolve(),
        embedder,
        chunk_chars=settings.chunk_chars,
        sessions=settings.sessions,
        half_life_days=settings.half_life_days,
        line_model=line_model,
    )


def build_memory_service(settings: MemorySettings, today=None):  # type: ignore[no-untyped-def]
    """The MemoryService these settings describe, or None when recall is disabled."""
    if not settings.enabled:
        return None
    from memory.service import MemoryOptions, MemoryService

    def factory():  # type: ignore[no-untyped-def]
        from memory.embedders import build_embedder  # numpy: at the first search

        return build_embedder(
            settings.embedder,
            model=settings.model,
            dim=settings.dimension,
            api_key=settings.resolved_api_key(),
            base_url=settings.base_url,
        )

    options = MemoryOptions(
        chunk_chars=settings.chunk_chars,
        sessions=settings.sessions,
        half_life_days=settings.half_life_days,
        watch=settings.watch,
        watch_interval=settings.watch_interval_seconds,
        debounce=min(0.5, settings.watch_interval_seconds),
    )

    def line_model():  # type: ignore[no-untyped-def]
        from memory.embedders import build_line_model

        return build_line_model(settings.line_model)

    return MemoryService(factory, options, today=today, line_model_factory=line_model)
