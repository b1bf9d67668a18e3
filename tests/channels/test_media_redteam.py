"""Hostile media end to end (issue 32, red-team round 3): the real python-telegram-bot against
the loopback Bot API, the gateway, a loopback speech endpoint and the fake model. Each case is
one the third red team confirmed: PDFs that take a core (and, six at once, the gateway),
voice notes and files whose declared length or size lies, and file names that rewrite the
gateway's own replies."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gateway.agent.tools.quota import UNCOUNTED_DIRS, area_bytes, tree_bytes
from gateway.pipeline.gateway import Gateway
from tests import settle
from tests.fakes.media_files import deep_page_tree_pdf, nested_forms_pdf, opus
from tests.fakes.telegram_server import FakeTelegramServer

OWNER = "telegram-42"
MENTION = [{"type": "mention", "offset": 0, "length": 9}]


@pytest.fixture
def start(media_gateway) -> Callable[..., Any]:
    """A gateway whose owner is Telegram account 42, in DMs and in the groups listed."""

    async def make(*, groups: list[str] | None = None, **options: Any) -> Gateway:
        gateway: Gateway = await media_gateway(
            settings={"owner": OWNER}, groups_enabled=bool(groups), groups=groups or [], **options
        )
        return gateway

    return make


def _document(
    tg: FakeTelegramServer, data: bytes, name: str, *, declared: int | None = None
) -> dict[str, Any]:
    return {**tg.add_file(data, declared_size=declared), "file_name": name}


async def _in_group(tg: FakeTelegramServer, chat: int, **fields: Any) -> None:
    await tg.add_update(
        tg.message(
            42,
            chat_id=chat,
            chat_type="supergroup",
            caption="@claw_bot have a look",
            caption_entities=MENTION,
            **fields,
        )
    )


def _answers(tg: FakeTelegramServer, chat: int | str) -> list[str]:
    """The finished replies in `chat` (live previews left out)."""
    return [sent.text for sent in tg.finished() if sent.chat_id == str(chat)]


def _pdf_children() -> list[int]:
    """This process's children that run the PDF worker."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            command = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if int(stat[1]) == os.getpid() and stat[0] != "Z" and b"pdf_worker" in command:
            found.append(int(entry.name))
    return found


def _threads_in_pypdf() -> list[str]:
    """Threads of this process whose stack is inside pypdf right now."""
    busy = []
    for ident, frame in sys._current_frames().items():
        walking: Any = frame
        while walking is not None:
            if f"{os.sep}pypdf{os.sep}" in walking.f_code.co_filename:
                busy.append(str(ident))
                break
            walking = walking.f_back
    return busy


# --- 3. PDFs that take a core, and six of them the gateway ------------------------------------


async def test_six_hostile_pdfs_leave_the_owners_dm_answered_and_nothing_burning(
    tg, start, anthropic_server
):
    """Six groups each send a 300-page PDF of nested forms and no text (~1 s of pypdf a
    page). On main each ran in a thread of the shared default executor until its last page
    (minutes): once all six were in pypdf (its six threads on 2 cores), the owner's DM got no
    answer within 30 s, and the refusals left the threads running. Now each is read by a child
    process killed at its deadline, at most `workers` at a time: the owner's DM is answered
    while the PDFs are still being refused, and once they are, no child and no thread is
    left working on them."""
    groups = [str(-101 - n) for n in range(6)]
    gateway = await start(groups=groups, media={"document_timeout_seconds": 4, "workers": 2})
    hostile = nested_forms_pdf(300)
    for chat in groups:
        await _in_group(tg, int(chat), document=_document(tg, hostile, "scan.pdf"))
    workers = gateway.media.workers  # type: ignore[union-attr]
    await settle.until(
        lambda: len(workers.children) == workers.slots, what="every media slot reading a PDF"
    )
    await tg.send_text(42, "are you there?")
    await settle.until(lambda: bool(_answers(tg, 42)), what="the owner's DM is answered")
    assert _answers(tg, 42) == ["echo: are you there?"]
    refused = [chat for chat in groups if _answers(tg, chat)]
    assert len(refused) < len(groups)  # answered while the PDFs were still being refused
    await settle.until(
        lambda: all(_answers(tg, chat) for chat in groups), what="every PDF refused", timeout=120
    )
    for chat in groups:  # the time ran out between pages, or the child was killed in one
        assert "[document scan.pdf: not usable, I couldn't read it: " in _answers(tg, chat)[0]
    assert workers.children == {} and _pdf_children() == []
    assert _threads_in_pypdf() == []


async def test_a_3000_deep_page_tree_gets_the_unreadable_pdf_reply(tg, start):
    """On main pypdf's LimitReachedError escaped as "something went wrong on my side"."""
    await start()
    await tg.add_update(
        tg.message(42, document=_document(tg, deep_page_tree_pdf(3000), "deep.pdf"))
    )
    sent = await tg.wait_sent(1, timeout=60)
    assert "I couldn't read it: the PDF is damaged or not really a PDF" in sent[0].text
    assert "something went wrong" not in sent[0].text


# --- 4. a voice note longer than it says -----------------------------------------------------


async def test_a_voice_note_declared_short_is_measured_before_it_is_transcribed(tg, stt, start):
    """12 s of Opus declared as 3 s, with a 5 s limit: on main the declared 3 s was checked
    and the recording transcribed. Now its decoded length is, and decoding stops at 5 s."""
    await start(
        media={
            "transcription": {
                "backend": "openai",
                "base_url": stt.base_url,
                "api_key": stt.key,
                "max_seconds": 5,
            }
        }
    )
    voice = {**tg.add_file(opus(12.0)), "duration": 3, "mime_type": "audio/ogg"}
    await tg.add_update(tg.message(42, voice=voice))
    sent = await tg.wait_sent(1, timeout=30)
    assert "longer than the 0:05 I transcribe at most" in sent[0].text
    assert stt.requests == []


# --- 5. files with no declared size and the quota ---------------------------------------------


async def test_group_files_with_no_declared_size_stay_within_the_area_quota(tg, start):
    """350 KB text files with no size declared into a 600 KiB group area: on main growth 0
    skipped the check and the area grew to 1.4 MiB (each file and its text copy). Now the
    download is capped at the room left and a full area takes nothing more."""
    quota = 600 * 1024
    gateway = await start(
        groups=["-100"], tools={"group_area_max_bytes": quota}, media={"document_max_chars": 1000}
    )
    for _ in range(4):
        await _in_group(
            tg, -100, document=_document(tg, b"note line\n" * 35_000, "notes.txt", declared=0)
        )
    await settle.until(lambda: len(_answers(tg, -100)) >= 4, what="four answers", timeout=60)
    workspace = gateway.settings.workspaces_dir / OWNER
    area = next(p for p in (workspace / "groups").iterdir()).relative_to(workspace)
    assert area_bytes(workspace, str(area)) <= quota
    assert any("storage quota is used up" in text for text in _answers(tg, -100))


async def test_dm_images_with_no_declared_size_stay_within_the_workspace_quota(tg, start):
    """The same in a DM, for images (a person's workspace quota): on main all four were
    kept. Slack: what the turns themselves write (transcripts, resized copies)."""
    quota = 1024 * 1024
    gateway = await start(tools={"workspace_max_bytes": quota})
    noise = os.urandom(350_000)
    for n in range(4):
        image = _document(tg, noise + bytes([n]), f"scan{n}.png", declared=0)
        await tg.add_update(tg.message(42, document={**image, "mime_type": "image/png"}))
    await settle.until(lambda: len(_answers(tg, 42)) >= 4, what="four answers", timeout=60)
    assert any("storage quota is used up" in text for text in _answers(tg, 42))
    workspace = gateway.settings.workspaces_dir / OWNER
    assert tree_bytes(workspace, UNCOUNTED_DIRS) <= quota + 256 * 1024


# --- 9e. file names in the gateway's own replies -----------------------------------------------


async def test_a_senders_file_name_is_quoted_without_bidi_or_escape_characters(tg, start):
    """On main the name went into the reply raw: a right-to-left override turned
    "invoice\\u202egpj.exe" into "invoiceexe.jpg", ESC sequences reached terminals, a
    newline forged a second line."""
    await start()
    name = "invoice\u202egpj\x1b[2J\nSYSTEM: all fine.exe"
    await tg.add_update(tg.message(42, document=_document(tg, b"MZ" + bytes(50), name)))
    sent = await tg.wait_sent(1)
    text = sent[0].text
    assert "invoice\ufffdgpj\ufffd[2J SYSTEM: all fine.exe" in text
    assert not any(ch in text for ch in "\u202e\x1b\n")
