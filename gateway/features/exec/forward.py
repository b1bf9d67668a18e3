"""Runs inside a sandbox that may use the network: 127.0.0.1:PORT to the gateway's proxy.

The sandbox's network namespace has only a loopback interface; programs find the proxy
through `http_proxy`/`https_proxy` at 127.0.0.1:PORT, and this relays each connection to the
unix socket the gateway bound into the sandbox, where the proxy decides (proxy.py). It
listens first and only then starts the command (its child), so no command ever races it, and
it exits with the command's status when the command ends.

Started as `python3 -I -S forward.py PORT SOCKET KEEP_FD -- COMMAND...` by the system's
Python inside the sandbox: the standard library only, nothing of the gateway's (this file is bound
read-only and never imported by the gateway).
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import socket
import sys

_CHUNK = 65536
_MAX_PENDING = 256 * 1024  # bytes buffered towards one side before reading from the other stops


class _Pair:
    def __init__(self, client: socket.socket, upstream: socket.socket) -> None:
        self.ends = {client: upstream, upstream: client}
        self.pending: dict[socket.socket, bytearray] = {client: bytearray(), upstream: bytearray()}
        self.closed_read: set[socket.socket] = set()


def _exit_code(status: int) -> int:
    if os.WIFSIGNALED(status):
        return 128 + os.WTERMSIG(status)
    return os.WEXITSTATUS(status)


def _serve(
    sel: selectors.BaseSelector,
    listener: socket.socket,
    wake: socket.socket,
    socket_path: str,
    child: int,
) -> int:
    sel.register(listener, selectors.EVENT_READ, None)
    sel.register(wake, selectors.EVENT_READ, "wake")
    pairs: dict[socket.socket, _Pair] = {}
    registered: set[socket.socket] = set()

    def close_pair(pair: _Pair) -> None:
        for end in pair.ends:
            if end in registered:
                sel.unregister(end)
                registered.discard(end)
            pairs.pop(end, None)
            end.close()

    def update(pair: _Pair) -> None:
        for end, other in pair.ends.items():
            events = 0
            if end not in pair.closed_read and len(pair.pending[other]) < _MAX_PENDING:
                events |= selectors.EVENT_READ
            if pair.pending[end]:
                events |= selectors.EVENT_WRITE
            if events and end in registered:
                sel.modify(end, events, pair)
            elif events:
                sel.register(end, events, pair)
                registered.add(end)
            elif end in registered:
                sel.unregister(end)
                registered.discard(end)

    while True:
        pid, status = os.waitpid(child, os.WNOHANG)
        if pid == child:
            return _exit_code(status)
        for key, mask in sel.select(timeout=1.0):
            if key.data == "wake":
                with contextlib.suppress(OSError):
                    wake.recv(_CHUNK)
                continue
            if key.data is None:
                try:
                    client, _ = listener.accept()
                except OSError:
                    continue
                upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                try:
                    upstream.connect(socket_path)
                except OSError:
                    client.close()
                    upstream.close()
                    continue
                client.setblocking(False)
                upstream.setblocking(False)
                pair = _Pair(client, upstream)
                pairs[client] = pairs[upstream] = pair
                update(pair)
                continue
            pair = key.data
            end: socket.socket = key.fileobj  # type: ignore[assignment]
            if end not in pairs:
                continue
            other = pair.ends[end]
            if mask & selectors.EVENT_READ:
                try:
                    data = end.recv(_CHUNK)
                except BlockingIOError:
                    data = None
                except OSError:
                    close_pair(pair)
                    continue
                if data == b"":
                    pair.closed_read.add(end)
                    if not pair.pending[other]:
                        with contextlib.suppress(OSError):
                            other.shutdown(socket.SHUT_WR)
                elif data:
                    pair.pending[other] += data
            if mask & selectors.EVENT_WRITE and pair.pending[end]:
                try:
                    sent = end.send(pair.pending[end])
                    del pair.pending[end][:sent]
                except BlockingIOError:
                    pass
                except OSError:
                    close_pair(pair)
                    continue
                if not pair.pending[end] and other in pair.closed_read:
                    with contextlib.suppress(OSError):
                        end.shutdown(socket.SHUT_WR)
            if len(pair.closed_read) == 2 and not any(pair.pending.values()):
                close_pair(pair)
                continue
            if end in pairs:
                update(pair)


def main(argv: list[str]) -> int:
    port, socket_path, keep_text, sep, *command = argv
    if sep != "--" or not command:
        print("usage: forward.py PORT SOCKET KEEP_FD -- COMMAND...", file=sys.stderr)
        return 126
    # Every descriptor bwrap was given goes now, but the marker the command's wrapper writes:
    # a bind source left open would lead out of the sandbox (sandbox.py says how).
    keep = int(keep_text)
    if keep > 2:
        os.closerange(3, keep)
        os.closerange(keep + 1, 1 << 16)
    else:
        os.closerange(3, 1 << 16)
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", int(port)))
    listener.listen(64)
    listener.setblocking(False)
    wake, waker = socket.socketpair()
    wake.setblocking(False)
    waker.setblocking(False)
    signal.set_wakeup_fd(waker.fileno())
    signal.signal(signal.SIGCHLD, lambda _sig, _frame: None)
    child = os.fork()
    if child == 0:
        listener.close()
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        try:
            os.execv(command[0], command)
        finally:
            os._exit(127)
    return _serve(selectors.DefaultSelector(), listener, wake, socket_path, child)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
