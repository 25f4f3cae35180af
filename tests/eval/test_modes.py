"""Execution modes: request timing, the state/prefix each sends, switch points, streaming delay."""

from __future__ import annotations

import numpy as np
import pytest

from tests.eval.fake_env import RampEnv, RecordingPolicy
from vlash.errors import ConfigError
from vlash.eval.episode import EpisodeRunner
from vlash.eval.metrics import boundary_jump, episode_metrics, wilson_interval
from vlash.eval.modes import (
    ExecutionConfig,
    ensemble_weights,
    faster_busy_steps,
    faster_switch_delay,
    final_index_steps,
)
from vlash.eval.policies import OraclePolicy


def _run(mode: str, delay: int, s: int = 10, q: int = 1):
    env = RampEnv()
    policy = RecordingPolicy(OraclePolicy(horizon=50))
    trace = EpisodeRunner(env, policy, ExecutionConfig(mode, delay, execution_horizon=s, quantization=q)).run(0)
    return trace, policy.requests


def test_sync_waits_d_steps_per_chunk():
    trace, requests = _run("sync", delay=3, s=10)
    assert [k for k, _ in requests][:3] == [0, 13, 26]  # request, wait 3, run 10, request ...
    assert trace.switch_steps[:3] == [3, 16, 29]
    assert trace.hold_steps >= 3 * 3


@pytest.mark.parametrize("mode", ["naive", "vlash", "prefix", "rtc"])
def test_async_modes_request_d_steps_before_the_switch(mode):
    trace, requests = _run(mode, delay=4, s=10)
    steps = [k for k, _ in requests]
    assert steps[:4] == [0, 10, 20, 30]  # first chunk at 4 (after the initial wait), then every 10
    assert trace.switch_steps[:4] == [4, 14, 24, 34]
    assert trace.hold_steps == 4  # only the very first wait


def test_vlash_sends_the_future_state_and_naive_the_stale_one():
    _, naive = _run("naive", delay=4)
    _, vlash = _run("vlash", delay=4)
    k, request = vlash[1]
    assert request.start_offset == 4
    # the future state is the action commanded just before the switch at k + 4
    first_chunk = OraclePolicy().plan(vlash[0][1], RampEnv())
    np.testing.assert_allclose(request.state, first_chunk.actions[k + 4 - 1 - 4])
    assert naive[1][1].start_offset == 0 and naive[1][1].state[0] < request.state[0]


def test_naive_stale_state_jumps_at_the_boundary_and_vlash_does_not():
    naive, _ = _run("naive", delay=4)
    vlash, _ = _run("vlash", delay=4)
    commands = lambda t: np.stack(t.commands)  # noqa: E731
    # switches while the arm is moving (before the goal, where the ramp itself stops)
    assert boundary_jump(commands(vlash), vlash.switch_steps[1:4]) < 1e-6
    assert boundary_jump(commands(naive), naive.switch_steps[1:4]) > 0.04  # replanned from the lagging state
    assert naive.steps > vlash.steps  # and it costs time


def test_prefix_modes_send_the_actions_executed_during_the_delay():
    trace, requests = _run("prefix", delay=3)
    k, request = requests[1]
    np.testing.assert_array_equal(request.prefix, np.stack(trace.commands)[k : k + 3])
    assert request.schedule == "constant"
    _, faster = _run("faster", delay=3)
    assert faster[1][1].schedule == "horizon-aware" and len(faster[1][1].prefix) == 1


def test_faster_switches_after_one_denoise_steps_share_of_the_delay():
    cfg = ExecutionConfig("faster", 4, execution_horizon=10, prefill_fraction=0.15, num_steps=10)
    assert faster_switch_delay(cfg) == 1  # 4 * (0.15 + 0.85 / 10) = 0.94 steps
    slow_prefill = ExecutionConfig("faster", 4, execution_horizon=10, prefill_fraction=0.6)
    assert faster_switch_delay(slow_prefill) == 3  # 4 * (0.6 + 0.04) = 2.56 steps
    assert faster_switch_delay(ExecutionConfig("faster", 0)) == 0
    steps = final_index_steps(10, 50, prefix_len=2)
    assert steps[2] == 0 and steps[-1] == 9 and (steps[:2] == -1).all() and (np.diff(steps[2:]) >= 0).all()
    trace, requests = _run("faster", delay=4)
    assert [k for k, _ in requests][1:3] == [13, 23]  # request 1 step before the switch, not 4


def test_faster_stops_sampling_early_so_it_can_replan_faster_than_d():
    # d = 4, s = 2: the 2 new actions [1, 3) are final after 2 of 10 denoise steps: 4 * (0.15 + 0.85 * 0.2)
    # = 1.28 control steps, so the engine is free after 2 steps and a request every 2 steps fits
    cfg = ExecutionConfig("faster", 4, execution_horizon=2)
    assert (cfg.switch_delay, cfg.busy_steps) == (1, 2)
    steps = final_index_steps(10, 50, prefix_len=1)
    assert steps[2] == 1 and 4 * (0.15 + 0.85 * (steps[2] + 1) / 10) == pytest.approx(1.28)
    assert faster_busy_steps(ExecutionConfig("faster", 4, execution_horizon=1)) == 1  # one denoise step
    assert faster_busy_steps(ExecutionConfig("faster", 4, execution_horizon=46)) == 4  # the whole chunk: d
    trace, requests = _run("faster", delay=4, s=2)
    assert [k for k, _ in requests][:4] == [0, 5, 7, 9]  # the first chunk (sync) at 4, then every 2
    assert trace.switch_steps[:4] == [4, 6, 8, 10]
    assert trace.hold_steps == 4  # only the very first wait
    # more new actions need more denoise steps; past the engine's time per request the config is refused
    with pytest.raises(ConfigError, match="busy 3 steps per request"):
        ExecutionConfig("faster", 8, execution_horizon=2)


def test_quantization_skips_actions_and_scales_the_prefix():
    trace, requests = _run("prefix", delay=2, s=10, q=2)
    assert len(requests[1][1].prefix) == 4
    commands = np.stack(trace.commands)[:, 0]
    assert np.diff(commands[3:10]).max() == pytest.approx(0.1, abs=1e-6)  # 2 ramp steps per control step


def test_ensemble_requests_every_few_steps_and_averages():
    trace, requests = _run("ensemble", delay=2)
    assert [k for k, _ in requests][:3] == [0, 2, 4]
    w = ensemble_weights(3, 0.01)
    assert w.sum() == pytest.approx(1.0) and w[0] > w[1] > w[2]


def test_metrics_on_a_trace():
    trace, _ = _run("vlash", delay=2)
    m = episode_metrics(trace, RampEnv().forward_kinematics)
    assert m.success and m.completion_s == pytest.approx(trace.steps * trace.dt)
    assert m.jerk >= 0 and m.requests >= len(trace.switch_steps) >= m.requests - 1
    low, high = wilson_interval(45, 50)
    assert 0.78 < low < 0.9 < high < 0.97


def test_invalid_execution_configs_are_rejected():
    with pytest.raises(ConfigError, match="mode must be one of"):
        ExecutionConfig("turbo", 0)
    with pytest.raises(ConfigError, match="delay 12 > execution horizon 10"):
        ExecutionConfig("naive", 12)
    with pytest.raises(ConfigError, match=r"\(s \+ d\) \* q = 60"):
        ExecutionConfig("naive", 5, execution_horizon=10, quantization=4).check_horizon(50)
