"""From a message's attachments to what the model reads: the user message of a turn.

Runs inside the turn (its session's lane), never in a channel's receive loop. For each
attachment, in order:

1. Decide from what the platform declared whether it can be used at all (a video, an
   unknown file type, a file over `max_download_mb`: a clear line, nothing downloaded).
2. Fetch it through its channel into the context's inbox folder, `inbox/YYYY-MM-DD/` of the
   area the context may write (`memory.layout.inbox_dir`: a group's files land in the group's
   own area, never among the owner's files), streamed to a hidden part file and renamed.
3. Turn it into content: a voice note into its transcript, marked as heard with its length;
   a photo into a resized copy the model sees (or a clear line when the model takes no
   images); a document into its text, cut at `document_max_chars` with the cut said, the
   whole text saved beside it (`<file>.md`, which the recall index reads in private
   contexts) for `read_file` to continue.

Whatever fails becomes a line for the model and a sentence for the person; when a message
carries nothing usable (no caption, every attachment failed), the turn answers with those
sentences directly, without a model call, so "no transcription backend" reaches the person
with the exact setting to change.

Nothing a sender declares is trusted: a file is streamed to disk under the room its chat's
disk quota has left (declared size or not), a recording's length is measured from its decoded
audio before it is transcribed, and a sender's file name is quoted back only through
`shown_name`. Media work runs on `MediaWorkers` (threads and killable child processes of its
own), never on the executor the rest of the gateway waits on.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import gateway.workspace.paths as paths
from channels.base import Attachment, Channel, DownloadError, InboundMessage
from channels.files import FileTooLarge
from gateway.agent.conversation import ImagePart
from gateway.agent.media.audio import (
    Transcriber,
    TranscriptionFailed,
    TranscriptionUnavailable,
    decoded_seconds,
)
from gateway.agent.media.documents import DocumentError, Extracted, extract, readable_kind
from gateway.agent.media.images import ImageError, prepare_image, takes_images
from gateway.agent.media.workers import ChildFailed, ChildTimeout, MediaWorkers
from gateway.agent.tools.base import ToolError
from gateway.agent.tools.quota import Room, TurnBudget
from gateway.config.media import MediaSettings
from gateway.workspace.names import shown_name
from memory.atomic import atomic_write_text, make_private_dirs
from memory.layout import INBOX_DIR, SEEN_DIR, Access, inbox_dir

log = logging.getLogger(__name__)

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
# Each file in the inbox names what it is, so that the folder reads well by hand too.
_DEFAULT_NAMES = {
    "audio": "voice.ogg",
    "image": "image.jpg",
    "document": "document",
    "video": "video.mp4",
    "other": "file",
}
NO_ROOM = "there is no room left to keep it (this chat's storage quota is used up)"
# A saved document text shorter than this is not worth keeping (the quota is all but full).
_MIN_TEXT_BYTES = 1024


@dataclass(slots=True)
class UserContent:
    """The turn's user message: `text` before group attribution, the images the model sees,
    what was received (kept in the transcript entry as `media`, shown by the panel), and a
    direct reply when nothing usable remains."""

    text: str
    images: tuple[ImagePart, ...] = ()
    media: list[dict[str, Any]] = field(default_factory=list)
    reply: str = ""


@dataclass(slots=True)
class _Outcome:
    """One attachment: a block of text for the model, or a problem said to the person."""

    block: str = ""
    problem: str = ""
    image: ImagePart | None = None
    record: dict[str, Any] = field(default_factory=dict)


class MediaIntake:
    def __init__(
        self,
        settings: MediaSettings,
        transcriber: Transcriber,
        *,
        provider: str,
        model: str,
        now: Callable[[], datetime],
        max_text_bytes: int,
        deadline_seconds: float = 600.0,
        budget: Callable[[], TurnBudget] | None = None,
        workers: MediaWorkers | None = None,
    ) -> None:
        self.settings = settings
        self.transcriber = transcriber
        self.provider = provider
        self.model = model
        self.vision = takes_images(settings.vision, provider, model)
        self._now = now  # in the person's zone: the inbox folder is their day
        self.max_text_bytes = max_text_bytes
        self.deadline_seconds = deadline_seconds
        # The disk quotas of the file tools ([tools] workspace/group area): received files
        # count against them too, so a group cannot fill the disk by sending files.
        self._budget = budget
        self.workers = workers or MediaWorkers(settings.workers)

    async def close(self) -> None:
        await self.transcriber.close()
        self.workers.close()

    async def take(
        self, msg: InboundMessage, channel: Channel, workspace: Path, access: Access
    ) -> UserContent:
        """The content of `msg` (its attachments first, then its text)."""
        workspace = Path(os.path.realpath(workspace))  # paths below are compared to it
        budget = self._budget() if self._budget is not None else None
        blocks: list[str] = []
        problems: list[str] = []
        images: list[ImagePart] = []
        media: list[dict[str, Any]] = []
        for attachment in msg.attachments:
            started = time.perf_counter()
            try:
                async with asyncio.timeout(self.deadline_seconds):
                    outcome = await self._one(attachment, channel, workspace, access, budget)
            except TimeoutError:
                outcome = _problem(attachment, "it took too long to process")
            except Exception:  # a bug of ours: the message must still be answered
                log.exception("could not take a %s attachment", attachment.kind)
                outcome = _problem(attachment, "something went wrong on my side")
            outcome.record.setdefault("kind", attachment.kind)
            outcome.record.setdefault("label", _label(attachment))
            outcome.record["ms"] = round((time.perf_counter() - started) * 1000)
            media.append(outcome.record)
            if outcome.block:
                blocks.append(outcome.block)
            if outcome.problem:
                problems.append(outcome.problem)
            if outcome.image is not None:
                images.append(outcome.image)
        caption = msg.text.strip()
        text = "\n\n".join([*blocks, *([caption] if caption else [])])
        reply = ""
        if not caption and not images and not any(r.get("usable") for r in media):
            reply = " ".join(problems) or "I got an empty message."
        return UserContent(text, tuple(images), media, reply)

    # -- one attachment ------------------------------------------------------------------------

    async def _one(
        self,
        attachment: Attachment,
        channel: Channel,
        workspace: Path,
        access: Access,
        budget: TurnBudget | None,
    ) -> _Outcome:
        label = _label(attachment)
        if attachment.kind in ("video", "other"):
            return _problem(
                attachment,
                f"I can't open {_a(label)} yet, only voice messages, photos and documents",
            )
        doc_kind = ""
        if attachment.kind == "document":
            doc_kind = readable_kind(attachment.filename, attachment.mime) or ""
            if not doc_kind:
                return _problem(
                    attachment,
                    f"I can't read this kind of file "
                    f"({_shown_name(attachment)}); I read PDFs and "
                    "text files (Markdown, CSV, JSON, code ...)",
                )
        folder_rel = inbox_dir(access, self._now().date())
        if folder_rel is None:
            return _problem(attachment, "this chat has no place to keep files")
        try:
            folder = await self.workers.thread(_make_inbox, workspace, folder_rel, access)
        except ToolError as exc:
            log.warning("no inbox for this context: %s", exc)
            return _problem(attachment, "this chat has no place to keep files")
        most = self.settings.max_download_bytes
        room = None
        if budget is not None:
            # The declared size is the sender's word (often absent): the download itself is
            # capped at the room left, and an area already over its quota takes nothing.
            room = await self.workers.thread(budget.disk_room, workspace, access.area, wanted=most)
            declared = attachment.size if attachment.size <= most else 0
            if room.bytes <= 0 or declared > room.bytes:
                budget.no_room(room)
                log.warning("attachment refused: %s quota, %d bytes left", room.kind, room.bytes)
                return _problem(attachment, NO_ROOM)
        saved = await self._download(attachment, channel, folder, budget, room)
        if isinstance(saved, _Outcome):
            return saved
        path, written = saved
        rel = path.relative_to(workspace).as_posix()
        if budget is not None:
            budget.wrote(workspace, access.area, authored=0, growth=written)
        if attachment.kind == "audio":
            outcome = await self._hear(attachment, path)
        elif attachment.kind == "image":
            outcome = await self._see(attachment, path, workspace)
        else:
            outcome = await self._read(attachment, path, workspace, doc_kind, budget, access.area)
        outcome.record["file"] = rel
        if budget is not None:  # what was made from it: the resized copy, the text
            made = {outcome.record.get("seen"), outcome.record.get("text_file")} - {rel}
            growth = await self.workers.thread(_sizes, workspace, made)
            budget.wrote(workspace, access.area, authored=0, growth=growth)
        return outcome

    async def _download(
        self,
        attachment: Attachment,
        channel: Channel,
        folder: Path,
        budget: TurnBudget | None,
        room: Room | None,
    ) -> tuple[Path, int] | _Outcome:
        """The file saved in `folder` and the bytes written, at most the room left."""
        stamp = self._now().strftime("%H%M%S")
        name = _safe_name(attachment.filename or _DEFAULT_NAMES[attachment.kind])
        part = folder / f".part-{secrets.token_hex(6)}"
        limit = self.settings.max_download_bytes
        if room is not None:
            limit = min(limit, room.bytes)
        try:
            written = await channel.download(attachment, part, limit)
        except FileTooLarge as exc:
            if budget is not None and room is not None and exc.limit == room.bytes:
                budget.no_room(room)
                return _problem(attachment, NO_ROOM)
            return _problem(attachment, f"I couldn't fetch it: {exc}")
        except DownloadError as exc:
            return _problem(attachment, f"I couldn't fetch it: {exc}")
        except OSError as exc:
            part.unlink(missing_ok=True)
            log.error("could not save an attachment: %s", exc)
            return _problem(attachment, "I couldn't save it (a storage problem on my side)")
        target = _unique(folder, f"{stamp}-{name}")
        os.replace(part, target)
        return target, written

    async def _hear(self, attachment: Attachment, path: Path) -> _Outcome:
        label = _label(attachment)
        limit = self.settings.transcription.max_seconds
        if attachment.duration > limit:  # said to be too long: no need to look
            return _problem(
                attachment,
                f"it is {_clock(attachment.duration)} long and I "
                f"transcribe at most {_clock(limit)}",
                {"duration": round(attachment.duration, 1)},
            )
        # The declared length is the sender's word: measured, decoding no further than the limit.
        measured = await self.workers.thread(decoded_seconds, path, limit)
        if measured is None:
            return _problem(
                attachment, "I couldn't transcribe it: the recording could not be decoded"
            )
        seconds = measured
        record: dict[str, Any] = {"duration": round(seconds, 1)}
        if seconds > limit:
            return _problem(
                attachment, f"it is longer than the {_clock(limit)} I transcribe at most", record
            )
        try:
            heard = await self.transcriber.transcribe(path)
        except TranscriptionUnavailable as exc:
            return _problem(attachment, f"I can't listen to it: {exc}", record)
        except TranscriptionFailed as exc:
            return _problem(attachment, f"I couldn't transcribe it: {exc}", record)
        seconds = seconds or heard.duration
        record.update(
            duration=round(seconds, 1),
            transcript=heard.text,
            usable=True,
            backend=self.transcriber.name,
            backend_ms=round(heard.seconds * 1000),
        )
        said = heard.text or "(no speech could be made out)"
        length = f", {_clock(seconds)}" if seconds else ""
        return _Outcome(f"[{label}{length}, heard and transcribed]\n{said}", record=record)

    async def _see(self, attachment: Attachment, path: Path, workspace: Path) -> _Outcome:
        label = _label(attachment)
        rel = path.relative_to(workspace).as_posix()
        if not self.vision:
            return _Outcome(
                f"[{label} saved as {rel}: not shown, because the model I run on "
                f"({self.model}) does not take images]",
                problem=(
                    f"I saved your {label}, but the model I run on ({self.model}) can't "
                    "see images; describe it in words, or my owner can switch to a model "
                    "that can (`CLAWGATE_MEDIA__VISION=on` if this one does)."
                ),
                record={"usable": False},
            )
        seen = path.parent / SEEN_DIR / path.stem
        max_pixels = int(self.settings.max_image_megapixels * 1_000_000)
        try:
            await self.workers.thread(make_private_dirs, seen.parent)
            prepared = await self.workers.thread(
                prepare_image, path, seen, self.provider, max_pixels
            )
        except ImageError as exc:
            return _problem(attachment, f"I couldn't look at it: {exc}")
        os.chmod(prepared.path, 0o600)
        seen_rel = prepared.path.relative_to(workspace).as_posix()
        image = ImagePart(seen_rel, prepared.media_type, prepared.width, prepared.height)
        size = f"{prepared.original_width}x{prepared.original_height}"
        return _Outcome(
            f"[{label} {rel}, {size}, shown to you at {prepared.width}x{prepared.height}]",
            image=image,
            record={
                "seen": seen_rel,
                "usable": True,
                "width": prepared.original_width,
                "height": prepared.original_height,
            },
        )

    async def _read(
        self,
        attachment: Attachment,
        path: Path,
        workspace: Path,
        kind: str,
        budget: TurnBudget | None,
        area: str,
    ) -> _Outcome:
        label = _label(attachment)
        rel = path.relative_to(workspace).as_posix()
        keep_chars = max(self.settings.document_max_chars, self.max_text_bytes)
        try:
            extracted = await self._extract(path, kind, keep_chars)
        except DocumentError as exc:
            return _problem(attachment, f"I couldn't read it: {exc}")
        inline_chars = self.settings.document_max_chars
        shown = extracted.text[:inline_chars]
        full_rel: str | None = rel
        if path.suffix.lower() not in (".md", ".markdown"):
            keep_bytes = self.max_text_bytes
            if budget is not None:  # the text kept beside it counts against the quota too
                room = await self.workers.thread(
                    budget.disk_room, workspace, area, wanted=keep_bytes
                )
                keep_bytes = min(keep_bytes, room.bytes)
            full_rel = rel + ".md" if keep_bytes >= _MIN_TEXT_BYTES else None
            if full_rel is not None:
                await self.workers.thread(
                    _save_text, workspace / full_rel, extracted.text, extracted.cut, keep_bytes
                )
        pages = (
            f", {extracted.pages} page{'s' if extracted.pages != 1 else ''}"
            if extracted.kind == "pdf"
            else ""
        )
        if extracted.stopped:
            pages += f", the first {extracted.pages_read} read"
        head = f"[{label} {_shown_name(attachment)}{pages}, saved as {rel}; its text:]"
        if full_rel is None:
            tail = (
                ("\n[its whole text was not kept beside it: this chat's storage quota is used up]")
                if len(shown) < extracted.total_chars
                else ""
            )
        elif len(shown) < extracted.total_chars or extracted.cut:
            tail = (
                f"\n[shown: the first {len(shown):,} of about {extracted.total_chars:,} "
                f"characters; {full_rel} holds "
                f"{'the text I kept' if extracted.cut else 'all of it'}, read_file "
                "continues from any line]"
            )
        else:
            tail = ""
        record = {
            "usable": True,
            "chars": extracted.total_chars,
            **({"text_file": full_rel} if full_rel else {}),
            **({"pages": extracted.pages} if extracted.pages else {}),
        }
        return _Outcome(f"{head}\n{shown}{tail}", record=record)

    async def _extract(self, path: Path, kind: str, max_chars: int) -> Extracted:
        """A text file on a media thread; a PDF in a child process, killed at
        `document_timeout_seconds` (a page of pypdf work has no bound of its own). The child
        stops taking new pages at four fifths of that, so a slow PDF still yields the pages
        read by then. Raises DocumentError."""
        if kind != "pdf":
            return await self.workers.thread(extract, path, kind, max_chars)
        seconds = self.settings.document_timeout_seconds
        job = {
            "path": str(path),
            "max_chars": max_chars,
            "max_pages": self.settings.document_max_pages,
            "seconds": seconds * 0.8,
        }
        try:
            answer = await self.workers.child("gateway.agent.media.pdf_worker", job, seconds)
        except ChildTimeout:
            raise DocumentError(
                f"reading it took longer than the {seconds:g} s I give one "
                "document (it may be damaged, or built to be slow)"
            ) from None
        except ChildFailed:
            raise DocumentError("the PDF is damaged or not really a PDF") from None
        if "error" in answer:
            raise DocumentError(str(answer["error"]))
        try:
            return Extracted(**answer)
        except TypeError:
            raise DocumentError("the PDF is damaged or not really a PDF") from None


# --- helpers ----------------------------------------------------------------------------------


def _problem(attachment: Attachment, why: str, record: dict[str, Any] | None = None) -> _Outcome:
    label = _label(attachment)
    return _Outcome(
        block=f"[{label} {_shown_name(attachment)}: not usable, {why}]",
        problem=f"About your {label}: {why}.",
        record={**(record or {}), "usable": False, "error": why},
    )


def _label(attachment: Attachment) -> str:
    return attachment.label or {
        "audio": "audio file",
        "image": "image",
        "document": "document",
        "video": "video",
    }.get(attachment.kind, "file")


def _a(label: str) -> str:
    return ("an " if label[:1].lower() in "aeiou" else "a ") + label


def _shown_name(attachment: Attachment) -> str:
    """The file name as the person named it, made safe to quote on one line."""
    return shown_name(attachment.filename or "") or _label(attachment)


def _safe_name(name: str) -> str:
    """A file name that is safe on every filesystem and never hidden or a path."""
    base = _UNSAFE.sub("_", Path(name.replace("\\", "/")).name).strip("._") or "file"
    stem, dot, suffix = base.rpartition(".")
    if dot and len(suffix) <= 12:
        return f"{stem[:80]}.{suffix}" if stem else f"file.{suffix}"
    return base[:80]


def _unique(folder: Path, name: str) -> Path:
    target = folder / name
    stem, suffix = os.path.splitext(name)
    number = 2
    while target.exists() or (folder / (target.name + ".md")).exists():
        target = folder / f"{stem}-{number}{suffix}"
        number += 1
    return target


def _make_inbox(workspace: Path, folder_rel: str, access: Access) -> Path:
    """The day's folder, checked like any write of this context (inside the workspace, in
    the context's own area, no link leading elsewhere). The inbox root gets a `.gitignore`
    so received files stay out of the workspace's history (a group's inbox too)."""
    folder = paths.resolve_in_workspace(
        workspace, folder_rel, private=access.private, write=True, area=access.area
    )
    make_private_dirs(folder)
    root = folder.parent
    if root.name == INBOX_DIR:
        ignore = root / ".gitignore"
        if not ignore.exists():
            atomic_write_text(ignore, "# received files: not versioned\n*\n")
    return folder


def _sizes(workspace: Path, rels: set[Any]) -> int:
    total = 0
    for rel in rels:
        if isinstance(rel, str):
            with contextlib.suppress(OSError):
                total += (workspace / rel).stat().st_size
    return total


def _save_text(path: Path, text: str, cut: bool, max_bytes: int) -> None:
    """The document's text as a file read_file can open (within the file tools' size)."""
    note = "\n\n[cut here: the document has more text than I keep]"
    data = text.encode("utf-8")
    if len(data) + len(note) > max_bytes:
        data, cut = data[: max_bytes - len(note) - 4], True
    atomic_write_text(path, data.decode("utf-8", errors="ignore") + (note if cut else ""))


def _clock(seconds: float) -> str:
    total = round(seconds)
    return f"{total // 60}:{total % 60:02d}"
