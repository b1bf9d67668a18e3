"""The test process refuses to reach past loopback (tests/loopback_only.py), and says so."""

from __future__ import annotations

import errno
import socket

import pytest

from tests import loopback_only


def test_a_lookup_or_connection_past_loopback_is_refused_and_recorded() -> None:
    with pytest.raises(socket.gaierror):
        socket.getaddrinfo("example.com", 443)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp, pytest.raises(OSError) as caught:
        udp.connect(("192.0.2.1", 9))  # TEST-NET-1: no packet would be sent anyway
    assert caught.value.errno == errno.ENETUNREACH
    assert loopback_only.attempts == [
        "name lookup of 'example.com'",
        "connection to ('192.0.2.1', 9)",
    ]
    loopback_only.attempts.clear()  # asked for here: the autouse check must not fail this test


def test_loopback_is_untouched() -> None:
    assert socket.getaddrinfo("localhost", 80)
    assert socket.getaddrinfo("127.0.0.1", 80, type=socket.SOCK_STREAM)[0][4][0] == "127.0.0.1"
    with socket.socket() as server, socket.socket() as client:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        client.connect(server.getsockname())
    assert loopback_only.attempts == []
