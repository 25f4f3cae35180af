"""ArmEnv: API contract, determinism, snapshots, spaces, errors, gymnasium conformance."""

from __future__ import annotations

import pickle
import subprocess
import sys
import textwrap

import gymnasium as gym
import numpy as np
import pytest

from vlash.sim import GYM_IDS, TASKS, ArmEnv, SimActionError, SimConfigError, SimStateError, make_env


def rollout(env: ArmEnv, seed: int, steps: int = 40) -> list:
    """Images, states and infos of an episode driven by a fixed pseudo-random policy."""
    obs, info = env.reset(seed=seed)
    rng = np.random.default_rng(99)
    frames = [(obs["image"].copy(), obs["state"].copy(), info)]
    for _ in range(steps):
        action = env.expert_action() + rng.normal(0, 0.05, env.num_joints).astype(np.float32)
        obs, reward, terminated, truncated, info = env.step(action)
        frames.append((obs["image"].copy(), obs["state"].copy(), info, reward))
        if terminated or truncated:
            break
    return frames


def same(a, b) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and np.array_equal(a, b)
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return a == b


@pytest.mark.parametrize("task", TASKS)
def test_same_seed_same_episode_and_different_seeds_differ(task):
    first, second = rollout(make_env(task), 7), rollout(make_env(task, seed=3), 7)
    assert same(first, second)
    other = rollout(make_env(task), 8)
    assert not np.array_equal(first[0][0], other[0][0])
    assert not same(first, other)


@pytest.mark.parametrize("task", TASKS)
def test_snapshot_restore_reproduces_the_future_exactly(task):
    env = make_env(task)
    env.reset(seed=11)
    for _ in range(20):
        env.step(env.expert_action())
    snap = pickle.loads(pickle.dumps(env.snapshot()))
    futures = []
    for _ in range(2):
        env.restore(snap)
        assert env.step_index == 20
        steps = []
        for _ in range(15):
            obs, reward, terminated, truncated, info = env.step(env.expert_action())
            steps.append((obs["image"].copy(), obs["state"].copy(), reward, terminated, info))
            if terminated or truncated:
                break
        futures.append(steps)
    assert same(futures[0], futures[1])


def test_constructor_seed_makes_the_first_reset_deterministic_and_resets_continue_the_stream():
    a, b = make_env("reach", seed=5), make_env("reach", seed=5)
    first_a, first_b = a.reset()[0], b.reset()[0]
    assert np.array_equal(first_a["image"], first_b["image"])
    assert not np.array_equal(a.reset()[0]["image"], first_a["image"])


@pytest.mark.parametrize("task", TASKS)
def test_observations_info_and_properties(task):
    env = make_env(task, image_size=64)
    obs, info = env.reset(seed=1)
    assert env.observation_space.contains(obs)
    assert obs["image"].shape == (64, 64, 3) and obs["image"].dtype == np.uint8
    assert obs["state"].shape == (env.num_joints,) and obs["state"].dtype == np.float32
    assert env.num_joints == 2 and env.joint_limits.shape == (2, 2)
    assert env.dt == pytest.approx(1 / 30) and env.step_index == 0 and env.max_steps > 30
    assert isinstance(env.instruction, str) and len(env.instruction) > 5
    obs, reward, terminated, truncated, info = env.step(env.expert_action())
    assert env.observation_space.contains(obs) and env.step_index == 1
    assert {"success", "ee_xy", "target_xy", "events"} <= info.keys()
    assert info["ee_xy"].shape == (2,) and isinstance(info["events"], list)
    assert info["target_xy"] is None or info["target_xy"].shape == (2,)


def test_bad_actions_raise_clear_errors():
    env = make_env("reach")
    with pytest.raises(SimStateError, match="reset"):
        env.step(np.zeros(2, np.float32))
    env.reset(seed=0)
    with pytest.raises(ValueError, match=r"expected shape \(2,\), got \(3,\)"):
        env.step(np.zeros(3, np.float32))
    with pytest.raises(SimActionError, match="NaN"):
        env.step(np.array([0.0, np.nan], np.float32))
    _, _, _, _, info = env.step(np.array([100.0, 0.0], np.float32))
    assert info["action_clipped"]
    with pytest.raises(SimConfigError, match="unknown task 'fly'"):
        make_env("fly")
    with pytest.raises(SimConfigError, match="image_size"):
        make_env("reach", image_size=3)


def test_step_after_the_end_raises_and_episode_truncates_at_max_steps():
    env = make_env("track")
    env.reset(seed=0)
    truncated = False
    for _ in range(env.max_steps):
        _, _, terminated, truncated, _ = env.step(env.expert_action())
        assert not terminated
    assert truncated and env.step_index == env.max_steps
    with pytest.raises(SimStateError):
        env.step(env.expert_action())


def test_render_is_deterministic_and_shows_the_scene():
    env = make_env("reach", render_mode="rgb_array", image_size=96)
    obs, _ = env.reset(seed=3)
    frame = env.render()
    assert np.array_equal(frame, obs["image"])
    # The three saturated target colours are present, the background dominates.
    red_ish = (frame[..., 0] > 150) & (frame[..., 1] < 90)
    blue_ish = (frame[..., 2] > 150) & (frame[..., 0] < 90)
    assert frame.std() > 10 and (red_ish.any() or blue_ish.any())
    moved = env.step(env.joint_limits.mean(axis=1).astype(np.float32) + 0.5)[0]["image"]
    assert not np.array_equal(moved, frame)


@pytest.mark.filterwarnings("ignore:.*symmetric and normalized")
@pytest.mark.parametrize("task", TASKS)
def test_gymnasium_env_checker_and_registered_ids(task):
    from gymnasium.utils.env_checker import check_env

    check_env(make_env(task), skip_render_check=True)
    env = gym.make(GYM_IDS[task])
    obs, _ = env.reset(seed=0)
    assert env.observation_space.contains(obs)


def test_sim_imports_without_torch_or_the_model():
    """The simulator is its own package below the model: no torch, no vlash.policies / runtime / engines."""
    code = textwrap.dedent(
        """
        import importlib.abc, sys
        BLOCKED = ("torch", "vlash.policies", "vlash.runtime", "vlash.engines", "vlash.sampling", "vlash.server")
        class Block(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] == "torch" or name.startswith(BLOCKED):
                    raise ImportError(f"blocked: {name}")
        sys.meta_path.insert(0, Block())
        from vlash.sim import make_env
        env = make_env("whack")
        env.reset(seed=0)
        env.step(env.expert_action())
        print("ok")
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr
