"""Newest request wins per client, within the cancel budget, over a live server (fake model gated by events)."""

from __future__ import annotations

import pytest

from robot_io.client import PolicyClient
from robot_io.protocol import Actions, Error, ErrorCode
from tests.server.fake_runtime import WAIT_S, FakeRuntime, fake_infer, last_reply, start_fake_server


@pytest.fixture
def runtime():
    return FakeRuntime()


def serve(runtime: FakeRuntime, **config):
    server = start_fake_server(runtime, **config)
    return server, PolicyClient(server.endpoint, timeout_s=WAIT_S)


def test_a_client_sending_faster_than_one_inference_still_gets_chunks(runtime):
    server, client = serve(runtime)  # default budget: one cancel in a row
    try:
        client.submit(fake_infer(1))
        runtime.wait_started(1)
        client.submit(fake_infer(2))  # newest wins: 1 is cancelled
        dropped = last_reply(client, 1)
        assert isinstance(dropped, Error) and dropped.code == ErrorCode.DROPPED
        assert runtime.wait_started(2) == [1, 2]
        client.submit(fake_infer(3))  # budget spent: 2 runs on, 3 waits
        client.submit(fake_infer(4))  # replaces the waiting 3
        assert last_reply(client, 3).code == ErrorCode.DROPPED
        runtime.release(2)
        served = last_reply(client, 2)
        assert isinstance(served, Actions) and served.final and served.actions[0, 0] == 2.0
        assert runtime.wait_started(3) == [1, 2, 4]
        runtime.release(4)
        assert isinstance(last_reply(client, 4), Actions)
        counters = client.stats()
        assert (counters["served"], counters["dropped"], counters["errors"]) == (2, 2, 0)
    finally:
        client.close()
        server.stop()


def test_with_no_cancel_budget_the_running_request_always_finishes(runtime):
    server, client = serve(runtime, max_consecutive_cancels=0)
    try:
        client.submit(fake_infer(1))
        runtime.wait_started(1)
        client.submit(fake_infer(2))
        runtime.release(1)
        assert isinstance(last_reply(client, 1), Actions)
        assert runtime.wait_started(2) == [1, 2]
        runtime.release(2)
        assert isinstance(last_reply(client, 2), Actions)
    finally:
        client.close()
        server.stop()
