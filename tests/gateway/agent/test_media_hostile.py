"""Hostile media at the unit level (issue 32, red-team round 3): what one file may cost the
gateway in memory, CPU and disk, and what its name may do to a reply."""

from __future__ import annotations

import asyncio
import itertools
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from gateway.agent.media.documents import DocumentError, extract, pdf_text
from gateway.agent.media.workers import ChildTimeout, MediaWorkers
from gateway.agent.tools.base import ToolContext, ToolError
from gateway.agent.tools.send_file import SendFileTool
from gateway.workspace.names import shown_name
from tests import settle
from tests.fakes.media_files import deep_page_tree_pdf, nested_forms_pdf, pdf

PDF_WORKER = "gateway.agent.media.pdf_worker"

ROOT = Path(__file__).resolve().parents[3]


def test_a_79_megapixel_png_is_prepared_with_one_full_size_copy(tmp_path):
    """The decoded picture (4 bytes a pixel) is the only full-size copy: peak memory grows by
    less than 1.5 times it. On main the whole picture was turned, converted and resized at
    full size: ~3 times it (a 79 MP PNG took ~940 MiB above idle)."""
    child = textwrap.dedent("""
        import sys
        from pathlib import Path
        from PIL import Image
        from gateway.agent.media.images import prepare_image

        def hwm():
            for line in Path("/proc/self/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024

        source = Path(sys.argv[1])
        Image.new("RGBA", (8888, 8888), (10, 200, 30, 100)).save(source, "PNG")
        Path("/proc/self/clear_refs").write_text("5")  # the peak starts again from here
        before = hwm()
        prepared = prepare_image(source, source.with_name("seen"), "anthropic", 80_000_000)
        print(hwm() - before, prepared.width, prepared.height)
    """)
    done = subprocess.run(
        [sys.executable, "-c", child, str(tmp_path / "big.png")],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    added, width, height = (int(v) for v in done.stdout.split())
    decoded = 8888 * 8888 * 4
    assert (width, height) == (1072, 1072)
    assert added < 1.5 * decoded, f"peak grew by {added / 2**20:.0f} MiB"


# --- PDFs: bounded by pages and time, killed at the deadline --------------------------------


def _ticking(step: float) -> Callable[[], float]:
    """A clock that moves `step` seconds each time it is read."""
    ticks = itertools.count()
    return lambda: next(ticks) * step


def test_a_text_less_pdf_is_read_for_at_most_its_page_and_time_budget(tmp_path):
    """300 pages of nested forms and no text: on main every page was read (minutes of a
    core) because only the characters found counted."""
    hostile = tmp_path / "forms.pdf"
    hostile.write_bytes(nested_forms_pdf(300, depth=2, strokes=1))
    with pytest.raises(DocumentError, match="no text in the first 3 of its 300 pages"):
        pdf_text(hostile, 40_000, max_pages=3, seconds=600)
    # The clock is read at the start and before each page: 10 s a read, 25 s allowed.
    with pytest.raises(DocumentError, match="no text in the first 2 of its 300 pages"):
        pdf_text(hostile, 40_000, max_pages=1000, seconds=25, clock=_ticking(10))


def test_a_pdf_whose_time_ran_out_keeps_the_pages_it_read(tmp_path):
    document = tmp_path / "long.pdf"
    document.write_bytes(pdf([f"Page {n} says something." for n in range(1, 41)]))
    extracted = pdf_text(document, 40_000, max_pages=1000, seconds=25, clock=_ticking(10))
    assert (extracted.pages, extracted.pages_read, extracted.stopped) == (40, 2, "time")
    assert "Page 2 says" in extracted.text and "Page 3" not in extracted.text
    assert extracted.cut


def test_a_3000_deep_page_tree_is_an_unreadable_pdf(tmp_path):
    """pypdf's LimitReachedError is no PdfReadError: on main it escaped as "something went
    wrong on my side" and a traceback."""
    deep = tmp_path / "deep.pdf"
    deep.write_bytes(deep_page_tree_pdf(3000))
    with pytest.raises(DocumentError, match="damaged or not really a PDF"):
        extract(deep, "pdf", 1000)


def _alive(pid: int) -> bool:
    """Whether `pid` is a process that still runs (a zombie has ended its work)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


async def _first_child(workers: MediaWorkers) -> int:
    await settle.until(lambda: bool(workers.children), what="the PDF child started")
    return next(iter(workers.children))


async def test_a_pdf_page_that_never_ends_is_killed_at_the_deadline(tmp_path):
    """One page with thousands of strokes in every nested form takes pypdf minutes: checks
    between pages cannot stop it, the kill does, and nothing of it runs afterwards."""
    endless = tmp_path / "one-page.pdf"
    endless.write_bytes(nested_forms_pdf(1, strokes=5000))
    workers = MediaWorkers(2)
    job = {"path": str(endless), "max_chars": 1000, "max_pages": 10, "seconds": 600}
    running = asyncio.create_task(workers.child(PDF_WORKER, job, seconds=1.0))
    pid = await _first_child(workers)
    with pytest.raises(ChildTimeout):
        await running
    assert not _alive(pid) and workers.children == {}
    # Cancelled from outside (the turn's deadline, a stop): the child goes too.
    cancelled = asyncio.create_task(workers.child(PDF_WORKER, job, seconds=600))
    pid = await _first_child(workers)
    cancelled.cancel()
    with pytest.raises(asyncio.CancelledError):
        await cancelled
    assert not _alive(pid) and workers.children == {}
    workers.close()


async def test_the_pdf_child_gets_no_secret_from_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-canary-123")
    document = tmp_path / "a.pdf"
    document.write_bytes(pdf(["hello"]))
    workers = MediaWorkers(1)
    job = {"path": str(document), "max_chars": 1000, "max_pages": 10, "seconds": 30}
    answer = await workers.child(PDF_WORKER, job, seconds=60)
    assert answer["text"] == "hello"
    env = await workers.child("tests.fakes.print_env", {}, seconds=60)
    assert "ANTHROPIC_API_KEY" not in env["environ"]
    workers.close()


# --- 9e. names quoted back --------------------------------------------------------------------


def test_shown_name_keeps_a_name_on_one_readable_line():
    assert shown_name("budget 2026.pdf") == "budget 2026.pdf"
    assert shown_name("in\u202evoice\x1b[31m\n\tred.pdf") == "in\ufffdvoice\ufffd[31m red.pdf"
    assert shown_name("a\u2028b\u2066c") == "a b\ufffdc"  # a line separator is a space
    family = "\U0001f468\u200d\U0001f469 notes.md"  # a joiner inside an emoji stays
    assert shown_name(family) == family
    assert len(shown_name("x" * 500)) == 80 and shown_name("x" * 500).endswith("...")
    assert shown_name(" \n ") == ""


class _NoFiles:
    """A chat that takes no files (the terminal's outbox, as FileOutbox declares it)."""

    channel = "terminal"
    max_bytes = 0

    async def send_file(self, path: Path, caption: str) -> str:
        raise AssertionError("never called")


async def test_send_file_answers_quote_the_path_through_the_sanitizer(tmp_path):
    """On main the path the model gave went raw into this answer (the one quoted before the
    path is checked), bidi override and terminal escape included."""
    ctx = ToolContext(tmp_path, "s", private=True, outbox=_NoFiles())
    with pytest.raises(ToolError) as refused:
        await SendFileTool().run({"path": "notes\u202e\x1b[2J.md", "caption": ""}, ctx)
    assert "notes\ufffd\ufffd[2J.md" in str(refused.value)
    assert not any(ch in str(refused.value) for ch in "\u202e\x1b")
