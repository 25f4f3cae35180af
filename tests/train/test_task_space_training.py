"""`TrainConfig.task_space`: a run on reach episodes learns end-effector positions and its policy acts in joints."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("vlash.sim")

from robot_io.executors import ExecutorConfig  # noqa: E402
from vlash.eval.episode import EpisodeRunner  # noqa: E402
from vlash.eval.link import LinkTiming  # noqa: E402
from vlash.eval.policies import LearnedPolicy  # noqa: E402
from vlash.policies.formats.loading import load_policy  # noqa: E402
from vlash.sim import make_env  # noqa: E402
from vlash.sim.settings import SimSettings  # noqa: E402
from vlash.train import trainer  # noqa: E402
from vlash.train.config import TrainConfig  # noqa: E402
from vlash.train.episodes import in_task_space, record_episodes  # noqa: E402

MICRO = str(Path(__file__).with_name("pi05-micro.yaml"))


@pytest.fixture(scope="module")
def reach_episodes():
    return record_episodes("reach", 3, seed=0, image_size=32, progress=False, tail=50)


def test_episodes_in_task_space_are_the_forward_kinematics_of_the_recorded_ones(reach_episodes):
    space = trainer.simulator_task_space(SimSettings())
    e = reach_episodes[0]
    moved = in_task_space(e, space)
    np.testing.assert_allclose(moved.states, space.to_model(e.states))
    np.testing.assert_allclose(moved.actions, space.to_model(e.actions))
    np.testing.assert_allclose(moved.tail, space.to_model(e.tail))
    assert moved.images is e.images and moved.seed == e.seed and moved.instruction == e.instruction


def test_a_task_space_run_writes_a_policy_that_commands_joints(tmp_path, reach_episodes):
    config = TrainConfig(
        policy=MICRO, steps=3, batch_size=4, lr=3e-3, warmup_steps=1, log_every=1, progress=False,
        vision_probe_every=0, out=str(tmp_path / "p"), task_space=True, vision_aux_weight=1.0, target_aux_weight=1.0,
    )  # fmt: skip
    result = trainer.train(config, episodes=reach_episodes)  # the heads' labels replay the joint-space episodes
    assert result.metadata["target_aux_loss"] > 0
    policy = load_policy(result.out)
    assert policy.processor.transform == trainer.simulator_task_space(SimSettings())
    state_q99 = policy.processor.normalizer.feature("observation.state").stats["q99"]
    assert (np.abs(state_q99) <= sum(policy.processor.transform.link_lengths)).all()  # positions, not angles
    env = make_env("reach", image_size=32)
    trace = EpisodeRunner(env, LearnedPolicy(policy), ExecutorConfig(mode="sync"), LinkTiming(0), task="reach").run(0)
    commands = np.array(trace.commands)
    assert commands.shape[1] == 2 and np.isfinite(commands).all()
    # joint targets within the arm's limits; the first chunk (s = 10 steps) stays on the elbow branch of the
    # reset state, or at full extension (elbow 0), where the observed state picks the next chunk's branch
    limits = np.array(policy.processor.transform.joint_limits, np.float32)
    assert ((commands >= limits[:, 0]) & (commands <= limits[:, 1])).all()
    assert (commands[:10, 1] * np.sign(trace.states[0][1]) >= 0).all() and (commands[:10, 1] != 0).any()
