"""Reaction latency: the first commanded motion toward an event's target, from a plan that saw it."""

from __future__ import annotations

import numpy as np

from tests.eval.fake_env import run_ramp
from vlash.eval.metrics import MIN_PROGRESS, reaction_steps


def _path(*steps: tuple[float, float]) -> np.ndarray:
    return np.cumsum(np.array([(0.0, 0.0), *steps]), axis=0)


def test_motion_that_closes_the_distance_counts_even_along_an_arc():
    target = np.array([1.0, 0.0])
    still, sideways, arc = (0.0, 0.0), (0.0, 0.03), (0.02, 0.02)  # the arc step heads 45 degrees off
    assert reaction_steps(_path(still, still, sideways, arc), start=1, target=target) == 3  # the arc step, k = 4
    assert reaction_steps(_path(still, (-0.02, 0.0), (0.0, -0.02)), start=0, target=target) is None  # away
    creep = (0.5 * MIN_PROGRESS, 0.0)  # below the progress threshold
    assert reaction_steps(_path(creep, creep, creep), start=0, target=target) is None


def test_motion_from_a_plan_made_before_the_event_is_not_a_reaction():
    target = np.array([1.0, 0.0])
    moving = _path(*[(0.02, 0.0)] * 8)  # already heading for the target when it appears at step 2
    assert reaction_steps(moving, start=2, target=target) == 0
    plans = [-1, 0, 0, 0, 0, 5, 5, 5, 5]  # the plan behind each command was observed at this step
    assert reaction_steps(moving, start=2, target=target, plan_steps=plans) == 3


def test_the_trace_records_the_observation_behind_each_command():
    trace, policy = run_ramp("sync", delay=3, s=10)
    assert policy.steps[:2] == [0, 13]
    assert trace.plan_steps[:3] == [-1, -1, -1]  # holding for the first chunk
    assert set(trace.plan_steps[3:16]) == {0} and trace.plan_steps[16] == 13  # run 10, hold 3, next chunk
    trace, policy = run_ramp("faster", delay=4, s=2)
    assert trace.plan_steps[1:9] == [0, 0, 2, 2, 4, 4, 6, 6]  # a plan observed 1 step before each switch
    trace, policy = run_ramp("ensemble", delay=2, s=10, ensemble_every=3)
    assert trace.plan_steps[2:9] == [0, 0, 0, 3, 3, 3, 6]  # the newest chunk's observation
