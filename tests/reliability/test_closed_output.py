"""A gateway whose output nobody reads any more still stops (issue 32, item 1).

`clawgate run 2>&1 | tee run.log`, then Ctrl-C: tee died of the same Ctrl-C, the signal
handler's first write to stderr raised on the closed pipe before it started the stop, and
the gateway ignored that Ctrl-C, two more and a SIGTERM until kill -9. Here `python -m gateway`
is a real process whose stdout and stderr are one real OS pipe (as `2>&1 |` makes it), against
the loopback fake Telegram and fake model: its reader exits (tee died, `head -1` had its line),
or never reads at all (a full pipe), and each stop must still end the process by itself with
the usual exit status (130 after Ctrl-C, 0 after SIGTERM or the end of a chat).
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys

import pytest

from tests.fakes.telegram_server import FakeTelegramServer
from tests.gateway.cli.test_cli import _env, _run
from tests.reliability.process import gateway_env

PERSON = 3201
HANG = 30.0  # a process still running after this is hanging, not slow (not a speed figure)


class OutputPipe:
    """One OS pipe for a child's stdout and stderr, read here as `tee` reads it until
    `close()` (the reader is gone), or left unread and full (`fill()`: a reader that stopped
    reading, a stuck journal)."""

    def __init__(self) -> None:
        self.read_fd, self.write_fd = os.pipe()
        self.seen = bytearray()
        self._grew = asyncio.Event()
        self._transport: asyncio.ReadTransport | None = None

    def fill(self) -> None:
        """Write into the pipe until it takes no more, then leave it unread."""
        os.set_blocking(self.write_fd, False)
        try:
            while True:
                os.write(self.write_fd, b"x" * 4096)
        except BlockingIOError:
            pass
        finally:
            os.set_blocking(self.write_fd, True)  # the child gets the pipe as it normally is

    async def read(self) -> None:
        """Read (and keep) everything the child writes, as tee does."""
        pipe = self

        class Reader(asyncio.Protocol):
            def data_received(self, data: bytes) -> None:
                pipe.seen += data
                pipe._grew.set()

        loop = asyncio.get_running_loop()
        self._transport, _ = await loop.connect_read_pipe(Reader, os.fdopen(self.read_fd, "rb"))

    async def until(self, needle: bytes) -> None:
        async with asyncio.timeout(HANG):
            while needle not in self.seen:
                self._grew.clear()
                await self._grew.wait()

    def close(self) -> None:
        """The reader goes away: the child's next write finds the pipe closed."""
        if self._transport is not None:
            self._transport.close()
            self._transport = None
        else:
            os.close(self.read_fd)


async def _gateway(
    env: dict[str, str], pipe: OutputPipe, *args: str, stdin: int = asyncio.subprocess.DEVNULL
) -> asyncio.subprocess.Process:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "gateway",
        *(args or ("run",)),
        env=env,
        stdin=stdin,
        stdout=pipe.write_fd,
        stderr=pipe.write_fd,
    )
    os.close(pipe.write_fd)  # the child holds the only write end, as behind a shell's `|`
    return process


async def _run_gateway(tmp_path, tg, llm, *, full: bool = False):  # type: ignore[no-untyped-def]
    """`clawgate run` into a pipe read here (or, `full`, one left full and unread)."""
    pipe = OutputPipe()
    if full:
        pipe.fill()
    else:
        await pipe.read()
    env = gateway_env(tmp_path, tg, llm.base_url, [PERSON])
    return pipe, await _gateway(env, pipe)


async def _stops_by_itself(process: asyncio.subprocess.Process, sig: int | None) -> int:
    """The exit status after `sig` (None: without one); fails if the process hangs."""
    try:
        if sig is not None:
            process.send_signal(sig)
        return await asyncio.wait_for(process.wait(), HANG)
    except TimeoutError:
        after = signal.Signals(sig).name if sig is not None else "its output closed"
        pytest.fail(
            f"still running {HANG:.0f} s after {after}: it does not stop when its output is closed"
        )
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


async def _answers(tg: FakeTelegramServer, text: str, count: int) -> None:
    await tg.send_text(PERSON, text)
    await tg.wait_sent(count, timeout=HANG)


@pytest.mark.parametrize(
    ("sig", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 0)], ids=["ctrl-c", "sigterm"]
)
async def test_a_stop_works_after_the_reader_of_its_output_died(
    tmp_path, anthropic_server, sig, status
):
    """`clawgate run 2>&1 | tee run.log`, tee dies, then Ctrl-C (or SIGTERM)."""
    async with FakeTelegramServer(max_poll=0.3) as tg:
        pipe, process = await _run_gateway(tmp_path, tg, anthropic_server)
        await pipe.until(b"clawgate is running")
        await _answers(tg, "hello before tee dies", 1)
        pipe.close()
        await _answers(tg, "hello after tee died", 2)  # serving on, its output dropped
        assert await _stops_by_itself(process, sig) == status


async def test_a_reader_that_takes_one_line_and_leaves(tmp_path, anthropic_server):
    """`clawgate run 2>&1 | head -1`: the gateway goes on serving, then stops on Ctrl-C."""
    async with FakeTelegramServer(max_poll=0.3) as tg:
        pipe, process = await _run_gateway(tmp_path, tg, anthropic_server)
        await pipe.until(b"\n")
        pipe.close()  # head printed its line and exited
        await _answers(tg, "hello after head left", 1)
        assert await _stops_by_itself(process, signal.SIGINT) == 130


@pytest.mark.parametrize(
    ("sig", "status"), [(signal.SIGTERM, 0), (signal.SIGINT, 130)], ids=["sigterm", "ctrl-c"]
)
async def test_a_full_pipe_nobody_reads_never_blocks_the_gateway(
    tmp_path, anthropic_server, sig, status
):
    """A reader that stopped reading (a paused `docker logs`, a stuck journal): every write
    to the full pipe would block; the gateway must answer and stop all the same."""
    async with FakeTelegramServer(max_poll=0.3) as tg:
        pipe, process = await _run_gateway(tmp_path, tg, anthropic_server, full=True)
        try:
            await _answers(tg, "hello into a full pipe", 1)
            assert await _stops_by_itself(process, sig) == status
        finally:
            pipe.close()


async def test_a_piped_chat_whose_reader_left_ends_by_itself(tmp_path, anthropic_server):
    """`clawgate chat | head -1` with more input to come: nobody reads the answers any more,
    so the chat ends (exit status 0, as at the end of its input) instead of answering into
    the void or dying of a BrokenPipeError; the answer not shown is shown at the next start."""
    env = _env(tmp_path, ANTHROPIC_API_KEY="sk-x", CLAWGATE_LLM__BASE_URL=anthropic_server.base_url)
    pipe = OutputPipe()
    await pipe.read()
    read_in, write_in = os.pipe()
    process = await _gateway(env, pipe, "chat", stdin=read_in)
    os.close(read_in)
    try:
        os.write(write_in, b"first line\n")
        await pipe.until(b"echo: first line")
        pipe.close()
        os.write(write_in, b"second line\n")  # its answer finds the output closed
        assert await _stops_by_itself(process, None) == 0
    finally:
        os.close(write_in)
    code, out, err = await _run(["chat"], env, stdin="")  # the answer nobody saw comes now
    assert code == 0, err
    assert "echo: second line" in out and "echo: first line" not in out, out


@pytest.mark.parametrize("command", [["--help"], ["users", "list"]])
async def test_a_command_whose_output_is_closed_exits_as_usual(tmp_path, command):
    """`clawgate users list | true`: no BrokenPipeError, no 'Exception ignored' from
    Python's flush at exit, and the command's own status (Click turned EPIPE into 1)."""
    pipe = OutputPipe()
    os.close(pipe.read_fd)
    errors = tmp_path / "stderr.txt"
    env = _env(tmp_path)
    with open(errors, "wb") as sink:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "gateway",
            *command,
            env=env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=pipe.write_fd,
            stderr=sink,
        )
    os.close(pipe.write_fd)
    assert await _stops_by_itself(process, None) == 0, errors.read_text()
    said = errors.read_text()
    assert "Traceback" not in said and "Exception ignored" not in said, said


def test_the_full_pipe_really_is_full() -> None:
    """The rig itself: after `fill()`, a write would block."""
    pipe = OutputPipe()
    try:
        pipe.fill()
        os.set_blocking(pipe.write_fd, False)
        with pytest.raises(BlockingIOError):
            os.write(pipe.write_fd, b"one more")
    finally:
        os.close(pipe.write_fd)
        os.close(pipe.read_fd)
