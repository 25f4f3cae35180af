"""Batched serving over loopback ZeroMQ: several clients' requests run as one batch, each robot gets its own
replies (partial ACTIONS, final ACTIONS or its own ERROR); a full queue answers BUSY; the STATS show the batches.

The fake model (events, no wall clock) checks the per-robot outcomes inside one batch; the tiny random pi0.5
policy checks that a batched chunk is the chunk the same request gets alone."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from robot_io.client import PolicyClient
from robot_io.protocol import Actions, CameraSpec, Error, ErrorCode, Infer, Stats, encode
from tests.server.conftest import PROMPT, STEPS, image, make_runtime, start_server
from tests.server.fake_runtime import WAIT_S, FakeRuntime, fake_infer, last_reply, start_fake_server
from vlash.errors import ConfigError
from vlash.runtime.metadata import policy_metadata
from vlash.server.config import ServerConfig
from vlash.server.server import PolicyServer
from vlash.server.stats import MAX_CLIENT_ROWS, ServerStats

H_POLICY = 50  # the micro policy's chunk length


def wait_pending(server, count: int) -> None:
    """Block (bounded) until `count` requests wait in the server's queue."""
    deadline = time.monotonic() + WAIT_S
    while server.counters()["pending"] != count:
        assert time.monotonic() < deadline, f"pending: {server.counters()['pending']}, expected {count}"
        time.sleep(0.005)


@pytest.fixture
def runtime():
    return FakeRuntime()


@pytest.fixture
def clients():
    opened: list[PolicyClient] = []

    def open_clients(server, count: int) -> list[PolicyClient]:
        for i in range(count):
            opened.append(PolicyClient(server.endpoint, timeout_s=WAIT_S, client_name=f"robot{i}"))
        for client in opened:
            client.connect()
        return opened

    yield open_clients
    for client in opened:
        client.close()


def blocked_batch(runtime: FakeRuntime, server, clients, blocker_id: int = 99) -> PolicyClient:
    """A first client's request that holds the model thread (until `runtime.release(blocker_id)`), so the requests
    sent next wait together and run as one batch."""
    blocker = clients[0]
    blocker.submit(fake_infer(blocker_id))
    runtime.wait_started(1)
    return blocker


def test_requests_waiting_together_run_as_one_batch_and_each_robot_gets_its_chunk(runtime, clients):
    server = start_fake_server(runtime, max_batch=4)
    try:
        blocker, *robots = clients(server, 4)
        blocked_batch(runtime, server, [blocker])
        for i, robot in enumerate(robots):
            robot.submit(fake_infer(10 * (i + 1)))
        wait_pending(server, 3)
        runtime.release(99)
        assert runtime.wait_started(4) == [99, 10, 20, 30]
        for rid in (10, 20, 30):
            runtime.release(rid)
        for i, robot in enumerate(robots):
            final = last_reply(robot, 10 * (i + 1))
            assert isinstance(final, Actions) and np.all(final.actions == 10.0 * (i + 1))
        counters = robots[0].stats()
        assert counters["served"] == 4 and counters["batches"] == 2
        assert (counters["batch_size_1"], counters["batch_size_3"], counters["batch_size_mean"]) == (1, 1, 2.0)
        assert counters["queue_wait_p50_ms"] > 0
        assert sum(key.startswith("client_") and key.endswith("_latency_p50_ms") for key in counters) == 4
    finally:
        server.stop()


def test_with_max_batch_one_requests_run_one_at_a_time(runtime, clients):
    server = start_fake_server(runtime, max_batch=1)
    try:
        blocker, a, b = clients(server, 3)
        blocked_batch(runtime, server, [blocker])
        a.submit(fake_infer(10))
        wait_pending(server, 1)  # a's request queued before b's: two robots' sockets reach the server in either order
        b.submit(fake_infer(20))
        wait_pending(server, 2)
        runtime.release(99)
        assert runtime.wait_started(2) == [99, 10]
        runtime.release(10)
        assert runtime.wait_started(3) == [99, 10, 20]
        runtime.release(20)
        assert isinstance(last_reply(b, 20), Actions) and isinstance(last_reply(a, 10), Actions)
        assert server.counters()["batch_size_1"] == 3
    finally:
        server.stop()


def test_a_diverged_row_is_an_error_for_its_robot_only(runtime, clients):
    runtime.outputs[20] = float("nan")
    server = start_fake_server(runtime, max_batch=4)
    try:
        blocker, a, b, c = clients(server, 4)
        blocked_batch(runtime, server, [blocker])
        for robot, rid in ((a, 10), (b, 20), (c, 30)):
            robot.submit(fake_infer(rid))
        wait_pending(server, 3)
        for rid in (99, 10, 20, 30):
            runtime.release(rid)
        error = last_reply(b, 20)
        assert isinstance(error, Error) and error.code == ErrorCode.INTERNAL and "NaN or inf" in error.message
        assert isinstance(last_reply(a, 10), Actions) and isinstance(last_reply(c, 30), Actions)
        assert server.counters()["batch_size_3"] == 1
        runtime.release(21)
        assert isinstance(b.infer(fake_infer(21)), Actions)  # the robot's next request is served
    finally:
        server.stop()


def test_a_model_failure_of_the_whole_batch_is_an_error_for_each_robot_and_serving_goes_on(runtime, clients):
    runtime.raises[20] = RuntimeError("device lost")
    server = start_fake_server(runtime, max_batch=4)
    try:
        blocker, a, b = clients(server, 3)
        blocked_batch(runtime, server, [blocker])
        a.submit(fake_infer(10))
        wait_pending(server, 1)  # a's request queued before b's: two robots' sockets reach the server in either order
        b.submit(fake_infer(20))
        wait_pending(server, 2)
        runtime.release(99)
        for robot, rid in ((a, 10), (b, 20)):
            reply = last_reply(robot, rid)
            assert isinstance(reply, Error) and reply.code == ErrorCode.INTERNAL and "device lost" in reply.message
        runtime.release(11)
        assert isinstance(a.infer(fake_infer(11)), Actions) and server.running
    finally:
        server.stop()


def test_a_superseded_request_inside_a_running_batch_is_dropped_and_the_others_finish(runtime, clients):
    server = start_fake_server(runtime, max_batch=4)
    try:
        blocker, a, b, c = clients(server, 4)
        blocked_batch(runtime, server, [blocker])
        for robot, rid in ((a, 10), (b, 20), (c, 30)):
            robot.submit(fake_infer(rid))
        wait_pending(server, 3)
        runtime.release(99)
        runtime.wait_started(4)  # the batch [10, 20, 30] runs, held at its first stage
        b.submit(fake_infer(21))  # newest wins: 20 is dropped from the running batch
        dropped = last_reply(b, 20)
        assert isinstance(dropped, Error) and dropped.code == ErrorCode.DROPPED
        for rid in (10, 30, 21):
            runtime.release(rid)
        assert isinstance(last_reply(a, 10), Actions) and isinstance(last_reply(c, 30), Actions)
        served = last_reply(b, 21)  # b's newest request runs once its cancelled one is done
        assert isinstance(served, Actions) and np.all(served.actions == 21.0)
        started = runtime.wait_started(5)  # the batch's rows in the order the robots' sockets reached the server
        assert started[0] == 99 and sorted(started[1:4]) == [10, 20, 30] and started[4] == 21
        counters = server.counters()
        assert (counters["served"], counters["dropped"], counters["errors"]) == (4, 1, 0)
    finally:
        server.stop()


def test_a_full_queue_refuses_a_new_client_busy_and_accepts_a_replacement(runtime, clients):
    server = start_fake_server(runtime, max_batch=4, max_pending=2)
    try:
        blocker, a, b, c = clients(server, 4)
        blocked_batch(runtime, server, [blocker])
        a.submit(fake_infer(10))
        b.submit(fake_infer(20))
        wait_pending(server, 2)
        c.submit(fake_infer(30))
        busy = last_reply(c, 30)
        assert isinstance(busy, Error) and busy.code == ErrorCode.BUSY and "2 requests waiting" in busy.message
        a.submit(fake_infer(11))  # replaces a's pending request: accepted although the queue is full
        assert last_reply(a, 10).code == ErrorCode.DROPPED
        for rid in (99, 11, 20):
            runtime.release(rid)
        assert isinstance(last_reply(a, 11), Actions) and isinstance(last_reply(b, 20), Actions)
        counters = server.counters()
        assert (counters["busy"], counters["errors"], counters["dropped"], counters["served"]) == (1, 1, 1, 3)
        assert (counters["busy_zeromq"], counters["busy_in_process"]) == (1, 0)  # by transport (server.shares)
        assert "busy 1" in server.stats.line()
    finally:
        server.stop()


# --- STATS and config (no server) -------------------------------------------------------------------------


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_batch_stats_are_a_histogram_a_mean_and_queue_wait_percentiles():
    stats = ServerStats()
    for waits in ([1.0], [2.0, 4.0, 6.0], [3.0, 5.0, 7.0]):
        stats.batch(waits)
    out = stats.snapshot()
    assert (out["batches"], out["batch_size_1"], out["batch_size_3"]) == (3, 1, 2) and "batch_size_2" not in out
    assert out["batch_size_mean"] == pytest.approx(7 / 3) and out["queue_wait_p50_ms"] == pytest.approx(4.0)
    assert "batch 2.33" in stats.line()


def test_per_client_latency_is_forgotten_with_the_client_and_the_reply_stays_within_the_protocol():
    clock = FakeClock()
    stats = ServerStats(client_idle_s=60.0, max_clients=1024, clock=clock)
    stats.client(b"\x00old")
    stats.served(50.0, 5.0, b"\x00old")
    clock.now += 61.0
    for i in range(MAX_CLIENT_ROWS + 10):
        identity = i.to_bytes(5, "big") if i else b"x" * 200  # a client-chosen long identity is hashed
        stats.client(identity)
        stats.served(float(i + 1), 1.0, identity)
        stats.served(float(i + 3), 1.0, identity)
    out = stats.snapshot()
    assert b"\x00old" not in stats._client_ms and len(stats._client_ms) == MAX_CLIENT_ROWS + 10
    newest = (MAX_CLIENT_ROWS + 9).to_bytes(5, "big").hex()
    assert out[f"client_{newest}_latency_p50_ms"] == pytest.approx(MAX_CLIENT_ROWS + 11.0)
    assert sum(key.endswith("_latency_p50_ms") and key.startswith("client_") for key in out) == MAX_CLIENT_ROWS
    encode(Stats(out))  # within the protocol's 256 counters, keys of <= 64 chars


@pytest.mark.parametrize(
    ("field", "value"),
    [("max_batch", 0), ("max_batch", 65), ("max_batch", 2.0), ("batch_wait_ms", -1.0), ("batch_wait_ms", float("nan")),
     ("batch_wait_ms", 1001), ("batch_wait_ms", True), ("max_pending", 0), ("max_pending", "8")],
)  # fmt: skip
def test_batching_settings_are_checked(field, value):
    with pytest.raises(ConfigError, match=field):
        ServerConfig(**{field: value})
    assert ServerConfig(max_batch=1, batch_wait_ms=0, max_pending=1).max_batch == 1


def test_max_batch_is_capped_by_the_engines_fixed_batch(runtime):
    runtime.max_batch = 2
    server = start_fake_server(runtime, max_batch=8)
    try:
        assert server.max_batch == 2
    finally:
        server.stop()


def test_serve_flags_set_the_batching_settings_and_bad_values_are_one_line_errors(capsys):
    from vlash.cli.main import parse_args
    from vlash.cli.serve_cmd import check_args

    preset = ["serve", "--policy", "pi05-tiny", "--random-weights"]
    config = check_args(
        parse_args([*preset, "--max-batch", "3", "--batch-wait-ms", "2.5", "--max-pending", "9"])
    ).config
    assert (config.max_batch, config.batch_wait_ms, config.max_pending) == (3, 2.5, 9)
    default = check_args(parse_args(preset)).config
    assert (default.max_batch, default.batch_wait_ms, default.max_pending) == (8, 5.0, 64)
    with pytest.raises(ConfigError, match="batch-wait-ms must be in"):
        check_args(parse_args([*preset, "--batch-wait-ms", "5000"]))
    with pytest.raises(ConfigError, match="--max-batch must be an int in"):
        check_args(parse_args([*preset, "--max-batch", "0"]))
    with pytest.raises(SystemExit):  # not a number: argparse's own one-line error
        parse_args([*preset, "--max-batch", "two"])
    assert "--max-batch" in capsys.readouterr().err


# --- the tiny random pi0.5 policy -------------------------------------------------------------------------


def policy_infer(metadata, request_id: int, seed: int, **kw) -> Infer:
    images = {c.name: image(c.height, seed=request_id) for c in metadata.cameras if c.name != "ghost"}
    state = np.array([0.5, -0.25 * request_id], np.float32)
    return Infer(request_id, request_id, time.time_ns(), PROMPT, images, state, seed=seed, **kw)


def hold_first_batch(server, pending: int) -> threading.Event:
    """The server's first batch waits (bounded) until `pending` requests are queued behind it, so they run as one
    batch after it; the returned event is set once the first batch started."""
    run, started = server.runtime.stream, threading.Event()

    def held(requests, cancelled=None, pace=None):
        if not started.is_set():
            started.set()
            deadline = time.monotonic() + WAIT_S
            while len(server.jobs) < pending and time.monotonic() < deadline:
                time.sleep(0.005)
        return run(requests, cancelled, pace)

    server.runtime.stream = held
    return started


def replies_until_final(client: PolicyClient, request_id: int) -> list[Actions | Error]:
    replies: list[Actions | Error] = []
    deadline = time.monotonic() + 3 * WAIT_S
    while time.monotonic() < deadline:
        message = client.poll(0.2)
        if message is not None and message.request_id == request_id:
            replies.append(message)
            if isinstance(message, Error) or message.final:
                return replies
    raise AssertionError(f"no last reply to request {request_id}; got {replies}")


def run_in_a_held_batch(server, infers: list[Infer]) -> dict[int, list[Actions | Error]]:
    """Send infers[0] from one client, then the others from one client each while it runs: they run as one batch.
    Returns each request's replies up to its last."""
    started = hold_first_batch(server, len(infers) - 1)
    clients = [PolicyClient(server.endpoint, timeout_s=3 * WAIT_S, client_name=f"arm{i}") for i in range(len(infers))]
    try:
        for client in clients:
            client.connect()
        clients[0].submit(infers[0])
        assert started.wait(WAIT_S)
        for client, infer in zip(clients[1:], infers[1:], strict=True):
            client.submit(infer)
        return {i.request_id: replies_until_final(c, i.request_id) for c, i in zip(clients, infers, strict=True)}
    finally:
        for client in clients:
            client.close()


def test_batched_chunks_equal_each_request_run_alone_and_partials_still_stream(policy_dir):
    server = start_server(policy_dir, max_batch=4, batch_wait_ms=1000.0)
    meta = server.metadata
    prefix = np.array([[0.1, 0.2], [0.3, 0.4]], np.float32)
    infers = [
        policy_infer(meta, 1, seed=1),
        policy_infer(meta, 2, seed=2),
        policy_infer(meta, 3, seed=3, schedule="horizon-aware", prefix=prefix),
        policy_infer(meta, 4, seed=4, schedule="horizon-aware", prefix=prefix, execution_horizon=10),
    ]
    try:
        replies = run_in_a_held_batch(server, infers)
        counters = server.counters()
    finally:
        server.stop()
    assert counters["batch_size_1"] == 1 and counters["batch_size_3"] == 1 and counters["batch_size_mean"] == 2.0
    reference = make_runtime(policy_dir)
    for infer in infers:
        *partial, final = replies[infer.request_id]
        assert isinstance(final, Actions) and final.final, final
        alone = reference.run(infer)
        assert len(final.actions) == alone.final_rows
        np.testing.assert_allclose(final.actions, alone.actions[: alone.final_rows], rtol=1e-5, atol=1e-5)
        if infer.schedule == "horizon-aware":  # rows final early stream as partial ACTIONS, contiguous
            assert partial and partial[0].start == 2
            stop = 2
            for piece in partial:
                assert piece.start == stop and not piece.final
                np.testing.assert_array_equal(final.actions[stop : stop + len(piece.actions)], piece.actions)
                stop += len(piece.actions)
        else:
            assert partial == []
    assert len(replies[4][-1].actions) < H_POLICY  # the early stop: a short final chunk, in the batch too


def test_a_request_the_policy_refuses_is_an_error_for_its_robot_only(policy_dir):
    """The ghost camera passes the socket checks (METADATA lists it) but the policy has no such camera."""
    runtime = make_runtime(policy_dir)
    meta = policy_metadata(runtime, "micro", "torch", "fp32")
    meta.cameras = [*meta.cameras, CameraSpec("ghost", 28, 28)]
    config = ServerConfig(bind="tcp://127.0.0.1:0", max_batch=4, batch_wait_ms=1000.0)
    server = PolicyServer(runtime, meta, config)
    server.start()
    bad = policy_infer(meta, 3, seed=3)
    bad.images = {**bad.images, "ghost": image(28)}
    try:
        replies = run_in_a_held_batch(server, [policy_infer(meta, 1, seed=1), policy_infer(meta, 2, seed=2), bad,
                                               policy_infer(meta, 4, seed=4)])  # fmt: skip
        counters = server.counters()
    finally:
        server.stop()
    (error,) = replies[3]
    assert isinstance(error, Error) and error.code == ErrorCode.BAD_VALUE and "ghost" in error.message
    assert all(isinstance(replies[rid][-1], Actions) for rid in (1, 2, 4))
    assert counters["batch_size_3"] == 1 and (counters["served"], counters["errors"]) == (3, 1)


def test_an_early_stopped_request_is_answered_while_the_rest_of_its_batch_still_runs(policy_dir):
    """Its final ACTIONS goes out as its row stops, not when the batch ends: counted from the batch's start, it is
    answered before the constant request of the same batch finished (emulated device time makes each step long)."""
    server = start_server(policy_dir, max_batch=4, batch_wait_ms=1000.0, inject_latency_ms=200.0)
    meta = server.metadata
    infers = [
        policy_infer(meta, 1, seed=1),  # runs first, alone: the next two wait behind it and run as one batch
        policy_infer(meta, 2, seed=2, schedule="horizon-aware", execution_horizon=2),
        policy_infer(meta, 3, seed=3),
    ]
    try:
        replies = run_in_a_held_batch(server, infers)
        counters = server.counters()
    finally:
        server.stop()
    assert counters["batch_size_2"] == 1 and counters["served"] == 3
    early, late = replies[2][-1], replies[3][-1]
    assert isinstance(early, Actions) and early.final and isinstance(late, Actions) and late.final
    steps = [sum(key.startswith("step_") for key in reply.timing_ms) for reply in (early, late)]
    assert steps[0] < steps[1] == STEPS  # the early stop
    answered_in_batch_ms = early.timing_ms["server_ms"] - early.timing_ms["queue_ms"]
    assert answered_in_batch_ms < late.timing_ms["total_ms"]  # answered at batch end, it would be >= this
