"""What each mode sends (state, future_state, prefix, guidance, schedule, delay_steps) and how the scripted-expert
oracle answers it: the Infer objects the harness's executors sent, recorded by wrapping the planner."""

from __future__ import annotations

import numpy as np
import pytest

from robot_io.protocol import Infer
from tests.eval.fake_env import RampEnv, run_ramp
from vlash.sim.oracle import ExpertPlanner

D, S = 4, 10  # the second request goes out at step 10 and takes over at 14 (test_episode.py)


def _second(mode: str, **executor):
    """(trace, recording policy, the second request: the first that has a running chunk to overlap with)."""
    trace, policy = run_ramp(mode, delay=D, s=S, **executor)
    return trace, policy, policy.requests[1].infer


def test_sync_and_naive_send_the_observed_state_and_nothing_else():
    for mode, delay_steps in (("sync", 0), ("naive", D), ("ensemble", D)):
        trace, _, infer = _second(mode)
        np.testing.assert_array_equal(infer.state, trace.states[infer.step_index])
        assert infer.future_state is None and infer.prefix is None and infer.guidance is None, mode
        assert infer.delay_steps == delay_steps and infer.schedule is None and infer.execution_horizon == S, mode


def test_vlash_sends_the_last_command_before_the_switch_as_its_future_state():
    trace, _, infer = _second("vlash")
    assert infer.step_index == 10
    np.testing.assert_array_equal(infer.future_state, trace.commands[10 + D - 1])  # commanded at step 13
    np.testing.assert_array_equal(infer.state, trace.states[10])  # the observed state goes along
    assert infer.delay_steps == D and infer.prefix is None and infer.guidance is None
    assert not np.array_equal(infer.future_state, infer.state)  # the arm lags its commands


def test_prefix_sends_the_actions_that_run_during_the_delay():
    trace, _, infer = _second("prefix")
    assert infer.step_index == 10
    np.testing.assert_array_equal(infer.prefix, np.stack(trace.commands)[10 : 10 + D])
    assert infer.schedule == "constant" and infer.delay_steps == D and infer.guidance is None


def test_rtc_sends_the_running_chunks_leftover_as_guidance():
    _, policy, infer = _second("rtc")
    assert infer.step_index == 10
    first = policy.requests[0].result.actions  # took over at step 4 at index 0: index 6 runs at step 10
    np.testing.assert_array_equal(infer.guidance, first[10 - D :])
    assert infer.schedule == "constant" and infer.delay_steps == D and infer.prefix is None
    assert infer.future_state is None


def test_faster_commits_its_one_step_wait_and_asks_for_horizon_aware_sampling():
    trace, policy, _ = _second("faster")
    first, second = policy.requests[0].infer, policy.requests[1].infer
    assert first.schedule == "horizon-aware" and first.prefix is None  # the first (sync) request streams too
    # it asks for s + d rows after its prefix: d more than a switch on time runs
    assert second.step_index == 10 and second.delay_steps == 1 and second.execution_horizon == S + 1
    np.testing.assert_array_equal(second.prefix, np.stack(trace.commands)[10:11])
    assert second.schedule == "horizon-aware"


@pytest.mark.parametrize("mode", ["sync", "naive", "prefix", "rtc", "ensemble"])
def test_state_source_commanded_sends_the_last_command(mode):
    trace, policy = run_ramp(mode, delay=D, s=S, state_source="commanded")
    infer = next(r.infer for r in policy.requests if r.infer.step_index >= 10)  # the arm is moving
    k = infer.step_index
    np.testing.assert_array_equal(infer.state, trace.commands[k - 1])
    assert not np.array_equal(infer.state, trace.states[k])  # the arm lags its commands: the sources differ


def test_state_source_commanded_leaves_vlash_and_the_first_request_alone():
    trace, policy, infer = _second("vlash", state_source="commanded")
    np.testing.assert_array_equal(infer.state, trace.states[10])
    np.testing.assert_array_equal(policy.requests[0].infer.state, trace.states[0])  # nothing commanded yet


def test_the_oracle_pairs_the_future_state_with_the_committed_velocity_at_the_switch():
    env = RampEnv()
    trace, policy = run_ramp("vlash", delay=D, s=S, env=env)
    (call,) = [c for c in env.expert_calls if c["step"] == 10]
    commands = np.stack(trace.commands)
    np.testing.assert_array_equal(call["state"], policy.requests[1].infer.future_state)
    assert call["start_offset"] == D
    np.testing.assert_allclose(call["velocity"], (commands[13] - commands[12]) / env.dt)  # commanded, not measured
    measured = (trace.states[10] - trace.states[9]) / env.dt
    assert not np.allclose(call["velocity"], measured)


def _infer(**fields) -> Infer:
    return Infer(request_id=2, step_index=0, capture_time_ns=0, prompt="", images={}, state=np.array([0.5], np.float32),
                 **fields)  # fmt: skip


def test_the_oracle_without_the_running_chunk_uses_the_measured_velocity():
    env = RampEnv()
    env.reset()
    future = dict(future_state=np.array([0.7], np.float32), delay_steps=4)
    ExpertPlanner(env, 50)(_infer(**future))
    assert env.expert_calls[-1]["velocity"] is None and env.expert_calls[-1]["start_offset"] == 4
    naive = _infer(delay_steps=4)
    ExpertPlanner(env, 50, commanded=lambda step: np.array([1.0]))(naive)
    assert env.expert_calls[-1]["velocity"] is None and env.expert_calls[-1]["start_offset"] == 0  # naive: measured
    np.testing.assert_array_equal(env.expert_calls[-1]["state"], [0.5])


def test_the_oracle_continues_a_prefix_from_its_end_with_the_prefixs_velocity():
    env = RampEnv()
    trace, policy = run_ramp("prefix", delay=D, s=S, env=env)
    (call,) = [c for c in env.expert_calls if c["step"] == 10]
    prefix = policy.requests[1].infer.prefix
    np.testing.assert_array_equal(call["state"], prefix[-1])
    assert call["start_offset"] == D
    np.testing.assert_allclose(call["velocity"], (prefix[-1] - prefix[-2]) / env.dt)
    np.testing.assert_array_equal(policy.requests[1].result.actions[:D], prefix)  # the prefix comes back


def test_a_one_row_prefix_takes_its_velocity_from_the_command_before_the_request():
    env = RampEnv()
    trace, policy = run_ramp("faster", delay=D, s=S, env=env)
    (call,) = [c for c in env.expert_calls if c["step"] == 10]
    np.testing.assert_allclose(call["velocity"], (trace.commands[10] - trace.commands[9]) / env.dt)
