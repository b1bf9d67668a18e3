"""A voice reply and kill -9, through `clawgate run` as a real process.

The voice note is made, written beside the state database and named by an outbox row before
anything is sent. Killed after that (Telegram refusing the upload meanwhile, so the kill lands
between synthesis and delivery), the restart sends the voice note from its row, once, without
speaking the reply again. Killed while the reply is being spoken (no row yet), the restart
answers the message again and sends one voice note.
"""

from __future__ import annotations

import signal
import sqlite3
from pathlib import Path

from tests.fakes.llm_server import FakeAnthropicServer
from tests.fakes.media_files import VOICE_NOTE
from tests.fakes.speech import FakeSpeechServer, listen
from tests.fakes.telegram_server import FakeTelegramServer
from tests.fakes.transcription_server import FakeTranscriptionServer
from tests.reliability.process import gateway_env, start_gateway
from tests.settle import until

USER = 4242


def _env(
    tmp_path: Path,
    tg: FakeTelegramServer,
    llm: FakeAnthropicServer,
    stt: FakeTranscriptionServer,
    tts: FakeSpeechServer,
) -> dict[str, str]:
    return gateway_env(
        tmp_path,
        tg,
        llm.base_url,
        [USER],
        **{
            f"CLAWGATE_MEDIA__{part}__{name}": value
            for part, server in (("TRANSCRIPTION", stt), ("SPEECH", tts))
            for name, value in (
                ("BASE_URL", server.base_url),
                ("API_KEY", server.key),
                ("BACKEND", "openai"),
            )
        },
    )


def _outbox(tmp_path: Path) -> list[tuple[str, str]]:
    path = tmp_path / "workspaces" / ".gateway" / "state.db"
    if not path.exists():
        return []
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
            return [
                (str(r[0]), str(r[1]))
                for r in db.execute("SELECT file, status FROM outbox ORDER BY id")
            ]
    except sqlite3.Error:
        return []


def _voice_files(tmp_path: Path) -> list[Path]:
    folder = tmp_path / "workspaces" / ".gateway" / "voice"
    return sorted(folder.glob("*")) if folder.exists() else []


async def _send_voice_note(tg: FakeTelegramServer) -> None:
    voice = {**tg.add_file(VOICE_NOTE.read_bytes()), "duration": 4, "mime_type": "audio/ogg"}
    await tg.add_update(tg.message(USER, voice=voice))


async def test_a_kill_between_synthesis_and_delivery_sends_the_voice_once(
    tmp_path, anthropic_server
) -> None:
    async with FakeTranscriptionServer() as stt, FakeSpeechServer() as tts:
        tg = FakeTelegramServer(max_poll=0.3)
        await tg.start()
        tg.fail("sendVoice", 502, "Bad Gateway", times=1000)  # the upload does not go through
        env = _env(tmp_path, tg, anthropic_server, stt, tts)
        log = tmp_path / "gateway.log"
        process = await start_gateway(env, log)
        try:
            await _send_voice_note(tg)
            await until(
                lambda: (
                    any(f.endswith(".voice.ogg") and s == "pending" for f, s in _outbox(tmp_path))
                    and any(method == "sendVoice" for method, _ in tg.calls)
                ),
                what="a voice reply in the outbox, its upload tried",
                timeout=60,
            )
            process.send_signal(signal.SIGKILL)
            await process.wait()
            assert tg.files == [] and len(tts.spoken) == 1
            assert len(_voice_files(tmp_path)) == 2  # the voice note and its figures
            tg.failures["sendVoice"].clear()
            process = await start_gateway(env, log)
            await until(lambda: len(tg.files) >= 1, what="the voice note sent", timeout=60)
            await until(
                lambda: all(s == "sent" for _, s in _outbox(tmp_path)),
                what="the outbox row finished",
                timeout=30,
            )
        finally:
            process.terminate()
            await process.wait()
            await tg.stop()
        assert [f.method for f in tg.files] == ["sendVoice"], log.read_text()[-3000:]
        assert tg.files[0].caption.startswith("echo: [voice message")
        assert listen(tg.files[0].data).codec == "opus"
        assert len(tts.spoken) == 1  # sent from its row: not spoken again
        assert tg.sent == []  # the text went as the caption, once
        assert _voice_files(tmp_path) == []


async def test_a_kill_while_speaking_answers_once_after_the_restart(
    tmp_path, anthropic_server
) -> None:
    async with FakeTranscriptionServer() as stt, FakeSpeechServer() as tts:
        tts.delay = 60.0  # the voice takes long: the kill lands while it speaks
        tg = FakeTelegramServer(max_poll=0.3)
        await tg.start()
        env = _env(tmp_path, tg, anthropic_server, stt, tts)
        log = tmp_path / "gateway.log"
        process = await start_gateway(env, log)
        try:
            await _send_voice_note(tg)
            await until(lambda: len(tts.spoken) == 1, what="the reply being spoken", timeout=60)
            process.send_signal(signal.SIGKILL)
            await process.wait()
            assert _outbox(tmp_path) == [] and tg.files == [] and tg.sent == []
            tts.delay = 0.0
            process = await start_gateway(env, log)
            await until(lambda: len(tg.files) >= 1, what="the voice note sent", timeout=60)
            await until(
                lambda: bool(_outbox(tmp_path)) and all(s == "sent" for _, s in _outbox(tmp_path)),
                what="the outbox row finished",
                timeout=30,
            )
        finally:
            process.terminate()
            await process.wait()
            await tg.stop()
        assert [f.method for f in tg.files] == ["sendVoice"], log.read_text()[-3000:]
        assert len(tts.spoken) == 2 and tg.sent == []
        assert len(_outbox(tmp_path)) == 1
