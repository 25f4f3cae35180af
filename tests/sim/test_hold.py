"""hold (reach-and-hold): events, the hold count, calibration of the expert under a load, configurable targets."""

from __future__ import annotations

import numpy as np
import pytest

from vlash.sim import DisturbanceConfig, HoldConfig, ReachConfig, SimConfigError, make_env
from vlash.sim.rollout import run_expert_episode


def test_hold_events_count_consecutive_steps_and_terminate_with_success():
    env = make_env("hold")
    obs, info = env.reset(seed=2)
    assert [e["kind"] for e in info["events"]] == ["appear"] and "hold" in env.instruction
    world, cfg = env.world, env.task.config
    goal_xy = world.positions[world.goal]
    events, terminated = [], False
    while not terminated:
        obs, reward, terminated, truncated, info = env.step(env.expert_action())
        events.extend(info["events"])
        assert not truncated
        inside = np.hypot(*(info["ee_xy"] - goal_xy)) <= cfg.hold_radius
        assert (info["held_steps"] > 0) == inside
    touch, hold = events
    assert touch["kind"] == "touch" and touch["id"] == world.goal and touch["correct"]
    assert hold["kind"] == "hold" and hold["step"] == touch["step"] + cfg.hold_steps - 1 == env.step_index
    assert info["success"] and reward == 1.0 and info["held_steps"] == cfg.hold_steps


def test_leaving_the_radius_restarts_the_count_and_touch_is_reported_once():
    env = make_env("hold", task_config=HoldConfig(hold_steps=20))
    env.reset(seed=5)
    events = []
    while not env.world.entered:
        events.extend(env.step(env.expert_action())[4]["events"])
    for _ in range(5):
        events.extend(env.step(env.expert_action())[4]["events"])
    assert env.world.held == 6
    away = env.arm_state.command + np.array([0.6, 0.0])
    for _ in range(10):
        info = env.step(away.astype(np.float32))[4]
        events.extend(info["events"])
    assert info["held_steps"] == 0 and not info["success"]
    while not env.world.done:
        _, _, terminated, truncated, info = env.step(env.expert_action())
        events.extend(info["events"])
        assert not truncated
    assert [e["kind"] for e in events] == ["touch", "hold"] and terminated and info["success"]


def test_more_targets_are_distractors_and_reach_works_with_one_target():
    env = make_env("hold", task_config=HoldConfig(num_targets=3))
    obs, info = env.reset(seed=1)
    assert [e["kind"] for e in info["events"]] == ["appear"] * 3 and len(env.world.colors) == 3
    assert run_expert_episode(env, 1).success
    single = make_env("reach", task_config=ReachConfig(num_targets=1))  # crashed before: min() of no other targets
    assert all(run_expert_episode(single, seed).success for seed in range(5))
    with pytest.raises(SimConfigError, match="hold_steps 200 must be <= max_steps 150"):
        HoldConfig(hold_steps=200)


def test_the_closed_loop_expert_holds_with_velocity_actions_under_a_load():
    """Calibration: seeds 0-99, velocity actions, load 0.3 rad/s: >= 95% (measured 100%, README)."""
    env = make_env("hold", image_size=16, action_interface="velocity", disturbance=DisturbanceConfig("load", 0.3))
    results = [run_expert_episode(env, seed) for seed in range(100)]
    assert np.mean([r.success for r in results]) >= 0.95
    assert max(r.steps for r in results) < env.max_steps - 30  # margin for slower controllers
