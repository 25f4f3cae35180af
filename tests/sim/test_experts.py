"""Scripted experts: they solve their tasks, plan smoothly, respect visibility, and timing matters."""

from __future__ import annotations

import numpy as np
import pytest

from vlash.sim import TASKS, make_env
from vlash.sim.rollout import run_expert_episode
from vlash.sim.tasks.whack import HIT

SEEDS = range(40)


@pytest.mark.parametrize("task", TASKS)
def test_closed_loop_expert_solves_each_task(task):
    env = make_env(task, image_size=32)
    results = [run_expert_episode(env, seed) for seed in SEEDS]
    rate = np.mean([r.success for r in results])
    assert rate >= 0.95, f"{task}: expert success {rate:.2f}"
    for r in results[:5]:  # smooth, feasible commands: no jumps beyond the planned velocity limit
        steps = np.abs(np.diff(np.vstack([r.states[:1], r.actions]), axis=0))
        assert steps.max() <= env.limits.velocity * env.dt + 1e-3


@pytest.mark.parametrize("task", TASKS)
def test_expert_chunk_is_pure_continuous_and_smooth(task):
    env = make_env(task)
    env.reset(seed=4)
    for _ in range(4 if task == "reach" else 25):  # reach may be solved after a few more steps
        env.step(env.expert_action())
    before = env.snapshot()
    state = env.arm_state.command + np.array([0.2, -0.1])
    chunk = env.expert_chunk(50, state=state, start_offset=3)
    after = env.snapshot()
    assert chunk.shape == (50, 2) and chunk.dtype == np.float32
    assert np.array_equal(before.arm.q, after.arm.q) and before.step_index == after.step_index
    assert np.array_equal(env.expert_chunk(50, state=state, start_offset=3), chunk)  # deterministic, no side effects
    assert np.abs(chunk[0] - state).max() <= env.limits.velocity * env.dt + 1e-6
    velocity = np.diff(np.vstack([state, chunk]), axis=0) / env.dt
    assert np.abs(velocity).max() <= env.limits.velocity + 1e-4
    acceleration = np.diff(velocity, axis=0) / env.dt
    assert np.abs(acceleration).max() <= env.limits.acceleration + 1e-3


def test_open_loop_chunk_matches_the_closed_loop_expert_on_reach():
    env = make_env("reach")
    seed = next(s for s in range(50) if run_expert_episode(env, s).steps >= 20)  # a long reach
    env.reset(seed=seed)
    env.step(env.expert_action())
    chunk = env.expert_chunk(12)
    closed = []
    for _ in range(12):
        action = env.expert_action()
        closed.append(action)
        _, _, terminated, _, _ = env.step(action)
        assert not terminated
    np.testing.assert_allclose(np.array(closed), chunk, atol=0.01)
    assert np.abs(chunk[-1] - chunk[0]).max() > 0.2  # the arm really moved


def test_whack_expert_ignores_targets_that_have_not_appeared():
    env = make_env("whack")
    env.reset(seed=1)
    first = int(env.world.appear[0])
    while env.step_index < first - 1:
        env.step(env.expert_action())
    hold = env.expert_chunk(30)  # planned one step before the pop-up: it holds still
    np.testing.assert_allclose(hold, np.broadcast_to(env.arm_state.command, hold.shape), atol=1e-3)
    late = env.expert_chunk(30, info_delay=0)
    env.step(env.expert_action())  # the target appears on this step
    assert env.world.appear[0] == env.step_index
    reacting = env.expert_chunk(30)
    assert np.abs(reacting[-1] - late[-1]).max() > 0.3


def test_events_allow_reaction_latency_metrics():
    env = make_env("whack")
    result = run_expert_episode(env, seed=6)
    appear = {e["id"]: e["step"] for e in result.events if e["kind"] == "appear"}
    touches = [e for e in result.events if e["kind"] == "touch"]
    assert len(touches) == len(appear) == env.world.appear.size and np.all(env.world.status == HIT)
    for event in touches:
        assert event["latency_steps"] == event["step"] - appear[event["id"]] > 0
        assert event["step"] <= env.world.deadline[event["id"]]


@pytest.mark.parametrize(("task", "late"), [("whack", 8), ("intercept", 8)])
def test_reacting_late_fails_measurably(task, late):
    env = make_env(task, image_size=32)
    seeds = range(30)
    on_time = np.mean([run_expert_episode(env, s).success for s in seeds])
    delayed = np.mean([run_expert_episode(env, s, reaction_delay=late).success for s in seeds])
    assert on_time >= 0.95 and delayed <= on_time - 0.3, (on_time, delayed)
