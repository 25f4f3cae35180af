"""The horizon-aware early stop: a horizon-aware request with an execution horizon s and a prefix of c rows is
sampled only until rows [0, c + s) are final, in the runtime and on the served path (ZeroMQ and openpi).

With the micro policy (H = 50) and STEPS = 4 the horizon-aware grid finalises, with a prefix of 2, rows [0, 3) after
step 0, [0, 10) after step 1, [0, 27) after step 2 and all 50 after step 3.
"""

from __future__ import annotations

import time

import numpy as np
import pytest
from websockets.sync.client import connect

from robot_io.client import PolicyClient
from robot_io.protocol import Actions, Error, Infer
from tests.server.conftest import PROMPT, STEPS, image, make_runtime, start_server
from vlash.runtime.policy_runtime import PolicyRuntime, make_infer
from vlash.server.config import OpenpiConfig
from vlash.server.openpi_codec import packb, unpackb
from vlash.server.openpi_endpoint import OpenpiEndpoint

H = 50
PREFIX = np.array([[0.1, 0.7], [0.2, 0.3]], np.float32)
STATE = np.array([0.5, 1.25], np.float32)
TIMEOUT_S = 30.0  # per reply; a busy 2-core machine


@pytest.fixture(scope="module")
def runtime(policy_dir) -> PolicyRuntime:
    return make_runtime(policy_dir)


def _request(runtime: PolicyRuntime, **kw) -> Infer:
    cam = runtime.config.camera_names[0]
    fields = {"prefix": PREFIX, "schedule": "horizon-aware", "seed": 7} | kw
    return make_infer({cam: image(runtime)}, STATE, PROMPT, **fields)


# --- the runtime ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("s", "rows", "steps"), [(1, 3, 1), (8, 10, 2), (5, 10, 2), (20, 27, 3)])
def test_the_sampler_stops_once_prefix_plus_s_rows_are_final(runtime, s, rows, steps):
    """m = every row final at the stop: c + s, or up to the end of the step's group (s = 5: rows 7..9 came too)."""
    full = runtime.run(_request(runtime))
    short = runtime.run(_request(runtime, execution_horizon=s))
    assert runtime.rows_needed(_request(runtime, execution_horizon=s)) == len(PREFIX) + s
    assert (short.final_rows, short.num_steps, len(short.step_ms)) == (rows, steps, steps)
    assert (full.final_rows, full.num_steps) == (H, STEPS)
    # the first steps run on identical inputs (seed, tau grid), so the final rows are the full run's, bit for bit
    assert short.actions[:rows].tobytes() == full.actions[:rows].tobytes()
    assert short.actions.shape == (H, 2) and np.isnan(short.actions[rows:]).all()  # never sampled: no value
    assert (short.final_at_step[rows:] == -1).all() and (short.final_at_step[:rows] == full.final_at_step[:rows]).all()


def test_rows_past_the_chunk_are_clamped_to_h_and_sample_everything(runtime):
    result = runtime.run(_request(runtime, execution_horizon=H - 1))  # 2 + 49 > 50
    assert runtime.rows_needed(_request(runtime, execution_horizon=H - 1)) == H
    assert (result.final_rows, result.num_steps) == (H, STEPS) and np.isfinite(result.actions).all()


@pytest.mark.parametrize(
    "change",
    [
        {"schedule": "constant", "execution_horizon": 3},  # the constant schedule finalises nothing early
        {"execution_horizon": None},  # no horizon: e.g. an openpi request
        {"schedule": None, "execution_horizon": 3},  # the runtime's default (constant here)
    ],
)
def test_other_requests_sample_the_whole_chunk(runtime, change):
    request = _request(runtime, **change)
    result = runtime.run(request)
    assert runtime.rows_needed(request) == H
    assert (result.final_rows, result.num_steps) == (H, STEPS) and np.isfinite(result.actions).all()


def test_the_runtimes_default_schedule_decides_for_a_request_that_names_none(policy_dir):
    horizon_aware = make_runtime(policy_dir, schedule="horizon-aware")
    result = horizon_aware.run(_request(horizon_aware, schedule=None, execution_horizon=1))
    assert (result.final_rows, result.num_steps) == (3, 1)


def test_an_execution_horizon_below_one_is_refused(runtime):
    with pytest.raises(ValueError, match="execution_horizon must be >= 1"):
        runtime.rows_needed(_request(runtime, execution_horizon=0))


# --- served over ZeroMQ ----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def server(policy_dir):
    """Server default: the horizon-aware schedule (requests naming none use it)."""
    srv = start_server(policy_dir, schedule="horizon-aware")
    yield srv
    srv.stop()


def _infer(server, request_id: int, **kw) -> Infer:
    cam = server.metadata.cameras[0]
    return Infer(
        request_id, 100 + request_id, time.time_ns(), PROMPT, {cam.name: image(cam.height)}, STATE, seed=1, **kw
    )


def _replies(client: PolicyClient, request_id: int) -> list[Actions]:
    """The replies to `request_id` up to its final ACTIONS (an ERROR fails the test); bounded wait."""
    replies: list[Actions] = []
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:
        message = client.poll(0.5)
        if message is None or message.request_id != request_id:
            continue
        assert not isinstance(message, Error), message
        replies.append(message)
        if message.final:
            return replies
    raise AssertionError(f"no final ACTIONS for request {request_id}; got {replies}")


def _steps_run(final: Actions) -> int:
    return sum(key.startswith("step_") for key in final.timing_ms)


def test_the_final_message_carries_prefix_plus_s_rows_equal_to_the_whole_chunks(server):
    with PolicyClient(server.endpoint, timeout_s=TIMEOUT_S) as client:
        client.submit(_infer(server, 1, prefix=PREFIX))  # the whole chunk: no execution horizon
        *_, whole = _replies(client, 1)
        served_before = client.stats()["served"]
        client.submit(_infer(server, 2, prefix=PREFIX, execution_horizon=8))
        *partial, final = _replies(client, 2)
        assert client.stats()["served"] == served_before + 1
    assert whole.actions.shape == (H, 2) and _steps_run(whole) == STEPS
    assert (final.start, final.chunk_length, final.actions.shape) == (0, H, (len(PREFIX) + 8, 2))
    assert final.actions.tobytes() == whole.actions[: len(PREFIX) + 8].tobytes()
    assert final.actions[: len(PREFIX)].tobytes() == PREFIX.tobytes()
    assert _steps_run(final) == 2 < STEPS  # two of four denoise steps ran
    # partial messages as for a whole chunk: each group but the last, which the final message carries
    assert [(m.start, len(m.actions), m.final) for m in partial] == [(2, 1, False)]
    np.testing.assert_array_equal(partial[0].actions, final.actions[2:3])


def test_a_constant_schedule_request_with_an_execution_horizon_gets_the_whole_chunk(server):
    with PolicyClient(server.endpoint, timeout_s=TIMEOUT_S) as client:
        final = client.infer(_infer(server, 3, prefix=PREFIX, schedule="constant", execution_horizon=8), TIMEOUT_S)
    assert final.actions.shape == (H, 2) and _steps_run(final) == STEPS


def test_a_request_past_the_chunk_end_gets_the_whole_chunk(server):
    with PolicyClient(server.endpoint, timeout_s=TIMEOUT_S) as client:
        final = client.infer(_infer(server, 4, prefix=PREFIX, execution_horizon=H), TIMEOUT_S)
    assert final.actions.shape == (H, 2) and _steps_run(final) == STEPS


# --- the openpi endpoint ---------------------------------------------------------------------------------------


def test_an_openpi_request_gets_the_whole_chunk_from_a_horizon_aware_server(server):
    """openpi requests carry no execution horizon: H rows even where a ZeroMQ request with one gets fewer."""
    cam = server.metadata.cameras[0]
    observation = {"images": {cam.name: image(cam.height)}, "state": STATE, "prompt": PROMPT, "seed": 1}
    with (
        OpenpiEndpoint(server, OpenpiConfig(port=0, infer_timeout_s=TIMEOUT_S)) as endpoint,
        connect(endpoint.url, compression=None, max_size=None, open_timeout=TIMEOUT_S) as ws,
    ):
        ws.recv(timeout=TIMEOUT_S)  # the metadata frame
        ws.send(packb(observation))
        reply = unpackb(ws.recv(timeout=TIMEOUT_S))
    assert reply["actions"].shape == (H, 2)
    assert sum(key.startswith("step_") for key in reply["policy_timing"]) == STEPS
    with PolicyClient(server.endpoint, timeout_s=TIMEOUT_S) as client:
        short = client.infer(_infer(server, 5, execution_horizon=1), TIMEOUT_S)
        whole = client.infer(_infer(server, 6), TIMEOUT_S)
    assert short.actions.shape == (1, 2)
    np.testing.assert_array_equal(reply["actions"], whole.actions)
