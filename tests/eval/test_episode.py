"""The harness's episodes: per mode when requests go out, when chunks take over, when the robot holds (the robot's
own executors on a simulated link, RampEnv and the scripted-expert oracle)."""

from __future__ import annotations

import numpy as np
import pytest

from robot_io.executors import ExecutorConfig
from tests.eval.fake_env import RampEnv, RecordingPolicy, run_ramp
from vlash.eval.episode import EpisodeRunner, executor_config
from vlash.eval.link import NOT_FINAL_ROW, LinkTiming, PlanResult
from vlash.eval.metrics import boundary_jump
from vlash.eval.policies import OraclePolicy

ASYNC = ("naive", "vlash", "prefix", "rtc")


def test_sync_requests_then_waits_d_steps_and_runs_s():
    trace, policy = run_ramp("sync", delay=3, s=10)
    assert policy.steps[:3] == [0, 13, 26]  # request, wait 3, run 10, request ...
    assert trace.switch_steps[:3] == [3, 16, 29]
    assert trace.hold_steps == 3 * trace.requests and trace.missed_steps == 0  # every chunk waits d


@pytest.mark.parametrize("mode", ASYNC)
def test_async_modes_request_d_steps_before_the_switch(mode):
    trace, policy = run_ramp(mode, delay=4, s=10)
    assert policy.steps[:4] == [0, 10, 20, 30]  # the first chunk (sync) runs at 4, the next is asked for 4 before 14
    assert trace.switch_steps[:4] == [4, 14, 24, 34]
    assert trace.hold_steps == 4 and trace.missed_steps == 0  # only the first chunk's wait


def test_faster_requests_one_step_before_its_switch_and_holds_only_its_first_ttfa():
    # d = 4: the first new row is final after prefill + one denoise step, 4 * (0.15 + 0.85 / 10) = 0.94 steps
    trace, policy = run_ramp("faster", delay=4, s=10)
    assert trace.switch_steps[:4] == [1, 11, 21, 31]
    assert policy.steps[:4] == [0, 10, 20, 30]  # 1 step before each switch, not 4
    assert trace.hold_steps == 1 and trace.missed_steps == 0


def test_faster_with_a_slow_prefill_waits_longer_for_its_first_rows():
    env = RampEnv()
    config = ExecutorConfig(mode="faster", execution_horizon=10, initial_delay=1)
    trace = EpisodeRunner(env, OraclePolicy(), config, LinkTiming(4, prefill_share=0.6)).run(0)
    assert trace.switch_steps[:2] == [3, 13]  # 4 * (0.6 + 0.04) = 2.56 steps
    assert trace.hold_steps == 3 and trace.missed_steps == 0


def test_faster_replans_every_s_steps_below_d_because_its_sampler_stops_early():
    trace, policy = run_ramp("faster", delay=4, s=2)
    assert policy.steps[:4] == [0, 2, 4, 6] and trace.switch_steps[:4] == [1, 3, 5, 7]
    assert trace.hold_steps == 1 and trace.missed_steps == 0
    first, second = policy.requests[:2]
    # of 10: the early stop after prefix + (s + d) rows (the d extra rows cover a late next chunk)
    assert first.result.steps_run == 3 and second.result.steps_run == 3
    assert trace.plan_steps[:8] == [-1, 0, 0, 2, 2, 4, 4, 6]  # the observation behind each command


@pytest.mark.parametrize("mode", ["sync", *ASYNC, "faster", "ensemble"])
def test_a_zero_latency_reply_runs_in_the_step_of_its_request(mode):
    trace, policy = run_ramp(mode, delay=0, s=10)
    assert trace.switch_steps == policy.steps  # every chunk takes over when it is asked for
    assert trace.hold_steps == 0 and trace.missed_steps == 0
    every = 2 if mode == "ensemble" else 10
    assert policy.steps[:3] == [0, every, 2 * every]
    assert all(r.infer.delay_steps == 0 for r in policy.requests)


def test_an_action_stride_runs_every_qth_index_and_commits_d_times_q():
    trace, policy = run_ramp("prefix", delay=2, s=10, q=2)
    second = policy.requests[1].infer
    assert second.delay_steps == 4 and len(second.prefix) == 4 and second.execution_horizon == 20
    commands = np.stack(trace.commands)[:, 0]
    np.testing.assert_allclose(second.prefix[::2, 0], commands[10:12])  # indices run at steps 10, 11
    assert np.diff(commands[3:30]).max() == pytest.approx(0.1, abs=1e-6)  # 2 ramp steps of 0.05 per control step
    assert np.diff(commands[3:30]).min() == pytest.approx(0.1, abs=1e-6)  # and no jump at the switches
    assert trace.switch_steps[:3] == [2, 12, 22]


def test_ensemble_keeps_one_request_in_flight():
    trace, policy = run_ramp("ensemble", delay=3, s=10, ensemble_every=2)
    assert policy.steps[:4] == [0, 3, 6, 9]  # every 2 steps asked for, but a reply takes 3
    assert trace.switch_steps[:4] == [3, 6, 9, 12]
    trace, policy = run_ramp("ensemble", delay=1, s=10, ensemble_every=4)
    assert policy.steps[:3] == [0, 4, 8] and trace.switch_steps[:3] == [1, 5, 9]


def test_ensemble_averages_every_live_chunk_with_act_weights():
    decay = 0.5
    trace, policy = run_ramp("ensemble", delay=2, s=10, ensemble_every=2, ensemble_decay=decay)
    k = 20  # live: every chunk switched in by step 20 whose index at 20 is still inside its 50 rows
    chunks = []
    for i, r in enumerate(policy.requests):
        switch = r.infer.step_index + 2
        index = (k - switch) + (0 if i == 0 else 2)  # the first chunk (sync) runs index 0 at its switch, later d
        if switch <= k and index < 50:
            chunks.append(r.result.actions[index])
    weights = np.exp(-decay * np.arange(len(chunks)))
    expected = (weights / weights.sum()) @ np.stack(chunks)
    assert len(chunks) == 10
    np.testing.assert_allclose(trace.commands[k], expected, rtol=1e-6)
    assert not np.allclose(trace.commands[k], np.mean(chunks, axis=0))  # the weights matter


def test_the_future_state_hands_over_smoothly_and_the_stale_state_jumps():
    naive, _ = run_ramp("naive", delay=4)
    vlash, _ = run_ramp("vlash", delay=4)
    commands = lambda t: np.stack(t.commands)  # noqa: E731
    # switches while the arm is moving (before the goal, where the ramp itself stops)
    assert boundary_jump(commands(vlash), vlash.switch_steps[1:4]) < 1e-6
    assert boundary_jump(commands(naive), naive.switch_steps[1:4]) > 0.04  # replanned from the lagging state
    assert naive.steps > vlash.steps  # and it costs time


class ShortChunks:
    """The oracle, but its chunks end after `rows` rows (a sampler that stopped early)."""

    def __init__(self, rows: int) -> None:
        self.inner, self.rows = OraclePolicy(), rows
        self.horizon, self.num_steps, self.camera = self.inner.horizon, self.inner.num_steps, self.inner.camera

    def planner(self, env, commanded, action_stride):
        inner = self.inner.planner(env, commanded, action_stride)

        def plan(infer):
            result = inner(infer)
            final = result.final_at_step.copy()
            final[self.rows :] = NOT_FINAL_ROW
            return PlanResult(result.actions, final, result.steps_run)

        return plan


def test_steps_past_a_chunks_last_row_are_missed_deadlines():
    config = ExecutorConfig(mode="sync", execution_horizon=10)
    trace = EpisodeRunner(RampEnv(max_steps=40), ShortChunks(rows=6), config, LinkTiming(2)).run(0)
    assert trace.switch_steps == [2, 14, 26, 38]  # wait 2, run 10 (6 rows, then 4 missed), ...
    assert trace.missed_steps == 3 * 4 and trace.hold_steps == 4 * 2 + 3 * 4
    assert all(np.array_equal(trace.commands[k], trace.commands[7]) for k in range(8, 12))  # the hold: the last row


def test_episode_executor_settings_measure_d_online_and_set_the_action_kind():
    base = ExecutorConfig(mode="naive", execution_horizon=5, initial_delay=1, adapt_delay=False)
    config = executor_config(base, delay=8, interface="velocity", seed=3)
    assert config.initial_delay == 5 and config.adapt_delay and config.action_kind == "velocity"
    assert executor_config(base, delay=0, interface="ee_delta", seed=3).action_kind == "delta"
    assert executor_config(base, 0, "position", 3).seed != executor_config(base, 0, "position", 4).seed
    sync = executor_config(ExecutorConfig(mode="sync", execution_horizon=5), delay=8, interface="position", seed=0)
    assert sync.initial_delay == 8  # sync is not bounded by s


def test_episodes_are_deterministic_and_recorded_per_step():
    a, _ = run_ramp("faster", delay=3)
    b, _ = run_ramp("faster", delay=3)
    np.testing.assert_array_equal(np.stack(a.commands), np.stack(b.commands))
    assert len(a.commands) == len(a.states) == len(a.infos) == len(a.plan_steps) == a.steps
    assert a.success and a.max_steps == 120 and a.mode == "faster" and a.delay == 3


def test_the_policy_plans_from_the_world_at_its_request_step():
    """The oracle reads the simulated world: it must see it as of the observation, not as of the reply."""
    env, policy = RampEnv(), RecordingPolicy(OraclePolicy())
    EpisodeRunner(env, policy, ExecutorConfig(mode="sync", execution_horizon=10), LinkTiming(2)).run(0)
    assert [r.env_step for r in policy.requests] == policy.steps and policy.steps[:3] == [0, 12, 24]


@pytest.mark.parametrize(("delay", "s", "prefill_share"), [(5, 1, 0.15), (8, 2, 0.15), (4, 1, 0.6)])
def test_faster_keeps_replanning_when_its_first_rows_take_longer_than_s(delay, s, prefill_share):
    config = ExecutorConfig(mode="faster", execution_horizon=s, initial_delay=1)
    trace = EpisodeRunner(RampEnv(), OraclePolicy(), config, LinkTiming(delay, prefill_share=prefill_share)).run(0)
    # it re-plans about every max(s, wait) steps and misses at most the first hand-over
    assert trace.requests > trace.steps / 4, f"{trace.requests} requests, {trace.missed_steps} of {trace.steps} starved"
    assert trace.success and trace.missed_steps <= 1
