"""Samples of velocity actions: the future state the executor sends, zero-velocity padding, moving frames."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from robot_io.executors.chunk import ChunkRecord
from tests.train.synthetic import ramp_episode
from vlash.train.samples import FrameTable, SampleSpec, build_sample

H = 10
DT = 1 / 30


def _integrated(state: np.ndarray, velocities: np.ndarray) -> np.ndarray:
    return (state.astype(np.float64) + DT * velocities.sum(axis=0, dtype=np.float64)).astype(np.float32)


def _executor_future_state(velocities: np.ndarray, state: np.ndarray, delta: int) -> np.ndarray:
    """What the robot's executor sends: a chunk of `velocities` running from step 0, switching at step `delta`."""
    chunk = ChunkRecord(0, "vlash", 0, 0, 0, 0, switch_step=0, switch_index=0, actions=velocities,
                        final=np.ones(len(velocities), bool), increment_scale=DT)  # fmt: skip
    return chunk.future_state(0, delta, state)


def test_future_state_of_a_velocity_sample_integrates_the_committed_velocities():
    episode = ramp_episode(40)  # actions read as joint velocities; states are not their integral (a load drifts)
    rng = np.random.default_rng(0)
    spec = SampleSpec(horizon=H, d_max=5, prefix_mix=False, velocity_dt=DT)
    samples = [build_sample(episode, 7, spec, rng) for _ in range(200)]
    assert {s.delta for s in samples} == set(range(6))
    for s in samples:
        committed = episode.actions[7 : 7 + s.delta]
        np.testing.assert_array_equal(s.state, _integrated(episode.states[7], committed))
        np.testing.assert_array_equal(s.state, _executor_future_state(episode.actions[7:], episode.states[7], s.delta))
        np.testing.assert_array_equal(s.targets, episode.actions[7 + s.delta : 7 + s.delta + H])  # velocities
        if s.delta > 0:  # neither the recorded state at t + delta nor an action
            assert not np.allclose(s.state, episode.states[7 + s.delta])
            assert not np.allclose(s.state, episode.actions[7 + s.delta - 1])


def test_future_state_of_a_velocity_sample_with_plan_labels_integrates_the_plan():
    episode = ramp_episode(40)
    t, k = np.meshgrid(np.arange(40), np.arange(H + 5), indexing="ij")
    plans = np.repeat((0.1 * t + 0.01 * k)[..., None], 2, axis=2).astype(np.float32)
    planned = replace(episode, plans=plans)
    rng = np.random.default_rng(1)
    spec = SampleSpec(horizon=H, d_max=5, prefix_mix=False, velocity_dt=DT)
    for s in (build_sample(planned, 38, spec, rng) for _ in range(100)):
        plan = plans[38]
        np.testing.assert_array_equal(s.state, _integrated(episode.states[38], plan[: s.delta]))
        np.testing.assert_array_equal(s.targets, plan[s.delta : s.delta + H])


def test_velocity_labels_past_the_end_are_zero_and_masked():
    episode = ramp_episode(20)
    s = build_sample(episode, 15, SampleSpec.baseline(H, velocity_dt=DT), np.random.default_rng(0))
    np.testing.assert_array_equal(s.targets[:5], episode.actions[15:20])
    assert not s.targets[5:].any()  # holding still, not the last velocity repeated
    assert s.action_mask.tolist() == [True] * 5 + [False] * 5
    tail = np.full((3, 2), 0.7, np.float32)
    s = build_sample(replace(episode, tail=tail), 15, SampleSpec.baseline(H, velocity_dt=DT), np.random.default_rng(0))
    np.testing.assert_array_equal(s.targets[5:8], tail)
    assert not s.targets[8:].any() and s.action_mask.tolist() == [True] * 8 + [False] * 2
    chunks, real = episode.chunk_labels(H, hold_still=True)
    np.testing.assert_array_equal(chunks[15], np.concatenate([episode.actions[15:], np.zeros((5, 2), np.float32)]))
    assert real[15].tolist() == [True] * 5 + [False] * 5
    # the committed prefix rows are velocities like the targets: the velocities run from t + delta on
    mixed = SampleSpec(horizon=H, d_max=4, mix_prob=1.0, velocity_dt=DT)
    for s in (build_sample(episode, 3, mixed, np.random.default_rng(seed)) for seed in range(40)):
        start = 3 + s.delta
        np.testing.assert_array_equal(s.targets[: s.prefix_len], episode.actions[start : start + s.prefix_len])


def test_a_velocity_label_moves_when_its_integral_does():
    still = np.zeros((40, 2), np.float32)
    still[30:] = 1.0  # 1 rad/s from frame 30: 1/30 rad per step, past MOVING_MIN (0.05) after 2 steps
    episode = replace(ramp_episode(40), actions=still)
    moving = FrameTable([episode]).moving_frames(H, velocity_dt=DT)
    # frame t moves when its label holds >= 2 steps of 1 rad/s (t + H - 1 >= 31 and t <= 38; then zero padding)
    assert moving.tolist() == list(range(31 - H + 1, 39))
    # read as targets, only labels holding both 0 and 1 would move: a constant velocity is not standing still
    assert FrameTable([episode]).moving_frames(H).tolist() == list(range(30 - H + 1, 30))
