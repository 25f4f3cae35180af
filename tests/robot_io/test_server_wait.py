"""wait_for_server: a policy server that is still starting is waited for (HELLO again on a fresh socket every client
timeout, a progress line every few seconds), one that never answers is given up on in one line that says what to
check and what sets the wait, and a stop request ends the wait. No assertion that anything was fast: only upper
bounds far above what a loaded machine needs."""

from __future__ import annotations

import threading
import time

import pytest

from robot_io.client import PolicyClient
from robot_io.protocol import Error, ErrorCode, Hello, RemoteError
from robot_io.server_wait import ServerNotAnswering, wait_for_server
from tests.robot_io.test_client import METADATA, FakeServer, reply_normally


def answers_after(hellos: int):
    """A handler that ignores the first `hellos` HELLOs (a server busy starting), then answers normally."""
    seen = []

    def handler(message):
        if isinstance(message, Hello):
            seen.append(message)
            if len(seen) <= hellos:
                return []
        return reply_normally(message)

    return handler


def test_a_server_that_answers_only_a_later_hello_is_waited_for_with_progress_lines(tmp_path):
    server = FakeServer(f"ipc://{tmp_path}/starting.sock", answers_after(2))
    lines: list[str] = []
    try:
        with PolicyClient(server.endpoint, timeout_s=0.3) as client:
            metadata = wait_for_server(client, 60.0, lines.append, every_s=0.1)
            assert metadata == METADATA and client.metadata == METADATA
            assert sum(isinstance(m, Hello) for m in server.received) == 3  # two ignored, each re-sent on a new socket
    finally:
        server.close()
    assert lines and all(line.startswith(f"waiting for vlash serve at {server.endpoint}: ") for line in lines)
    assert all(line.endswith(" s") for line in lines)


def test_a_server_that_binds_later_is_waited_for(tmp_path):
    endpoint = f"ipc://{tmp_path}/late.sock"
    started: list[FakeServer] = []
    timer = threading.Timer(0.5, lambda: started.append(FakeServer(endpoint)))
    timer.start()
    try:
        with PolicyClient(endpoint, timeout_s=0.2) as client:
            assert wait_for_server(client, 60.0) == METADATA
    finally:
        timer.join()
        for server in started:
            server.close()


def test_no_server_is_given_up_on_in_one_line_naming_what_to_check_and_the_hint(tmp_path):
    endpoint = f"ipc://{tmp_path}/nobody.sock"
    with PolicyClient(endpoint, timeout_s=0.1) as client:
        start = time.monotonic()
        with pytest.raises(ServerNotAnswering) as caught:
            wait_for_server(client, 0.4, hint="; --server-wait-s sets the wait")
        assert time.monotonic() - start >= 0.4  # it did wait the whole time
    assert str(caught.value) == (
        f"no reply from {endpoint}: is `vlash serve` running there? (waited 0.4 s; --server-wait-s sets the wait)"
    )


def test_a_stop_request_ends_the_wait_without_an_error(tmp_path):
    stop = threading.Event()
    threading.Timer(0.3, stop.set).start()
    with PolicyClient(f"ipc://{tmp_path}/nobody.sock", timeout_s=0.1) as client:
        start = time.monotonic()
        assert wait_for_server(client, 120.0, stop=stop) is None
        assert time.monotonic() - start < 60.0  # long before the 120 s wait ran out


def test_a_server_that_refuses_the_client_is_an_error_not_a_wait(tmp_path):
    refusal = Error(ErrorCode.BUSY, "not allowed")
    server = FakeServer(f"ipc://{tmp_path}/refuses.sock", lambda m: [refusal] if isinstance(m, Hello) else [])
    try:
        with PolicyClient(server.endpoint, timeout_s=0.3) as client, pytest.raises(RemoteError, match="not allowed"):
            wait_for_server(client, 60.0)
    finally:
        server.close()


@pytest.mark.parametrize("wait_s", [0, -1.0, float("nan"), float("inf")])
def test_the_wait_must_be_a_positive_finite_time(wait_s):
    with PolicyClient("tcp://127.0.0.1:9", timeout_s=0.1) as client, pytest.raises(ValueError, match="wait_s"):
        wait_for_server(client, wait_s)
