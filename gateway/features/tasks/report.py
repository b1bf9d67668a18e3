"""A task's one report: to the chat it came from, through the outbox, and into that chat's
session.

Exactly once: the report is an outbox row keyed `task:<id>`, and the task's final state with
`reported = 1` is written in the same transaction (`Delivery.deliver(together=...)`): a kill
before it leaves the task unfinished (the next start finishes and reports it), a kill after it
leaves the row for the outbox to send (`Delivery.resume`), and a second report of the same task
finds the key used and adds nothing. When the chat's channel is not running (a platform
switched off since), the final state is written with `reported = 0`, and the next start that
runs the channel reports it (`catch_up`).

A long result (over `[tasks] result_max_chars`) is written to `tasks/task-<n>-result.md` in
the person's workspace and sent as that file, with a short summary as its caption.

Then the report goes into the chat's session, through the chat's lane (after a turn running
there, never in the middle of one), so the next turn knows it; `noted` marks it done, and a
start finding a report not noted yet adds it unless the transcript already has it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from pathlib import Path
from typing import TYPE_CHECKING

from gateway.agent.conversation import Message
from gateway.agent.sessions import transcript_path
from gateway.agent.transcript import Transcript, untrusted_field
from gateway.pipeline.task_words import STATE_WORDS, shorten
from gateway.stores.tasks import Task, TaskStore
from memory.atomic import atomic_write_text, make_private_dirs
from memory.layout import task_session_key

if TYPE_CHECKING:
    from gateway.pipeline.ports import TaskParts

__all__ = ["RESULTS_DIR", "Reporter", "report_key", "report_text"]

log = logging.getLogger(__name__)

RESULTS_DIR = "tasks"
SUMMARY_CHARS = 600


def report_key(task_id: int) -> str:
    return f"task:{task_id}"


def report_text(task: Task, state: str, result: str, error: str) -> str:
    head = f"Task #{task.number} {STATE_WORDS.get(state, state)}: {shorten(task.goal, 120)}"
    if state == "done":
        return f"{head}\n\n{result}" if result else head
    text = f"{head}\n{error[:1:].upper() + error[1:]}." if error else head
    if result:
        text += f"\n\nWhat it had so far:\n{result}"
    return text


class Reporter:
    def __init__(self, parts: TaskParts, store: TaskStore) -> None:
        self.parts = parts
        self.store = store
        self.max_chars = parts.settings.tasks.result_max_chars
        self._notes: set[asyncio.Future[None]] = set()
        self._noting: set[int] = set()  # tasks whose note is queued in their chat's lane

    async def report(self, task: Task, state: str, *, result: str = "", error: str = "") -> None:
        """End `task` in `state` and report it once (module doc)."""
        at = self.parts.clock.now().timestamp()
        text = report_text(task, state, result, error)
        file = ""
        if len(text) > self.max_chars:
            file, text = await self._as_file(task, state, text)
        channel = self.parts.channels.get(task.channel)
        if channel is None:
            log.warning(
                "task %s of %s ended (%s) but %s is not running here: reported at a start "
                "that runs it",
                task.number,
                task.person,
                state,
                task.channel,
            )
            await self.store.finish(
                task.id, state, result=result, error=error, at=at, reported=False
            )
            return
        together = self.store.finish_write(
            task.id, state, result=result, error=error, at=at, reported=True
        )
        first = await self.parts.delivery.deliver(
            task.channel, task.chat_id, text, key=report_key(task.id), file=file, together=together
        )
        log.info("task %s of %s ended: %s", task.number, task.person, state)
        if first.done() and first.result() == "duplicate":
            return  # reported before; its note was (or will be) made then
        self._note_soon(task, text)

    async def _as_file(self, task: Task, state: str, text: str) -> tuple[str, str]:
        """Write the whole report to the workspace; the caption is a summary of it."""
        path = Path(task.workspace) / RESULTS_DIR / f"task-{task.number}-result.md"

        def write() -> None:
            make_private_dirs(path.parent)
            atomic_write_text(path, text + "\n")

        await asyncio.to_thread(write)
        head = text.split("\n", 1)[0]
        body = " ".join(text.split("\n", 1)[1].split()) if "\n" in text else ""
        summary = (
            f"{head}\nThe whole result ({len(text):,} characters) is in the attached file "
            f"{RESULTS_DIR}/{path.name}. It begins: {shorten(body, SUMMARY_CHARS)}"
        )
        return str(path), summary

    # -- the chat's session ---------------------------------------------------------------

    def _note_soon(self, task: Task, text: str) -> None:
        """Into the chat's session through its lane (after a running turn there); once."""
        if task.id in self._noting:
            return
        self._noting.add(task.id)

        async def note() -> None:
            try:
                await self._note(task, text)
            finally:
                self._noting.discard(task.id)

        done = self.parts.lanes.submit(task.session_key, note)
        self._notes.add(done)
        done.add_done_callback(self._notes.discard)

    async def _note(self, task: Task, text: str) -> None:
        # The result was written from whatever the task read: a web page, a group's file, a
        # command's output. That taint comes along into the chat (provenance.py), so text a
        # page planted cannot reach what groups read through a task's report.
        outside = await asyncio.to_thread(_outside_in, task)
        session = await self.parts.sessions.get(Path(task.workspace), task.session_key)
        session.record(
            Message("assistant", text, untrusted=outside),
            task=task.id,
            channel=task.channel,
            chat_id=task.chat_id,
        )
        await self.store.mark_noted(task.id)

    async def settle(self) -> None:
        """Wait for the notes queued in the chats' lanes (stop)."""
        if self._notes:
            await asyncio.gather(*list(self._notes), return_exceptions=True)

    async def catch_up(self) -> None:
        """At start: the reports owed (their channel was missing) and the notes not made."""
        for task in await self.store.unreported():
            if task.channel in self.parts.channels:
                await self.report(task, task.state, result=task.result, error=task.error)
        for task in await self.store.unnoted():
            if task.id in self._noting or task.channel not in self.parts.channels:
                continue  # its note is on its way (just reported), or another gateway's
            if await asyncio.to_thread(_noted_already, task):
                await self.store.mark_noted(task.id)
                continue
            text = report_text(task, task.state, task.result, task.error)
            if len(text) > self.max_chars:
                _, text = await self._as_file(task, task.state, text)
            with contextlib.suppress(Exception):
                self._note_soon(task, text)


def _outside_in(task: Task) -> str:
    """The newest outside source anywhere in the task's own transcript (or the one it
    started with), "" when the task read nothing from outside."""
    key = task_session_key(task.person, task.id)
    transcript = Transcript(transcript_path(Path(task.workspace), key))
    for entry in reversed(transcript.load()):
        source = untrusted_field(entry)
        if source:
            return source
    return task.outside


def _noted_already(task: Task) -> bool:
    """Whether the chat's transcript has the task's report (a kill after the note, before
    the mark)."""
    transcript = Transcript(transcript_path(Path(task.workspace), task.session_key))
    return any(entry.get("task") == task.id for entry in transcript.load())
