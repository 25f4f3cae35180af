"""Training in other simulator settings (`--sim-config` / `--sim`, TrainConfig.sim): velocity actions under a load."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("vlash.sim")

from robot_io.executors import ExecutorConfig  # noqa: E402
from vlash.cli.main import main, parse_args  # noqa: E402
from vlash.cli.train_cmd import config_from_args  # noqa: E402
from vlash.eval.episode import EpisodeRunner  # noqa: E402
from vlash.eval.link import LinkTiming  # noqa: E402
from vlash.eval.policies import LearnedPolicy  # noqa: E402
from vlash.planar_arm import forward  # noqa: E402
from vlash.policies.formats.loading import load_policy  # noqa: E402
from vlash.resources import config_dir  # noqa: E402
from vlash.sim import load_sim_settings, make_env  # noqa: E402
from vlash.train import trainer  # noqa: E402
from vlash.train.config import TrainConfig  # noqa: E402
from vlash.train.dataset import load_episodes, recorded_sim_settings, save_episodes  # noqa: E402
from vlash.train.episodes import in_task_space, record_episodes  # noqa: E402
from vlash.train.errors import ConfigError  # noqa: E402

MICRO = str(Path(__file__).with_name("pi05-micro.yaml"))
VELOCITY_LOAD = config_dir("eval") / "velocity-load.yaml"


def test_velocity_settings_resolve_relative_actions_and_the_sample_spec():
    assert TrainConfig().relative_actions is True and TrainConfig().sample_spec(50).velocity_dt is None
    config = TrainConfig(sim={"action_interface": "velocity"})
    assert config.relative_actions is False  # velocities are not offsets from the state
    assert config.sample_spec(50).velocity_dt == pytest.approx(1 / 30)
    assert (
        TrainConfig(sim={"action_interface": "velocity"}, augment=False).sample_spec(50).velocity_dt
        == config.velocity_dt
    )
    assert TrainConfig(sim={"action_interface": "velocity", "arm": {"control_dt": 0.05}}).velocity_dt == 0.05
    assert config.sim_settings().image_size == 96 and TrainConfig(image_size=64).sim_settings().image_size == 64
    # velocities are scaled to unit variance (mostly zero: by their range their variance is ~0.06)
    assert (config.action_norm, TrainConfig().action_norm) == ("MEAN_STD", "QUANTILES")
    assert TrainConfig(sim={"action_interface": "velocity"}, action_norm="QUANTILES").action_norm == "QUANTILES"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"sim": {"action_interface": "velocity"}, "relative_actions": True}, "relative_actions must be off"),
        ({"sim": {"action_interface": "ee_delta"}}, "ee_delta .* not supported"),
        ({"sim": {"disturbance": {"scale": -1}}}, "sim: .*scale"),
        ({"sim": {"image_size": 64}}, "sim image_size 64 != image_size 96"),
        ({"sim": "velocity"}, "sim must map"),
        ({"action_norm": "QUANTILE10"}, "action_norm must be one of QUANTILES, MEAN_STD, MIN_MAX"),
    ],
)
def test_settings_that_do_not_apply_are_refused(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        TrainConfig(**kwargs)


def test_sim_flags_reach_the_config():
    config = config_from_args(parse_args(["train", "--out", "p"]))
    assert config.sim == {} and config.image_size == 96 and config.relative_actions is True  # today's run
    flags = ["train", "--out", "p", "--sim-config", "velocity-load", "--sim", "disturbance.scale=0.15"]
    config = config_from_args(parse_args(flags))
    want = load_sim_settings(VELOCITY_LOAD, ["disturbance.scale=0.15"]).to_dict()
    assert config.sim == want and config.relative_actions is False
    assert config.sim_settings().disturbance.scale == 0.15 and config.sim_settings().action_interface == "velocity"
    sized = config_from_args(parse_args([*flags, "--image-size", "64"]))
    assert sized.image_size == 64 and sized.sim["image_size"] == 64
    assert config_from_args(parse_args(["train", "--out", "p", "--sim", "image_size=48"])).image_size == 48
    assert config_from_args(parse_args(["train", "--out", "p", "--sim-config", str(VELOCITY_LOAD)])).sim == {
        **load_sim_settings(VELOCITY_LOAD).to_dict()
    }


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--sim", "action_interface=ee_delta"], "ee_delta (end-effector increments) is not supported"),
        (["--sim-config", "nope"], "--sim-config: no such file nope; shipped settings:"),
        (["--sim", "disturbance.kind=wind"], "--sim-config / --sim: "),
        (["--tasks", "reach", "--sim", "task.hold_steps=45"], "task 'reach': unknown setting 'task.hold_steps'"),
    ],
)
def test_bad_sim_flags_are_one_line_errors(tmp_path, capsys, flags, message):
    out = tmp_path / "p"
    assert main(["train", "--out", str(out), "--policy", MICRO, "--steps", "1", "--no-progress", *flags]) == 2
    err = capsys.readouterr().err
    assert message in err and err.startswith("vlash train: error:") and not out.exists()


def test_velocity_episodes_in_task_space_are_end_effector_velocities_along_each_plan():
    settings = load_sim_settings(VELOCITY_LOAD)
    (e,) = record_episodes("hold", 1, seed=0, image_size=32, progress=False, tail=50, plan_steps=55, settings=settings)
    space = trainer.simulator_task_space(settings)
    assert space.kind == "planar_arm_velocity" and space.control_dt == settings.arm.control_dt
    moved = in_task_space(e, space)
    links, dt = settings.arm.link_lengths, settings.arm.control_dt
    np.testing.assert_allclose(moved.states, forward(e.states, links), rtol=1e-6, atol=1e-6)  # end-effector positions
    t = 3  # approaching: each frame's plan runs from that frame's state
    # integrated from the state's end effector, the model's plan reaches the end effector of the joint path
    ee_path = forward(e.states[t] + dt * np.cumsum(e.plans[t], axis=0), links)
    np.testing.assert_allclose(forward(e.states[t], links) + dt * np.cumsum(moved.plans[t], axis=0), ee_path, atol=1e-5)
    np.testing.assert_allclose(space.to_robot(moved.plans[t], e.states[t]), e.plans[t], atol=1e-4)
    ee_step = forward(e.states[t] + dt * e.actions[t], links)  # and so does each frame's action, one step
    np.testing.assert_allclose(forward(e.states[t], links) + dt * moved.actions[t], ee_step, atol=1e-5)
    # the tail runs from the state after the last action
    np.testing.assert_allclose(space.to_robot(moved.tail, e.states[-1] + dt * e.actions[-1]), e.tail, atol=1e-4)
    assert moved.tail.shape == e.tail.shape and np.abs(moved.plans[t]).max() > 0.5  # world units / s, moving


def test_a_task_space_velocity_run_writes_a_policy_that_commands_joint_velocities(tmp_path):
    settings = load_sim_settings(VELOCITY_LOAD, ["image_size=32"])
    episodes = record_episodes("hold", 2, seed=0, image_size=32, progress=False, tail=50, settings=settings)
    config = TrainConfig(
        policy=MICRO, steps=2, batch_size=4, warmup_steps=1, log_every=1, progress=False, vision_probe_every=0,
        out=str(tmp_path / "p"), image_size=32, sim=settings.to_dict(), task_space=True,
    )  # fmt: skip
    policy = load_policy(trainer.train(config, episodes=episodes).out)
    assert policy.processor.transform == trainer.simulator_task_space(settings)
    assert policy.metadata["config"]["task_space"] is True and policy.processor.relative_mask is None
    env = make_env("hold", settings=settings, image_size=32)
    runner = EpisodeRunner(env, LearnedPolicy(policy), ExecutorConfig(mode="sync"), LinkTiming(0), task="hold")
    commands = np.array(runner.run(0).commands)
    assert commands.shape[1] == 2 and np.isfinite(commands).all() and np.abs(commands).max() > 0


def test_recording_runs_the_expert_in_the_given_settings():
    settings = load_sim_settings(VELOCITY_LOAD)
    (e,) = record_episodes("hold", 1, seed=0, image_size=32, progress=False, tail=50, plan_steps=55, settings=settings)
    env = make_env("hold", seed=0, settings=settings, image_size=32)
    obs, _ = env.reset(seed=e.seed)
    for t in range(len(e)):  # the recorded actions are the expert's velocities: they replay the episode
        np.testing.assert_array_equal(obs["image"], e.images[t])
        np.testing.assert_array_equal(obs["state"], e.states[t])
        np.testing.assert_array_equal(e.actions[t], env.expert_action())
        np.testing.assert_array_equal(e.plans[t], env.expert_chunk(55))
        obs, *_ = env.step(e.actions[t])
    np.testing.assert_array_equal(e.tail, env.expert_chunk(50))
    assert np.abs(e.actions).max() <= settings.arm.max_velocity + 1e-6 and e.success
    (default,) = record_episodes("hold", 1, seed=0, image_size=32, progress=False)
    assert not np.allclose(default.actions[5:10], e.actions[5:10])  # joint targets, not velocities


def test_a_velocity_run_records_in_its_settings_and_says_so(tmp_path, capsys, monkeypatch):
    data, out = tmp_path / "hold.npz", tmp_path / "policy"
    args = ["train", "--policy", MICRO, "--tasks", "hold", "--episodes-per-task", "2", "--steps", "2"]
    args += ["--batch-size", "4", "--image-size", "32", "--dataset", str(data), "--out", str(out)]
    args += ["--no-progress", "--json"]
    velocity = [*args, "--sim-config", "velocity-load", "--vision-aux-weight", "1"]  # its labels replay the episodes
    monkeypatch.setattr("sys.argv", ["vlash", *velocity])  # the command config.yaml records
    assert main(velocity) == 0, capsys.readouterr().err
    want = load_sim_settings(VELOCITY_LOAD, ["image_size=32"]).to_dict()
    assert recorded_sim_settings(data) == want
    policy = load_policy(out)
    assert policy.metadata["sim"] == want and policy.metadata["config"]["sim"] == want
    assert "--sim-config velocity-load" in policy.metadata["command"]
    assert policy.metadata["config"]["relative_actions"] is False and policy.processor.relative_mask is None
    assert policy.metadata["vision_aux_loss"] > 0
    action_norm = policy.processor.normalizer.feature("action")
    assert action_norm.mode == "MEAN_STD" and action_norm.stats["max"].max() > 2.0  # rad/s: the expert's up to 2.7
    episodes = load_episodes(data)
    env = make_env("hold", seed=0, settings=load_sim_settings(VELOCITY_LOAD), image_size=32)
    env.reset(seed=episodes[0].seed)
    np.testing.assert_array_equal(episodes[0].actions[0], env.expert_action())
    capsys.readouterr()
    # the same dataset for a run in the default settings (over the same --out): its actions mean something else
    assert main([*args, "--overwrite"]) == 2
    assert "recorded with other simulator settings (action_interface: 'velocity' (run: 'position')" in (
        capsys.readouterr().err
    )


def test_datasets_remember_their_settings(tmp_path):
    (e,) = record_episodes("hold", 1, seed=0, image_size=16, progress=False)
    assert recorded_sim_settings(save_episodes(tmp_path / "a.npz", [e])) is None  # written without: the defaults
    doc = load_sim_settings(VELOCITY_LOAD).to_dict()
    assert recorded_sim_settings(save_episodes(tmp_path / "b.npz", [e], doc)) == doc
