"""Intervals (vlash.eval.stats) and the metrics built on them: completion time over all episodes, failures
censored at the time limit."""

from __future__ import annotations

import numpy as np
import pytest

from tests.eval.fake_env import RampEnv, run_ramp
from vlash.eval.episode import EpisodeTrace
from vlash.eval.metrics import EpisodeMetrics, aggregate, episode_metrics, mean_squared_jerk
from vlash.eval.stats import bootstrap_mean, paired_ratio, wilson_interval


def test_wilson_interval_of_a_success_rate():
    low, high = wilson_interval(45, 50)
    assert 0.78 < low < 0.9 < high < 0.97
    assert wilson_interval(0, 0) == (0.0, 1.0)
    assert wilson_interval(10, 10)[1] == 1.0 and wilson_interval(0, 10)[0] == 0.0


def test_bootstrap_mean_is_deterministic_and_brackets_the_mean():
    values = np.random.default_rng(3).exponential(2.0, 40)
    mean, low, high = bootstrap_mean(values)
    assert bootstrap_mean(values) == (mean, low, high)  # the same episodes always give the same interval
    assert mean == pytest.approx(values.mean()) and low < mean < high
    assert bootstrap_mean([]) is None
    assert bootstrap_mean([2.0, 2.0, 2.0]) == (2.0, 2.0, 2.0)


def test_paired_ratio_of_identical_samples_is_one_with_a_zero_width_interval():
    values = [1.0, 3.0, 2.5, 7.0]
    assert paired_ratio(values, values) == (1.0, 1.0, 1.0)
    halved = paired_ratio([v / 2 for v in values], values)
    assert halved == pytest.approx((0.5, 0.5, 0.5))  # a constant factor: every resample gives it


def test_paired_ratio_resamples_pairs_together():
    rng = np.random.default_rng(0)
    difficulty = rng.exponential(3.0, 60)  # shared per seed: cancels in a paired ratio
    faster = 0.8 * difficulty + rng.normal(0, 0.05, 60)
    ratio, low, high = paired_ratio(faster, difficulty)
    assert low < ratio < high and high - low < 0.05 and low < 0.8 < high
    assert paired_ratio(faster, difficulty) == (ratio, low, high)


@pytest.mark.parametrize(("a", "b"), [([1.0, 2.0], [1.0]), ([], [])])
def test_paired_ratio_refuses_unpaired_or_empty_samples(a, b):
    with pytest.raises(ValueError, match="equally long non-empty"):
        paired_ratio(a, b)


def _episode(success: bool, completion_s: float) -> EpisodeMetrics:
    return EpisodeMetrics("reach", "vlash", 2, 0, success, 10, completion_s)


def test_completion_counts_every_episode_with_failures_at_the_time_limit():
    trace, _ = run_ramp("vlash", delay=2)
    ok = episode_metrics(trace, RampEnv().forward_kinematics)
    assert ok.success and ok.completion_s == pytest.approx(trace.steps * trace.dt)
    failed, _ = run_ramp("vlash", delay=2, env=RampEnv(max_steps=20))  # the ramp cannot reach 3.0 in 20 steps
    censored = episode_metrics(failed, RampEnv().forward_kinematics)
    assert not censored.success and censored.completion_s == pytest.approx(20 * trace.dt)
    ended = EpisodeTrace("reach", 0, "vlash", 2, 0.1, commands=[np.zeros(1)] * 10, steps=10, max_steps=90)
    assert episode_metrics(ended, RampEnv().forward_kinematics).completion_s == pytest.approx(9.0)  # ended early
    summary = aggregate([_episode(True, 1.0), _episode(True, 2.0), _episode(False, 6.0)])
    assert summary["completion_s"] == pytest.approx(3.0)  # (1 + 2 + 6) / 3, not the successes' 1.5
    low, high = summary["completion_ci95"]
    assert low <= 3.0 <= high and high > low
    assert summary["success_rate"] == pytest.approx(2 / 3)


def test_metrics_of_a_trace():
    trace, _ = run_ramp("vlash", delay=2)
    m = episode_metrics(trace, RampEnv().forward_kinematics)
    assert m.jerk > 0 and m.jerk == pytest.approx(mean_squared_jerk(np.array(trace.commands), trace.dt))
    assert m.requests == trace.requests >= len(trace.switch_steps) >= m.requests - 1
    assert m.hold_fraction == pytest.approx(2 / trace.steps) and m.missed_steps == 0
    summary = aggregate([m])
    assert summary["missed_steps"] == 0 and summary["n"] == 1 and summary["completion_ci95"] == [m.completion_s] * 2


def test_missed_steps_are_summed_over_a_cell():
    a, b = _episode(True, 1.0), _episode(True, 1.0)
    a.missed_steps, b.missed_steps = 2, 3
    assert aggregate([a, b])["missed_steps"] == 5
    assert aggregate([])["completion_s"] is None and aggregate([])["completion_ci95"] is None
