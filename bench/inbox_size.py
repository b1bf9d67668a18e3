"""State database size after a flood of strangers' messages (inbox retention).

What the gateway does for each message from a stranger: record it durably in the inbox
(`record_inbound`), refuse it (access), mark it `denied` (`mark_done`). Before retention, every
body stayed in state.db forever; now a done row keeps only its key and chat type, and old keys
are pruned. Prints the database size before and after the flood.

    python bench/inbox_size.py [--messages 3000] [--chars 4000] [--repo PATH]

`--repo` runs the same flood against another checkout (e.g. /work/main) for a before/after.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path


def _size(db: Path) -> int:
    return sum(p.stat().st_size for p in db.parent.glob(db.name + "*"))


def _files(db: Path) -> str:
    return ", ".join(
        f"{p.name} {p.stat().st_size / 1e6:.2f} MB" for p in sorted(db.parent.glob(db.name + "*"))
    )


async def run(messages: int, chars: int) -> None:
    from channels.base import InboundMessage
    from gateway.stores.state import StateDB

    rng = random.Random(12)
    words = ["hello", "привет", "bonjour", "こんにちは", "spam", "offer", "click", "here", "now"]
    with tempfile.TemporaryDirectory() as tmp:
        state = StateDB.for_root(Path(tmp))
        await state.open()
        await state.close()
        empty = _size(state.path)
        await state.open()
        started = time.perf_counter()
        for i in range(messages):
            text = " ".join(rng.choice(words) for _ in range(chars // 6))[:chars]
            msg = InboundMessage(
                "telegram",
                f"s{i}",
                f"s{i}",
                text,
                message_id=str(i),
                sender_name=f"Stranger {i}",
                received_at=datetime.now(UTC),
            )
            await state.inbox.record_inbound(msg)
            await state.inbox.mark_done(msg, "denied")
        elapsed = time.perf_counter() - started
        await state.close()  # checkpoints the WAL into the database file
        print(
            f"state.db: {empty / 1e6:.2f} MB empty, {_size(state.path) / 1e6:.2f} MB after "
            f"{messages} stranger messages of {chars} chars "
            f"({messages / elapsed:.0f} messages/s recorded and refused)\n  {_files(state.path)}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=3000)
    parser.add_argument("--chars", type=int, default=4000)
    parser.add_argument("--repo", type=Path, default=Path(__file__).resolve().parents[1])
    args = parser.parse_args()
    sys.path.insert(0, str(args.repo.resolve()))
    print(f"repo: {args.repo.resolve()}")
    asyncio.run(run(args.messages, args.chars))


if __name__ == "__main__":
    main()
