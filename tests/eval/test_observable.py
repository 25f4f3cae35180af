"""The harness on a simulator whose state has extras (SimSettings.observe): the oracle plans as before, and the
future state `vlash` sends rolls the joints forward and keeps the extras as observed."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from robot_io.executors import ExecutorConfig
from vlash.errors import ConfigError
from vlash.eval.episode import EpisodeRunner
from vlash.eval.link import LinkTiming
from vlash.eval.policies import OraclePolicy
from vlash.eval.sweep import check_state
from vlash.sim import make_env
from vlash.sim.settings import load_sim_settings

CONFIGS = Path(__file__).parents[2] / "configs" / "eval"


class RecordingOracle(OraclePolicy):
    """The oracle, keeping every request the executor sent."""

    def __init__(self) -> None:
        super().__init__()
        self.requests: list = []

    def planner(self, env, commanded, action_stride):
        plan = super().planner(env, commanded, action_stride)
        return lambda infer: (self.requests.append(infer), plan(infer))[1]


def _run(env, mode: str, delay: int, seed: int, policy=None):
    executor = ExecutorConfig(mode=mode, execution_horizon=10)
    return EpisodeRunner(env, policy or OraclePolicy(), executor, LinkTiming(delay)).run(seed)


@pytest.mark.parametrize(
    ("task", "plain", "observable"),
    [("intercept", "velocity", "velocity-observable"), ("hold", "velocity-load", "velocity-load-observable")],
)
def test_the_oracle_runs_the_same_episodes_with_the_extras_on(task, plain, observable):
    envs = [make_env(task, settings=load_sim_settings(CONFIGS / f"{name}.yaml"), image_size=32)
            for name in (plain, observable)]  # fmt: skip
    assert len(envs[1].state_names) == 8
    solved = []
    for mode, delay in (("sync", 0), ("sync", 4), ("naive", 4), ("vlash", 4), ("faster", 4)):
        for seed in (0, 2):
            without, with_extras = (_run(env, mode, delay, seed) for env in envs)
            assert with_extras.success == without.success and with_extras.steps == without.steps
            np.testing.assert_array_equal(np.array(with_extras.commands), np.array(without.commands))
            assert np.array(with_extras.states).shape[1] == 8
            solved += [with_extras.success] if delay == 0 else []
    assert all(solved)  # the oracle solves these seeds at d = 0 with the extras on


def test_the_future_state_rolls_the_joints_forward_and_sends_the_extras_as_observed():
    env = make_env("hold", settings=load_sim_settings(CONFIGS / "velocity-load-observable.yaml"), image_size=32)
    policy = RecordingOracle()
    trace = _run(env, "vlash", 4, seed=2, policy=policy)
    commands = np.array(trace.commands, np.float64)
    futures = [r for r in policy.requests if r.future_state is not None]
    assert len(futures) >= 3 and trace.success
    moved = 0
    for request in futures:
        k, d = request.step_index, request.delay_steps
        observed, future = np.asarray(request.state), np.asarray(request.future_state)
        np.testing.assert_array_equal(observed, trace.states[k])
        np.testing.assert_array_equal(future[2:], observed[2:])  # joint velocities and the target: as observed
        rolled = observed[:2] + env.dt * commands[k : k + d].sum(axis=0)  # the committed velocities, integrated
        np.testing.assert_allclose(future[:2], rolled, atol=1e-5)
        moved += bool(np.abs(future[:2] - observed[:2]).max() > 1e-3)
    assert moved >= 1


def test_a_policy_trained_on_another_state_is_refused_with_the_settings_to_pass():
    names = ["joint0", "joint1", "joint0_velocity", "joint1_velocity"]
    check_state(names, 4, names, "p")  # the same state passes
    check_state(None, None, names, "oracle")  # the oracle plans from any
    with pytest.raises(ConfigError, match=r"p was trained on the state \['joint0', 'joint1'\] but the simulator "):
        check_state(["joint0", "joint1"], 2, names, "p")
    with pytest.raises(ConfigError, match="trained on a state of 2 entries .*--sim-config velocity-observable"):
        check_state(None, 2, names, "old-policy")  # recorded before state names were: its size decides
