"""The policy server over loopback ZeroMQ with the robot-side PolicyClient."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from robot_io.client import PolicyClient
from robot_io.protocol import Actions, Error, ErrorCode, Infer
from tests.server.conftest import PROMPT, STEPS, image, make_runtime, start_server
from vlash.errors import ConfigError, ServerError
from vlash.runtime.metadata import policy_metadata
from vlash.server.config import ServerConfig
from vlash.server.server import PolicyServer

TIMEOUT_S = 10.0


def _infer(server, request_id: int, **kw) -> Infer:
    meta = server.metadata
    images = {c.name: image(c.height, seed=request_id) for c in meta.cameras}
    state = np.full(meta.state_dim, 0.5, np.float32)
    return Infer(request_id, 100 + request_id, time.time_ns(), PROMPT, images, state, seed=1, **kw)


def _collect(client: PolicyClient, request_id: int) -> list[Actions | Error]:
    """Replies to `request_id` up to its final ACTIONS or its ERROR."""
    replies = []
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:
        message = client.poll(0.5)
        if message is None or message.request_id != request_id:
            continue
        replies.append(message)
        if isinstance(message, Error) or message.final:
            return replies
    raise AssertionError(f"no final reply to request {request_id}; got {replies}")


@pytest.fixture
def client(server):
    with PolicyClient(server.endpoint, timeout_s=TIMEOUT_S, client_name="test") as c:
        yield c


def test_handshake_returns_the_policy_metadata(client, server):
    meta = client.connect()
    assert (meta.state_dim, meta.action_dim, meta.chunk_length, meta.num_steps) == (2, 2, 50, STEPS)
    assert [c.name for c in meta.cameras] == ["base_0_rgb"] and meta.cameras[0].height == 28
    assert meta.engine == "torch" and meta.schedule == "constant" and meta.relative_actions is False


def test_horizon_aware_request_streams_partial_then_final(client, server):
    prefix = np.array([[0.1, 0.2], [0.3, 0.4]], np.float32)
    client.submit(_infer(server, 1, schedule="horizon-aware", prefix=prefix))
    *partial, final = _collect(client, 1)
    assert partial and all(isinstance(m, Actions) and not m.final for m in partial)
    assert partial[0].start == 2 and final.final and final.start == 0 and final.actions.shape == (50, 2)
    stop = 2
    for m in partial:  # contiguous and identical to the final chunk
        assert m.start == stop and m.step_index == 101
        np.testing.assert_array_equal(final.actions[m.start : m.start + len(m.actions)], m.actions)
        stop += len(m.actions)
    assert final.actions[:2].tobytes() == prefix.tobytes()
    keys = {"queue_ms", "preprocess_ms", "prefill_ms", "postprocess_ms", "total_ms"} | {
        f"step_{i}_ms" for i in range(4)
    }
    assert keys <= set(final.timing_ms)


def test_guided_request_with_a_short_leftover_is_served(client, server):
    leftover = np.full((20, 2), 1.0, np.float32)
    client.submit(_infer(server, 5, guidance=leftover, delay_steps=3, execution_horizon=30))
    (final,) = _collect(client, 5)
    assert isinstance(final, Actions) and final.final and np.isfinite(final.actions).all()


def test_two_clients_are_served_at_once(server):
    results: dict[str, Actions] = {}

    def run(name: str, request_id: int) -> None:
        with PolicyClient(server.endpoint, timeout_s=TIMEOUT_S, client_name=name) as c:
            results[name] = c.infer(_infer(server, request_id), timeout_s=TIMEOUT_S)

    threads = [threading.Thread(target=run, args=(f"c{i}", 10 + i)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(2 * TIMEOUT_S)
    assert sorted((n, r.request_id) for n, r in results.items()) == [("c0", 10), ("c1", 11)]
    assert all(r.final and r.actions.shape == (50, 2) for r in results.values())


@pytest.mark.parametrize(
    ("change", "code"),
    [
        ({"images": {"wrist": np.zeros((28, 28, 3), np.uint8)}}, ErrorCode.UNKNOWN_CAMERA),
        ({"state": np.zeros(3, np.float32)}, ErrorCode.BAD_VALUE),
        ({"prefix": np.zeros((50, 2), np.float32)}, ErrorCode.BAD_VALUE),
        ({"prefix": np.zeros((2, 3), np.float32)}, ErrorCode.BAD_VALUE),
        ({"guidance": np.zeros((10, 2), np.float32), "schedule": "horizon-aware"}, ErrorCode.BAD_VALUE),
        ({"guidance": np.zeros((10, 2), np.float32), "delay_steps": 30, "execution_horizon": 30}, ErrorCode.BAD_VALUE),
    ],
)
def test_requests_that_do_not_fit_the_policy_get_an_error(client, server, change, code):
    infer = _infer(server, 20)
    for key, value in change.items():
        setattr(infer, key, value)
    client.submit(infer)
    (reply,) = _collect(client, 20)
    assert isinstance(reply, Error) and reply.code == code and reply.request_id == 20


def test_ping_stats_and_reset(client, server):
    assert 0 < client.ping() < TIMEOUT_S * 1e3
    before = client.stats()
    assert {"served", "dropped", "errors", "clients", "pending"} <= set(before)
    client.infer(_infer(server, 30), timeout_s=TIMEOUT_S)
    after = client.stats()
    assert after["served"] == before["served"] + 1 and after["latency_p50_ms"] > 0
    client.reset()
    assert client.stats()["resets"] == after["resets"] + 1


@pytest.fixture(scope="module")
def slow_server(policy_dir):
    srv = start_server(policy_dir, inject_latency_ms=400.0)
    yield srv
    srv.stop()


def test_the_injected_latency_is_reported_apart_in_the_timing(slow_server, server, client):
    """`injected_ms`: the emulated device time a reply waited (all of it: a wait never ends early unless the request
    is cancelled), so a slower chunk can be told apart from a slower policy (`vlash demo --inject-latency-ms`)."""
    assert "injected_ms" not in client.infer(_infer(server, 1), timeout_s=TIMEOUT_S).timing_ms  # nothing injected
    with PolicyClient(slow_server.endpoint, timeout_s=TIMEOUT_S, client_name="slow") as slow:
        timing = slow.infer(_infer(slow_server, 2), timeout_s=TIMEOUT_S).timing_ms
    assert 399.9 <= timing["injected_ms"] < timing["server_ms"]


def test_a_request_is_never_dropped_for_another_clients(slow_server):
    """Newest wins per client only: two clients' requests, queued at once, are both served."""
    with (
        PolicyClient(slow_server.endpoint, timeout_s=TIMEOUT_S, client_name="a") as a,
        PolicyClient(slow_server.endpoint, timeout_s=TIMEOUT_S, client_name="b") as b,
    ):
        dropped = a.stats()["dropped"]
        a.submit(_infer(slow_server, 1))
        b.submit(_infer(slow_server, 1))
        for client in (a, b):
            final = None
            deadline = time.monotonic() + 2 * TIMEOUT_S
            while final is None and time.monotonic() < deadline:
                message = client.poll(0.5)
                assert not isinstance(message, Error), message
                final = message if message is not None and message.final else None
            assert final is not None and final.request_id == 1
        assert a.stats()["dropped"] == dropped


def test_reset_forgets_the_running_request(slow_server):
    with PolicyClient(slow_server.endpoint, timeout_s=TIMEOUT_S) as c:
        served = c.stats()["served"]
        c.submit(_infer(slow_server, 7))
        deadline = time.monotonic() + TIMEOUT_S
        while c.stats()["pending"] and time.monotonic() < deadline:  # until the model thread has taken it
            pass
        c.reset()
        final = c.infer(_infer(slow_server, 8), timeout_s=TIMEOUT_S)
        assert final.request_id == 8 and c.stats()["served"] == served + 1  # request 7 never finished


def test_a_taken_endpoint_is_a_config_error_and_stop_is_idempotent(server, policy_dir):
    with pytest.raises(ConfigError, match="cannot bind"):
        start_server(policy_dir, bind=server.endpoint)
    other = start_server(policy_dir)
    other.stop()
    other.stop()
    assert not other.running


def test_warm_up_runs_on_the_thread_that_serves(policy_dir):
    runtime = make_runtime(policy_dir)
    threads = []
    run = runtime.stream

    def recording(*args, **kwargs):
        threads.append(threading.current_thread().name)
        return run(*args, **kwargs)

    runtime.stream = recording  # warm_up's runtime.run and served batches both go through stream()
    config = ServerConfig(bind="tcp://127.0.0.1:0", warm_up_runs=2)
    with PolicyServer(runtime, policy_metadata(runtime, "micro", "torch", "fp32"), config) as server:
        assert server.warm_up_s > 0 and len(threads) == 2  # start() returned after the warm-up
        with PolicyClient(server.endpoint, timeout_s=TIMEOUT_S) as c:
            c.infer(_infer(server, 1), timeout_s=TIMEOUT_S)
    assert len(threads) == 3 and set(threads) == {"vlash-model"}, threads


def test_a_failing_warm_up_stops_the_server_with_a_server_error(policy_dir):
    runtime = make_runtime(policy_dir)

    def broken(*args, **kwargs):
        raise RuntimeError("device lost")

    runtime.stream = broken
    server = PolicyServer(
        runtime,
        policy_metadata(runtime, "micro", "torch", "fp32"),
        ServerConfig(bind="tcp://127.0.0.1:0", warm_up_runs=1),
    )
    with pytest.raises(ServerError, match="warm-up failed.*device lost"):
        server.start()
    assert not server.running
    with pytest.raises(ConfigError, match="warm_up_runs"):
        ServerConfig(warm_up_runs=-1)
