"""Where a resumed message's turn stopped (`resume_point`), and `Session.drop_turn`."""

from __future__ import annotations

from typing import Any

from channels.base import InboundMessage
from gateway.agent.conversation import Message
from gateway.agent.loop import EMPTY_ANSWER
from gateway.agent.sessions import SessionStore
from gateway.clock import SystemClock
from gateway.pipeline.recovery import ResumePoint, resume_point

MSG = InboundMessage("telegram", "42", "42", "hello", message_id="7")


def user(message_id: str = "7", text: str = "hello") -> dict[str, Any]:
    return {
        "type": "user",
        "text": text,
        "channel": "telegram",
        "chat_id": "42",
        "message_id": message_id,
    }


def assistant(text: str, **extra: Any) -> dict[str, Any]:
    return {"type": "assistant", "text": text, **extra}


CALL = {"id": "t1", "name": "list_files", "arguments": {}}


def test_a_message_not_in_the_transcript_is_new() -> None:
    assert resume_point([user("6"), assistant("hi")], MSG) == ResumePoint(False, None)


def test_a_final_answer_after_the_message_is_the_reply() -> None:
    entries = [
        user(),
        assistant("", tool_calls=[CALL]),
        {"type": "tool_result", "tool_call_id": "t1", "text": "a.md"},
        assistant("You have a.md."),
        {"type": "delivery", "ok": True},
    ]
    assert resume_point(entries, MSG) == ResumePoint(True, "You have a.md.")


def test_a_reply_event_wins_over_the_model_text() -> None:
    entries = [user(), assistant("   "), {"type": "reply", "message_id": "7", "text": EMPTY_ANSWER}]
    assert resume_point(entries, MSG).reply == EMPTY_ANSWER
    assert resume_point(entries[:2], MSG).reply == EMPTY_ANSWER  # crash before the event


def test_a_turn_stopped_before_its_answer_continues() -> None:
    entries = [user(), {"type": "compaction", "summary": "s"}, assistant("", tool_calls=[CALL])]
    assert resume_point(entries, MSG) == ResumePoint(True, None)


def test_alerts_and_reminders_are_not_answers() -> None:
    entries = [
        user(),
        assistant("Time to stretch", heartbeat=True),
        assistant("Dentist at 3", reminder="r1"),
    ]
    assert resume_point(entries, MSG) == ResumePoint(True, None)


def test_a_message_overtaken_by_another_is_recorded_again() -> None:
    entries = [user(), user("8", "later"), assistant("answer to later")]
    assert resume_point(entries, MSG) == ResumePoint(False, None)
    entries += [user()]  # recorded again: now it is the last message, unanswered
    assert resume_point(entries, MSG) == ResumePoint(True, None)
    entries += [assistant("answer to hello")]
    assert resume_point(entries, MSG) == ResumePoint(True, "answer to hello")


def test_an_answered_message_is_not_confused_by_what_follows() -> None:
    entries = [user(), assistant("first"), user("8", "later"), assistant("second")]
    assert resume_point(entries, MSG).reply == "first"


async def test_a_dropped_turn_leaves_the_history_also_after_a_reload(tmp_path) -> None:
    store = SessionStore(SystemClock())
    session = await store.get(tmp_path, "telegram-42:dm")
    session.record(Message("user", "before"), message_id="6")
    session.record(Message("assistant", "ok"))
    session.record(Message("user", "poison"), message_id="7")
    session.record(Message("assistant", "", tool_calls=()))
    session.drop_turn("7", reason="given up")
    assert [m.text for m in session.history] == ["before", "ok"]
    session.record(Message("user", "after"), message_id="8")
    reloaded = await SessionStore(SystemClock()).get(tmp_path, "telegram-42:dm")
    assert [m.text for m in reloaded.history] == ["before", "ok", "after"]
    lines = session.transcript.load()
    assert any(e.get("text") == "poison" for e in lines)  # the transcript keeps every line
