"""`SafeOutput` on real descriptors: a pipe whose reader is gone, a full pipe, a file, and a
stream that raises (gateway/ops/output.py; the processes are in
tests/reliability/test_closed_output.py)."""

from __future__ import annotations

import io
import os
import threading
from pathlib import Path

from gateway.ops.output import SafeOutput, _Writer
from gateway.ops.redaction import RedactingStream, Redactor

HANG = 30.0  # a bound for something that would otherwise hang, not a speed figure


def _fill(fd: int) -> None:
    os.set_blocking(fd, False)
    try:
        while True:
            os.write(fd, b"." * 4096)
    except BlockingIOError:
        pass
    finally:
        os.set_blocking(fd, True)


def _in_a_thread(work) -> None:  # type: ignore[no-untyped-def]
    """Run `work`; fail (instead of hanging the test run) if it blocks."""
    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    thread.join(HANG)
    assert not thread.is_alive(), "a write blocked"


def test_a_pipe_whose_reader_is_gone_is_closed_after_the_write_and_nothing_raises():
    read, write = os.pipe()
    os.close(read)
    try:
        out = SafeOutput(io.StringIO(), write, writer=_Writer())
        out.write("to nobody\n")
        out.flush()
        assert out.closed
        out.write("and more\n")  # dropped, quietly
        assert RedactingStream(out, Redactor([])).closed  # what the terminal chat sees
    finally:
        os.close(write)


def test_a_full_pipe_never_blocks_and_says_what_it_dropped_once_read_again():
    read, write = os.pipe()
    writer = _Writer(limit=1000)
    out = SafeOutput(io.StringIO(), write, writer=writer)
    try:
        _fill(write)
        _in_a_thread(lambda: [out.write(f"line {i:04d}\n") for i in range(1000)])
        assert not out.closed
        seen = bytearray()

        def read_until(needle: bytes) -> None:
            while needle not in seen:
                seen.extend(os.read(read, 65536))

        _in_a_thread(lambda: read_until(b"line 0009"))  # the reader reads again
        assert writer.drain(HANG)
        out.write("the end\n")
        _in_a_thread(lambda: read_until(b"the end"))
        text = seen.decode()
        dropped = 1000 * len("line 0000\n") - text.count("line ") * len("line 0000\n")
        assert dropped > 0
        note = f"clawgate: {dropped} bytes of output dropped here: nobody was reading them\n"
        assert note in text, text[-300:]
        last_kept = text.rindex("line ")  # the note stands where the text was dropped
        assert last_kept < text.index(note) < text.index("the end"), text[-400:]
    finally:
        os.close(write)
        os.close(read)


def test_a_file_is_written_at_once_and_in_order(tmp_path: Path):
    path = tmp_path / "out.txt"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        out = SafeOutput(io.StringIO(), fd, writer=_Writer())
        out.write("one ")
        out.write("two é\n")
        assert path.read_text(encoding="utf-8") == "one two é\n" and not out.closed
    finally:
        os.close(fd)


class _Broken(io.StringIO):
    def write(self, text: str) -> int:
        raise BrokenPipeError(32, "Broken pipe")


def test_a_stream_without_a_descriptor_is_guarded_too():
    out = SafeOutput(_Broken())
    print("a banner", file=out, flush=True)  # no BrokenPipeError out of print
    assert out.closed
    kept = io.StringIO()
    fine = SafeOutput(kept)
    print("kept", file=fine)
    assert kept.getvalue() == "kept\n" and not fine.closed
