"""`clawgate memory index|search|status`: the recall index from the command line.

A public contract: works on any directory with the workspace layout, without the gateway
running. `search --json` prints only a JSON array on stdout; everything else goes to stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

from gateway.config import ConfigError, Settings, load_settings
from memory.defaults import DEFAULT_MAX_RESULTS


def register(sub: Any) -> None:
    memory = sub.add_parser("memory", help="the recall index: index, search, status")
    commands = memory.add_subparsers(title="memory commands", dest="memory_command")
    memory.set_defaults(handler=lambda args: (memory.print_help(), 2)[1])

    index = commands.add_parser("index", help="bring a workspace's recall index up to date")
    _workspace_arg(index)
    index.add_argument("--force", action="store_true", help="rebuild from scratch")
    index.set_defaults(handler=_cmd_index)

    search = commands.add_parser("search", help="search a workspace's memory")
    search.add_argument("query", help="what to look for")
    _workspace_arg(search)
    search.add_argument("--limit", type=int, default=DEFAULT_MAX_RESULTS,
                        help=f"number of results (default {DEFAULT_MAX_RESULTS})")
    search.add_argument("--min-score", type=float, default=0.0, help="drop results below this")
    search.add_argument("--json", action="store_true", help="print a JSON array, nothing else")
    search.add_argument("--wait", action="store_true",
                        help="compute every missing vector before searching (default: answer "
                             "at once, new text found by its words until it is embedded)")
    search.set_defaults(handler=_cmd_search)

    status = commands.add_parser("status", help="files, chunks, embedder, dirty, last sync")
    _workspace_arg(status)
    status.add_argument("--json", action="store_true", help="print a JSON object")
    status.set_defaults(handler=_cmd_status)


def _workspace_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--workspace", type=Path, required=True,
                        help="the workspace directory (with MEMORY.md, memory/, sessions/)")


def _settings() -> Settings:
    return load_settings()


def _workspace(path: Path) -> Path:
    if not path.is_dir():
        raise ConfigError(f"workspace {path} is not a directory; pass --workspace PATH")
    return path.resolve()


def _open_index(args: argparse.Namespace) -> Any:
    from memory.embedders import EmbedderError, build_embedder
    from memory.index import MemoryIndex

    settings = _settings().memory
    workspace = _workspace(args.workspace)
    try:
        embedder = build_embedder(
            settings.embedder, model=settings.model, dim=settings.dimension,
            api_key=settings.resolved_api_key(), base_url=settings.base_url,
        )
    except (EmbedderError, ImportError, OSError, RuntimeError) as exc:
        print(f"clawgate: embedder unavailable ({exc}); keyword-only", file=sys.stderr)
        embedder = None
    return MemoryIndex(
        workspace, embedder, chunk_chars=settings.chunk_chars, sessions=settings.sessions,
        half_life_days=settings.half_life_days,
    )


class _Bar:
    """A one-line progress bar on stderr, only when stderr is a terminal."""

    def __init__(self) -> None:
        self.enabled = sys.stderr.isatty()

    def __call__(self, done: int, total: int) -> None:
        if not self.enabled or not total:
            return
        width = 30
        filled = width * done // total
        sys.stderr.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} files")
        sys.stderr.flush()
        if done >= total:
            sys.stderr.write("\n")


class _VectorBar:
    """Per-batch progress of computing vectors, with the rate and an estimate, on stderr."""

    def __init__(self) -> None:
        self.enabled = sys.stderr.isatty()
        self.shown = False

    def __call__(self, progress: Any) -> None:
        if not self.enabled or not progress.total:
            return
        width = 30
        filled = width * progress.done // progress.total
        eta = progress.eta_seconds
        left = f", about {_duration(eta)} left" if eta is not None else ""
        sys.stderr.write(
            f"\r[{'#' * filled}{'.' * (width - filled)}] {progress.done}/{progress.total} "
            f"chunks embedded ({progress.per_second:.1f}/s{left})   ")
        sys.stderr.flush()
        self.shown = True

    def close(self) -> None:
        if self.shown:
            sys.stderr.write("\n")
            self.shown = False


def _duration(seconds: float) -> str:
    whole = round(seconds)
    return f"{whole // 60} min {whole % 60:02d} s" if whole >= 60 else f"{whole} s"


def _cmd_index(args: argparse.Namespace) -> int:
    index = _open_index(args)
    vectors = _VectorBar()

    async def run() -> Any:
        try:
            stats = await index.sync(force=args.force, progress=_Bar(), vector_progress=vectors)
            vectors.close()
            return stats, await index.status()
        finally:
            await index.close()

    started = time.perf_counter()
    stats, status = asyncio.run(run())
    print(
        f"indexed {status.files} files, {status.chunks} chunks ({status.mode}, "
        f"{status.embedder} {status.dimension}d) in {time.perf_counter() - started:.2f} s: "
        f"{stats.files_indexed} files (re)indexed, {stats.files_removed} removed, "
        f"{stats.chunks_added} chunks added, {stats.chunks_removed} removed, "
        f"{stats.embedded} embedded, {stats.cached} from cache"
        + (", rebuilt" if stats.rebuilt else "")
    )
    if stats.embed_error:
        print(f"warning: embedding failed ({stats.embed_error}); those chunks are "
              "keyword-only until the next index", file=sys.stderr)
    return 0


def _cmd_search(args: argparse.Namespace) -> int:
    if args.limit < 1:
        raise ConfigError("--limit must be 1 or more")
    index = _open_index(args)
    vectors = _VectorBar()

    async def run() -> Any:
        try:
            if args.wait:
                await index.sync(vector_progress=vectors)
                vectors.close()
            return await index.search(args.query, max_results=args.limit,
                                      min_score=args.min_score)
        finally:
            await index.close()

    response = asyncio.run(run())
    if response.pending:
        response.note += (f" (run `clawgate memory index` or search with --wait to embed "
                          f"the {response.pending} chunks)")
    if args.json:
        json.dump([r.as_dict() for r in response.results], sys.stdout, ensure_ascii=False)
        sys.stdout.write("\n")
        if response.note:
            print(f"note: {response.note}", file=sys.stderr)
        return 0
    print(f"mode: {response.mode}" + (f" ({response.note})" if response.note else ""))
    if not response.results:
        print(f"no memory matched {args.query!r}")
    for number, result in enumerate(response.results, start=1):
        print(f"\n{number}. {result.path}:{result.start_line}-{result.end_line} "
              f"score {result.score:.3f} [{result.source}]")
        print("   " + result.snippet.replace("\n", "\n   "))
    return 0


def _cmd_status(args: argparse.Namespace) -> int:
    index = _open_index(args)

    async def run() -> Any:
        try:
            return await index.status()
        finally:
            await index.close()

    status = asyncio.run(run())
    if args.json:
        print(json.dumps(status.__dict__, ensure_ascii=False))
        return 0
    print(f"index:      {status.path}")
    print(f"files:      {status.files}")
    print(f"chunks:     {status.chunks} ({status.vectors} with vectors)")
    print(f"embedder:   {status.embedder}" + (f" ({status.model})" if status.model else ""))
    print(f"dimension:  {status.dimension}")
    print(f"mode:       {status.mode}" + (f" - {status.note}" if status.note else ""))
    print(f"dirty:      {'yes (files changed since the last sync)' if status.dirty else 'no'}")
    print(f"last sync:  {status.last_sync or 'never'}")
    return 0
