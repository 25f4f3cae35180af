"""Sample construction: future-state offsets, end padding, committed prefix, baseline, coverage."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from tests.train.synthetic import ramp_episode
from vlash.train.errors import ConfigError
from vlash.train.samples import FrameTable, SampleSpec, build_sample

H = 10


def _draws(spec: SampleSpec, t: int, length: int = 40, count: int = 400, seed: int = 0):
    episode = ramp_episode(length)
    rng = np.random.default_rng(seed)
    return episode, [build_sample(episode, t, spec, rng) for _ in range(count)]


def test_future_state_is_last_commanded_action_and_targets_shift():
    episode, samples = _draws(SampleSpec(horizon=H, d_max=5, prefix_mix=False), t=7)
    assert {s.delta for s in samples} == set(range(6))
    for s in samples:
        start = 7 + s.delta
        want_state = episode.states[7] if s.delta == 0 else episode.actions[start - 1]
        np.testing.assert_array_equal(s.state, want_state)
        np.testing.assert_array_equal(s.targets, episode.actions[start : start + H])
        np.testing.assert_array_equal(s.image, episode.images[7])  # the image stays the one observed at t
        assert s.action_mask.all() and s.prefix_len == 0 and not s.use_has


def test_end_of_episode_is_padded_with_last_action_and_masked():
    episode = ramp_episode(20)
    s = build_sample(episode, 15, SampleSpec.baseline(H), np.random.default_rng(0))
    np.testing.assert_array_equal(s.targets[:5], episode.actions[15:20])
    np.testing.assert_array_equal(s.targets[5:], np.repeat(episode.actions[19:20], 5, axis=0))
    assert s.action_mask.tolist() == [True] * 5 + [False] * 5
    assert s.loss_mask.tolist() == s.action_mask.tolist()


def test_the_expert_tail_labels_the_chunk_past_the_episode_end():
    episode = ramp_episode(20)
    tail = np.full((3, 2), 7.0, np.float32)
    s = build_sample(replace(episode, tail=tail), 15, SampleSpec.baseline(H), np.random.default_rng(0))
    np.testing.assert_array_equal(s.targets[:5], episode.actions[15:20])
    np.testing.assert_array_equal(s.targets[5:8], tail)
    np.testing.assert_array_equal(s.targets[8:], tail[[-1, -1]])  # padded with the tail's last label
    assert s.action_mask.tolist() == [True] * 8 + [False] * 2


def _planned(episode, steps: int):
    """The episode with per-frame plans that differ from its commands: plans[t][k] = 100 t + k."""
    t, k = np.meshgrid(np.arange(len(episode)), np.arange(steps), indexing="ij")
    plans = np.repeat((100.0 * t + k)[..., None], episode.num_joints, axis=2).astype(np.float32)
    return replace(episode, plans=plans)


def test_plan_labels_take_state_and_targets_from_the_frames_plan():
    episode = _planned(ramp_episode(40), H + 5)
    rng = np.random.default_rng(0)
    samples = [build_sample(episode, 38, SampleSpec(horizon=H, d_max=5, prefix_mix=False), rng) for _ in range(200)]
    assert {s.delta for s in samples} == set(range(6))  # not clamped at the episode's end: the plan runs past it
    for s in samples:
        plan = episode.plans[38]
        want_state = episode.states[38] if s.delta == 0 else plan[s.delta - 1]
        np.testing.assert_array_equal(s.state, want_state)
        np.testing.assert_array_equal(s.targets, plan[s.delta : s.delta + H])
        assert s.action_mask.all()


@pytest.mark.parametrize("source", ["plan", "executed"])
def test_the_committed_prefix_comes_from_the_plan_or_from_what_the_demonstration_executed(source):
    """ "executed": the prefix is what the demonstration ran over [t + delta, t + delta + d) (at run time: the running
    chunk's rows, planned earlier); the targets after it stay the frame's plan either way."""
    episode = _planned(ramp_episode(40), H + 5)
    spec = SampleSpec(horizon=H, d_max=5, mix_prob=1.0, prefix_source=source)
    rng = np.random.default_rng(0)
    samples = [build_sample(episode, 20, spec, rng) for _ in range(200)]
    assert {s.prefix_len for s in samples} == set(range(6))
    for s in samples:
        plan, start, d = episode.plans[20], 20 + s.delta, s.prefix_len
        want_prefix = episode.actions[start : start + d] if source == "executed" else plan[s.delta : s.delta + d]
        np.testing.assert_array_equal(s.targets[:d], want_prefix)
        np.testing.assert_array_equal(s.targets[d:], plan[s.delta + d : s.delta + H])


def test_an_unknown_prefix_source_is_refused():
    with pytest.raises(ConfigError, match="prefix_source"):
        SampleSpec(prefix_source="oracle")


def test_plans_shorter_than_d_max_plus_horizon_are_refused():
    episode = _planned(ramp_episode(20), H + 4)
    with pytest.raises(ConfigError, match="plan_steps >= that"):
        build_sample(episode, 0, SampleSpec(horizon=H, d_max=5), np.random.default_rng(0))


def test_offsets_past_the_end_are_clamped_to_keep_a_real_target():
    episode, samples = _draws(SampleSpec(horizon=H, d_max=8), t=37, length=40)
    assert max(s.delta for s in samples) == 2  # t + delta <= T - 1
    for s in samples:
        assert s.action_mask[0] and s.loss_mask.any()
        assert s.prefix_len < int(s.action_mask.sum())
    last = [s for s in samples if s.delta == 2]
    np.testing.assert_array_equal(last[0].state, episode.actions[38])
    np.testing.assert_array_equal(last[0].targets[0], episode.actions[39])


def test_prefix_is_left_out_of_the_loss():
    _, samples = _draws(SampleSpec(horizon=H, d_max=4), t=3)
    assert {s.prefix_len for s in samples} == set(range(5))
    for s in samples:
        assert not s.loss_mask[: s.prefix_len].any()
        assert s.loss_mask[s.prefix_len :].all()


def test_baseline_has_no_offsets():
    episode, samples = _draws(SampleSpec.baseline(H), t=12)
    assert all(s.delta == 0 and s.prefix_len == 0 and not s.use_has for s in samples)
    np.testing.assert_array_equal(samples[0].state, episode.states[12])


def test_has_probability_and_coverage_are_seeded():
    spec = SampleSpec(horizon=H, d_max=8, mix_prob=1.0, has_prob=0.5)
    _, a = _draws(spec, t=5, count=1000, seed=3)
    _, b = _draws(spec, t=5, count=1000, seed=3)
    assert [(s.delta, s.prefix_len, s.use_has) for s in a] == [(s.delta, s.prefix_len, s.use_has) for s in b]
    assert 0.4 < np.mean([s.use_has for s in a]) < 0.6
    for counts in (np.bincount([s.delta for s in a], minlength=9), np.bincount([s.prefix_len for s in a], minlength=9)):
        assert len(counts) == 9 and counts.min() > 60  # ~111 each: uniform over 0..8


def test_only_mix_prob_of_the_samples_are_hand_off_samples():
    _, samples = _draws(SampleSpec(horizon=H, d_max=8, mix_prob=0.3, has_prob=1.0), t=5, count=2000)
    handoff = np.array([s.use_has for s in samples])  # has_prob = 1: every hand-off sample is horizon-aware
    assert 0.26 < handoff.mean() < 0.34
    assert all(s.prefix_len == 0 for s, h in zip(samples, handoff, strict=True) if not h)
    assert {s.delta for s in samples} == set(range(9))  # future-state offsets are independent of the mix


def test_frame_table_balances_tasks_and_batches_stack():
    episodes = [ramp_episode(10, task="reach")] + [ramp_episode(90, task="track")]
    table = FrameTable(episodes)
    rng = np.random.default_rng(0)
    frames = table.draw_frames(2000, rng)
    share = np.mean(table.episode_of[frames] == 0)
    assert 0.45 < share < 0.55  # 10 of 100 frames, drawn half of the time
    batch = table.draw(6, SampleSpec(horizon=H, d_max=3), rng)
    assert batch.targets.shape == (6, H, 2) and batch.states.shape == (6, 2) and len(batch.instructions) == 6
    assert (batch.loss_mask == (batch.action_mask & (np.arange(H) >= batch.prefix_len[:, None]))).all()
    uniform = FrameTable(episodes, balance_tasks=False).draw_frames(2000, rng)
    assert np.mean(table.episode_of[uniform] == 0) < 0.2


def _hold_then_ramp(length: int = 40, hold: int = 25):
    """Commands hold still for `hold` frames, then ramp: only frames whose next H labels reach the ramp move."""
    episode = ramp_episode(length)
    actions = episode.actions.copy()
    actions[:hold] = actions[hold]
    return replace(episode, actions=actions, states=actions - 0.05)


def test_chunk_labels_are_each_frames_label_at_offset_zero():
    episode = ramp_episode(20)
    chunks, real = episode.chunk_labels(H)
    for t in (0, 12, 19):
        s = build_sample(episode, t, SampleSpec.baseline(H), np.random.default_rng(0))
        np.testing.assert_array_equal(chunks[t], s.targets)
        np.testing.assert_array_equal(real[t], s.action_mask)
    planned = _planned(episode, H + 2)
    chunks, real = planned.chunk_labels(H)
    np.testing.assert_array_equal(chunks, planned.plans[:, :H])
    assert real.all()


def test_moving_share_draws_frames_whose_label_moves():
    table = FrameTable([_hold_then_ramp()])
    moving = table.moving_frames(H)
    # frame 26 is the ramp's first move; the last frame's label is its padding, all one target
    assert moving.tolist() == list(range(26 - H + 1, 39))
    spec = SampleSpec(horizon=H, d_max=3)
    plain = table.draw(400, spec, np.random.default_rng(0))
    again = FrameTable([_hold_then_ramp()]).draw(400, replace(spec, moving_share=0.0), np.random.default_rng(0))
    np.testing.assert_array_equal(plain.frames, again.frames)  # off: the draws are unchanged
    mixed = table.draw(4000, replace(spec, moving_share=0.5), np.random.default_rng(0))
    share = np.isin(mixed.frames, moving).mean()
    assert 0.5 + 0.5 * len(moving) / 40 - 0.05 < share < 0.5 + 0.5 * len(moving) / 40 + 0.05
    only = table.draw(200, replace(spec, moving_share=1.0), np.random.default_rng(0))
    assert np.isin(only.frames, moving).all()
    still = FrameTable([replace(_hold_then_ramp(), actions=np.zeros((40, 2), np.float32))])
    with pytest.raises(ConfigError, match="no frame"):
        still.draw(4, replace(spec, moving_share=0.5), np.random.default_rng(0))


@pytest.mark.parametrize(
    "kwargs",
    [{"d_max": 10}, {"d_max": -1}, {"has_prob": 1.5}, {"mix_prob": -0.1}, {"horizon": 0}, {"moving_share": 2.0}],
)
def test_spec_validation(kwargs):
    with pytest.raises(ConfigError):
        SampleSpec(**{"horizon": H, **kwargs})
