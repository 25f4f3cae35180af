"""No input ends a serving thread: exceptions while handling one message or one request are answered and the
thread goes on; a thread that ends anyway stops the whole server and reports it (fake model, events)."""

from __future__ import annotations

import time

import numpy as np
import pytest
import zmq

from robot_io.client import PolicyClient
from robot_io.protocol import Actions, Error, ErrorCode, Ping, RemoteError, decode, encode
from tests.server.conftest import raw_dealer
from tests.server.fake_runtime import WAIT_S, FakeRuntime, fake_infer, last_reply, start_fake_server

# The 1 KB message: a header whose "type" is a list nested 1000 deep.
NESTED_TYPE = b"\x84\xa1v\x01\xa4type" + b"\x91" * 1000 + b"\x00\xa4body\x80\xa6arrays\x90"


@pytest.fixture
def runtime():
    return FakeRuntime(auto_release=True)


@pytest.fixture
def failures():
    return []


@pytest.fixture
def server(runtime, failures):
    srv = start_fake_server(runtime, on_failure=failures.append)
    yield srv
    srv.stop()


@pytest.fixture
def client(server):
    with PolicyClient(server.endpoint, timeout_s=WAIT_S) as c:
        yield c


@pytest.fixture
def dealer(server):
    with raw_dealer(server.endpoint) as socket:
        yield socket


def answers_ping(socket: zmq.Socket) -> list:
    """Send PING; return what came back before its reply. Fails if no reply comes within WAIT_S."""
    marker = time.time_ns()
    socket.send_multipart(encode(Ping(marker)))
    replies = []
    while socket.poll(int(WAIT_S * 1000)):
        message = decode(socket.recv_multipart())
        if isinstance(message, Ping) and message.sent_ns == marker:
            return replies
        replies.append(message)
    raise AssertionError(f"the server stopped answering (got {replies})")


@pytest.mark.parametrize("where", ["type", "dtype"])
def test_a_deeply_nested_header_is_refused_and_the_server_keeps_answering(dealer, server, where):
    frames = [NESTED_TYPE]
    if where == "dtype":
        state = np.zeros(2, np.float32)
        header = b"\x84\xa1v\x01\xa4type\xa4PING\xa4body\x82\xa7sent_ns\x01\xa9server_ns\xc0\xa6arrays\x91\x83"
        descriptor = b"\xa4name\xa5state\xa5dtype" + b"\x91" * 1000 + b"\x00\xa5shape\x91\x02"
        frames = [header + descriptor, state.tobytes()]
    dealer.send_multipart(frames)
    (reply,) = answers_ping(dealer)
    assert isinstance(reply, Error) and reply.code == ErrorCode.BAD_MESSAGE and "nested" in reply.message
    assert server.running and server.failure is None


def test_an_exception_handling_one_message_is_answered_and_the_socket_thread_goes_on(
    client, server, monkeypatch, failures
):
    record = server.stats.client

    def broken_once(identity: bytes) -> None:
        monkeypatch.setattr(server.stats, "client", record)  # only the first message fails
        raise RuntimeError("injected")

    monkeypatch.setattr(server.stats, "client", broken_once)
    with pytest.raises(RemoteError) as refused:
        client.connect()
    assert refused.value.code == ErrorCode.INTERNAL and refused.value.request_id is None
    assert client.connect().model_id == "fake" and client.ping() > 0
    assert server.counters()["errors"] == 1 and server.running and not failures


def test_an_exception_serving_one_request_is_answered_and_the_model_thread_goes_on(client, server, monkeypatch):
    record = server.stats.served

    def broken_once(*args) -> None:
        monkeypatch.setattr(server.stats, "served", record)
        raise RuntimeError("injected")

    monkeypatch.setattr(server.stats, "served", broken_once)
    client.submit(fake_infer(1))
    reply = last_reply(client, 1)
    assert isinstance(reply, Error) and reply.code == ErrorCode.INTERNAL
    assert isinstance(client.infer(fake_infer(2)), Actions)
    assert server.counters()["served"] == 1 and server.counters()["errors"] == 1


def test_a_non_finite_chunk_is_an_internal_error_and_the_model_thread_goes_on(client, server, runtime):
    runtime.outputs[1] = float("nan")  # a diverged model
    client.submit(fake_infer(1))
    reply = last_reply(client, 1)
    assert isinstance(reply, Error) and reply.code == ErrorCode.INTERNAL and "NaN or inf" in reply.message
    counters = server.counters()
    assert counters["errors"] == 1 and counters["served"] == 0  # an error, not a served request
    final = client.infer(fake_infer(2))
    assert final.request_id == 2 and np.all(final.actions == 2.0)
    assert server.counters()["served"] == 1


def test_a_model_error_with_a_long_message_is_answered_cut_short(client, server, runtime):
    runtime.raises[1] = RuntimeError("x" * 10_000)
    client.submit(fake_infer(1))
    reply = last_reply(client, 1)
    assert isinstance(reply, Error) and reply.code == ErrorCode.INTERNAL and len(reply.message) <= 1000
    assert client.infer(fake_infer(2)).request_id == 2


def test_a_socket_thread_that_dies_stops_the_server_and_reports_why(dealer, server, monkeypatch, failures):
    boom = RuntimeError("socket broke")

    def broken(router) -> None:
        raise boom

    monkeypatch.setattr(server, "_serve_batch", broken)  # outside the handling of one message
    dealer.send_multipart(encode(Ping(1)))
    assert server.wait(WAIT_S) and server.failure is boom and failures == [boom]
    assert not server.running


def test_a_model_thread_that_dies_stops_the_server_and_reports_why(server, monkeypatch, failures):
    boom = RuntimeError("queue broke")

    def broken(max_jobs: int, timeout_s: float, gather=None, shared_max=None) -> None:
        raise boom

    monkeypatch.setattr(server.jobs, "take_batch", broken)  # the model thread's loop, outside any request
    assert server.wait(WAIT_S) and server.failure is boom and failures == [boom]
    assert not server.running
