"""The openpi endpoint's connections (vlash.server.openpi_connections), over loopback: past max_connections a new one
is refused in its handshake (HTTP 503, counted) and holds no thread; a robot that stops answering keepalive pings is
logged in one line, not a traceback."""

from __future__ import annotations

import logging
import socket
import threading
import time
import urllib.request

import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

import vlash.server.openpi_endpoint as openpi_endpoint
from tests.server.test_openpi_endpoint import OpenpiTestClient
from vlash.errors import ConfigError
from vlash.server.config import OpenpiConfig
from vlash.server.openpi_connections import RefusalPace
from vlash.server.openpi_endpoint import OpenpiEndpoint

WAIT_S = 30.0  # the longest a condition below is waited for (a busy 2-core machine)
REFUSED = 20  # connections refused in a row


def wait_for(condition, what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert time.monotonic() < deadline, f"{what}: not within {WAIT_S:.0f} s"
        time.sleep(0.02)


def _refused_status(url: str) -> int:
    with pytest.raises(InvalidStatus) as refused:
        connect(url, open_timeout=WAIT_S).close()
    return refused.value.response.status_code


def test_connections_past_the_cap_are_refused_with_503_and_hold_no_thread(server):
    config = OpenpiConfig(port=0, max_connections=2, infer_timeout_s=WAIT_S, refusal_delay_s=0)
    with OpenpiEndpoint(server, config) as endpoint:
        first, second = OpenpiTestClient(endpoint.url), OpenpiTestClient(endpoint.url)
        threads = threading.active_count()
        assert all(_refused_status(endpoint.url) == 503 for _ in range(REFUSED))
        assert endpoint.counters["refused"] == REFUSED and endpoint.counters["connections"] == 2
        with urllib.request.urlopen(f"http://127.0.0.1:{endpoint.port}/healthz", timeout=WAIT_S) as health:
            assert health.status == 200  # answered at the cap too
        wait_for(lambda: threading.active_count() <= threads, "the refused connections' threads to end")
        first.close()  # a place frees once its handler ended

        def third_connects() -> bool:
            try:
                OpenpiTestClient(endpoint.url).close()
                return True
            except InvalidStatus:
                return False

        wait_for(third_connects, "a connection after one closed")
        second.close()


def test_max_connections_must_be_positive():
    with pytest.raises(ConfigError, match="max_connections must be an int >= 1, got 0"):
        OpenpiConfig(max_connections=0)
    assert OpenpiConfig().max_connections == 64


def _silent_robot(port: int) -> socket.socket:
    """A robot that opens the websocket and then reads and answers nothing (no pong, no close)."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=WAIT_S)
    sock.sendall(
        b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
    )
    response = b""
    while b"\r\n\r\n" not in response:
        response += sock.recv(4096)
    assert response.startswith(b"HTTP/1.1 101"), response[:100]
    return sock


def test_a_robot_that_stops_answering_keepalive_is_one_log_line_without_traceback(server, monkeypatch, caplog):
    """Issue 42: each keepalive timeout logged a full websockets traceback at ERROR (219 for 220 slow connections)."""
    for name in ("PING_INTERVAL_S", "PING_TIMEOUT_S", "CLOSE_TIMEOUT_S"):
        monkeypatch.setattr(openpi_endpoint, name, 0.1)
    with caplog.at_level(logging.INFO), OpenpiEndpoint(server, OpenpiConfig(port=0)) as endpoint:
        robots = [_silent_robot(endpoint.port) for _ in range(2)]
        lines = lambda: [r for r in caplog.records if "keepalive" in r.getMessage()]  # noqa: E731
        wait_for(lambda: len(lines()) >= 2, "the keepalive timeouts logged")
        for robot in robots:
            robot.close()
    assert not [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR], caplog.text
    assert len(lines()) == 2 and all(r.levelno == logging.WARNING for r in lines())
    assert "openpi connection: keepalive ping failed: ConnectionClosedError" in lines()[0].getMessage()


def test_the_cap_is_the_openpi_max_connections_flag_of_vlash_serve_and_no_fleets():
    from vlash.cli.main import parse_args
    from vlash.cli.serve_args import OPENPI_FLAGS, check_args

    preset = ["serve", "--policy", "pi05-tiny", "--random-weights", "--openpi-port", "0"]
    assert OPENPI_FLAGS.build(parse_args([*preset, "--openpi-max-connections", "8"])).max_connections == 8
    with pytest.raises(ConfigError, match="^--openpi-max-connections must be an int >= 1, got 0$"):
        OPENPI_FLAGS.build(parse_args([*preset, "--openpi-max-connections", "0"]))
    with pytest.raises(ConfigError, match="--openpi-max-connections configure the ZeroMQ server"):
        check_args(parse_args([*preset, "--ray", "--openpi-max-connections", "8"]))  # the ingress has no such cap


def test_a_refusal_is_sent_refusal_delay_s_late_and_a_client_retrying_at_once_is_refused_once_per_delay(server):
    delay_s = 0.5
    config = OpenpiConfig(port=0, max_connections=1, infer_timeout_s=WAIT_S, refusal_delay_s=delay_s)
    with OpenpiEndpoint(server, config) as endpoint:
        held = OpenpiTestClient(endpoint.url)
        began = time.monotonic()
        assert _refused_status(endpoint.url) == 503  # past the cap
        assert time.monotonic() - began >= delay_s  # a lower bound: no machine answers sooner than asked
        began = time.monotonic()
        message, code = held.error(b"\xc1")  # a frame that is no msgpack: the error reply, held back as well
        assert time.monotonic() - began >= delay_s and code == 1011, message
        assert endpoint.counters["refused"] == 1 and endpoint.counters["errors"] == 1


def test_refusal_pace_lets_at_most_limit_wait_and_stop_releases_them():
    pace = RefusalPace(delay_s=30.0, limit=1)
    waiting = threading.Thread(target=pace.wait)
    waiting.start()
    deadline = time.monotonic() + WAIT_S
    while pace._slots._value and time.monotonic() < deadline:  # noqa: SLF001 - the one waiting holds the slot
        time.sleep(0.01)
    began = time.monotonic()
    pace.wait()  # the limit is reached: at once, not 30 s
    assert time.monotonic() - began < 15.0
    pace.stop()
    waiting.join(15.0)
    assert not waiting.is_alive(), "stop() releases a waiting refusal"
    with pytest.raises(ConfigError, match="refusal_delay_s must be in"):
        OpenpiConfig(refusal_delay_s=-1)
    assert OpenpiConfig().refusal_delay_s == 1.0
