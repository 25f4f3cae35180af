"""Training on an observable simulator (SimSettings.observe): episodes keep the state's extras and their names, the
future state rolls only the joints forward, and a policy trained so is evaluated in the settings it names."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("vlash.sim")

from tests.train.test_train_cmd import MICRO  # noqa: E402
from vlash.cli.main import main  # noqa: E402
from vlash.policies.formats.loading import load_policy  # noqa: E402
from vlash.resources import config_dir  # noqa: E402
from vlash.sim import load_sim_settings, make_env  # noqa: E402
from vlash.train import trainer  # noqa: E402
from vlash.train.dataset import load_episodes, save_episodes  # noqa: E402
from vlash.train.episodes import Episode, in_task_space, record_episodes  # noqa: E402
from vlash.train.errors import DatasetError  # noqa: E402
from vlash.train.samples import SampleSpec, build_sample, future_state  # noqa: E402

OBSERVABLE = load_sim_settings(config_dir("eval") / "velocity-observable.yaml", ["image_size=16"])
NAMES = make_env("intercept", settings=OBSERVABLE, image_size=16).state_names


@pytest.fixture(scope="module")
def episodes() -> list[Episode]:
    return record_episodes("intercept", 2, seed=0, image_size=16, progress=False, tail=50, settings=OBSERVABLE)


def test_episodes_keep_the_extras_and_their_names_through_the_dataset(tmp_path, episodes):
    e = episodes[0]
    assert e.state_names == tuple(NAMES) and e.states.shape == (len(e), 8) and (e.num_joints, e.state_dims) == (2, 8)
    np.testing.assert_array_equal(e.joint_states, e.states[:, :2])
    assert np.abs(e.states[:, 6:]).max() > 0.5  # the ball flies: its velocity is in the state
    loaded = load_episodes(save_episodes(tmp_path / "a.npz", episodes, OBSERVABLE.to_dict()))
    assert [x.state_names for x in loaded] == [tuple(NAMES)] * 2
    np.testing.assert_array_equal(loaded[1].states, episodes[1].states)
    (plain,) = load_episodes(save_episodes(tmp_path / "b.npz", [_joints_only(e)]))
    assert plain.state_names == () and plain.state_dims == 2  # a state of the joints alone needs no names
    with pytest.raises(DatasetError, match="differ in state_names"):
        save_episodes(tmp_path / "c.npz", [e, _joints_only(e)])


def _joints_only(e: Episode) -> Episode:
    return Episode(e.task, e.instruction, e.images, e.joint_states.copy(), e.actions, e.seed, tail=e.tail)


def test_a_longer_state_needs_one_name_per_entry(episodes):
    e = episodes[0]
    with pytest.raises(DatasetError, match="a longer state needs its state_names"):
        Episode(e.task, e.instruction, e.images, e.states, e.actions, e.seed)
    with pytest.raises(DatasetError, match="3 state names for 8 state dims"):
        Episode(e.task, e.instruction, e.images, e.states, e.actions, e.seed, state_names=("a", "b", "c"))
    with pytest.raises(DatasetError, match="state dims 1 != action dims 2"):
        Episode(e.task, e.instruction, e.images, e.states[:, :1], e.actions, e.seed, state_names=("a",))


def test_the_future_state_rolls_the_joints_and_keeps_the_extras_as_observed(episodes):
    e, dt = episodes[1], OBSERVABLE.arm.control_dt
    spec = SampleSpec(horizon=50, d_max=6, velocity_dt=dt)
    rng, shifted = np.random.default_rng(0), 0
    for t in range(0, len(e) - 8, 3):
        sample = build_sample(e, t, spec, rng)
        np.testing.assert_array_equal(sample.state[2:], e.states[t, 2:])  # joint velocities, target: as observed
        rolled = e.states[t, :2] + dt * e.actions[t : t + sample.delta].sum(axis=0, dtype=np.float64)
        np.testing.assert_allclose(sample.state[:2], rolled, atol=1e-6)
        shifted += bool(sample.delta and np.abs(e.actions[t : t + sample.delta]).max() > 0)
    assert shifted >= 3
    # position targets: the last committed target replaces the joints alone
    state = np.arange(5, dtype=np.float32)
    np.testing.assert_array_equal(future_state(state, np.full((3, 2), 9.0, np.float32), None), [9, 9, 2, 3, 4])
    np.testing.assert_array_equal(future_state(state, np.zeros((0, 2), np.float32), None), state)


def test_task_space_maps_the_joints_and_keeps_the_extras(episodes):
    e = episodes[0]
    space = trainer.simulator_task_space(OBSERVABLE)
    moved = in_task_space(e, space)
    np.testing.assert_allclose(moved.states[:, :2], space.to_model(e.joint_states), atol=1e-6)
    np.testing.assert_array_equal(moved.states[:, 2:], e.states[:, 2:])
    assert moved.state_names == e.state_names and moved.actions.shape == e.actions.shape


def test_record_train_and_evaluate_an_observable_task(tmp_path, capsys):
    """`vlash train --sim-config velocity-observable` records, trains and writes a policy whose state is the
    simulator's; `vlash eval` runs it in those settings and refuses settings that observe another state."""
    data, out = tmp_path / "intercept.npz", tmp_path / "policy"
    train = ["train", "--policy", MICRO, "--tasks", "intercept", "--episodes-per-task", "2", "--steps", "2"]
    train += ["--batch-size", "4", "--image-size", "16", "--dataset", str(data), "--out", str(out)]
    train += ["--sim-config", "velocity-observable", "--no-progress", "--json"]
    assert main(train) == 0, capsys.readouterr().err
    capsys.readouterr()
    assert [e.state_names for e in load_episodes(data)] == [tuple(NAMES)] * 2
    policy = load_policy(out)
    assert policy.metadata["state_names"] == NAMES and policy.metadata["sim"]["observe"] == ["joint_velocity", "target"]
    assert policy.processor.prompt_encoder.state_dims == 8 and policy.processor.action_dims == 2
    norm = policy.processor.normalizer
    assert norm.feature("observation.state").dim == 8 and norm.feature("action").dim == 2
    report = tmp_path / "eval.json"
    evaluate = ["eval", "--task", "intercept", "--policy", str(out), "--modes", "vlash", "--delays", "2"]
    evaluate += ["--episodes", "1", "--execution-horizon", "8", "--workers", "1"]
    assert main([*evaluate, "--sim-config", "velocity-observable", "--json", str(report)]) == 0
    (episode,) = json.loads(report.read_text())["episodes"]
    assert episode["steps"] > 0 and episode["requests"] >= 2  # the learned policy planned from the 8-entry state
    capsys.readouterr()
    assert main([*evaluate, "--sim-config", "velocity"]) == 2  # the joints alone: not the state it learned
    assert "was trained on the state ['joint0', 'joint1', 'joint0_velocity'" in capsys.readouterr().err
