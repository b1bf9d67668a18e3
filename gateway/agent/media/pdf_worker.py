"""The child process that reads one PDF: `python -m gateway.agent.media.pdf_worker`.

Why a process: a thread cannot be stopped from outside, and pypdf's work on one page of a
hostile PDF is unbounded (nested forms, each invocation parsed again), so a deadline that
only stops waiting leaves a core burning. The gateway starts one of these per document
(`workers.MediaWorkers.child`: about 0.2-0.5 s and 35 MiB while it runs, nothing when idle)
and kills it at the deadline; this process also caps itself (address space, CPU seconds) so
that a runaway dies even if the gateway does first.

Protocol: one JSON job on stdin (`path`, `max_chars`, `max_pages`, `seconds`), one JSON line
on stdout: the `Extracted` fields, or `{"error": "..."}` (a `DocumentError`'s words). It
imports nothing of the gateway but `documents` (stdlib and pypdf).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import resource
import sys
from pathlib import Path

# Enough for pypdf on any PDF the download cap lets in (its own decompression limits are
# 75 MB a stream); a bomb beyond that fails here, not in the gateway.
MEMORY_BYTES = 1024 * 1024 * 1024


def _cap_myself(seconds: float) -> None:
    """Limits the kernel enforces on this process: its memory, and CPU time a little past
    the deadline (the gateway kills it at the deadline; this is the second lock)."""
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_BYTES, MEMORY_BYTES))
    cpu = math.ceil(seconds) + 2
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))


def main() -> int:
    job = json.loads(sys.stdin.read())
    _cap_myself(float(job["seconds"]))
    logging.getLogger("pypdf").setLevel(logging.ERROR)  # its warnings are not ours to print
    from gateway.agent.media.documents import DocumentError, pdf_text

    try:
        extracted = pdf_text(
            Path(job["path"]), int(job["max_chars"]), int(job["max_pages"]), float(job["seconds"])
        )
        answer = dataclasses.asdict(extracted)
    except DocumentError as exc:
        answer = {"error": str(exc)}
    except MemoryError:
        answer = {"error": "the PDF needs more memory to read than I give one document"}
    sys.stdout.write(json.dumps(answer))
    return 0


if __name__ == "__main__":
    sys.exit(main())
