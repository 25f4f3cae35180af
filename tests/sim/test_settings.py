"""SimSettings: files, KEY=VALUE overrides, errors that name the key, and envs built from them."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

from vlash.sim import (
    GYM_IDS,
    ArmConfig,
    DisturbanceConfig,
    HoldConfig,
    SimConfigError,
    SimSettings,
    load_sim_settings,
    make_env,
)

CONFIGS = Path(__file__).resolve().parents[2] / "configs" / "eval"


def test_shipped_eval_configs():
    assert load_sim_settings(CONFIGS / "position.yaml") == SimSettings() == load_sim_settings(None)
    velocity = load_sim_settings(CONFIGS / "velocity.yaml")
    assert velocity == SimSettings(action_interface="velocity") and not velocity.randomized
    loaded = load_sim_settings(str(CONFIGS / "velocity-load.yaml"))
    assert loaded.action_interface == "velocity" and loaded.disturbance == DisturbanceConfig("load", 0.3, (1.5, 4.0))


def test_overrides_with_dotted_keys_and_yaml_values():
    settings = load_sim_settings(
        CONFIGS / "velocity.yaml",
        ["disturbance.kind=load", "disturbance.scale=0.3", "arm.max_velocity=2.5", "arm.link_lengths=[0.45,0.4]",
         "task.hold_steps=45", "image_size=64", "sensor_noise=0", "observation_latency=2"],
    )  # fmt: skip
    assert settings.arm == ArmConfig(max_velocity=2.5, link_lengths=(0.45, 0.4))
    assert settings.disturbance.kind == "load" and settings.disturbance.scale == 0.3
    assert settings.task_overrides() == {"hold_steps": 45} and settings.image_size == 64
    assert settings.sensor_noise == 0.0 and isinstance(settings.sensor_noise, float)
    assert load_sim_settings(None, ["disturbance.scale=0.1", "disturbance.scale=0.2"]).disturbance.scale == 0.2


def test_settings_are_picklable_hashable_and_round_trip_through_plain_dicts():
    settings = load_sim_settings(CONFIGS / "velocity-load.yaml", ["task.radii=[0.4, 0.8]", "arm.max_velocity=2"])
    doc = json.loads(json.dumps(settings.to_dict()))
    assert SimSettings.from_dict(doc) == settings == pickle.loads(pickle.dumps(settings))
    assert hash(settings) == hash(SimSettings.from_dict(doc))
    assert doc["task"] == {"radii": [0.4, 0.8]} and doc["disturbance"]["kind"] == "load"
    assert set(doc) == {"arm", "planner", "action_interface", "disturbance", "sensor_noise", "observation_latency",
                        "image_size", "task"}  # fmt: skip


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("speed=3", r"unknown sim setting 'speed'"),
        ("arm.speed=3", r"unknown setting 'arm.speed'"),
        ("disturbance.kind.x=1", r"'disturbance.kind' must be a string, got \{'x': 1\}"),
        ("arm.max_velocity=fast", r"'arm.max_velocity' must be a number, got 'fast'"),
        ("arm.max_velocity=-1", r"'arm.max_velocity'.*positive"),
        ("arm.link_lengths=[0.45]", r"'arm.link_lengths' must be a list of 2 values"),
        ("arm.link_lengths=[0.8,0.5]", r"'arm.link_lengths'.*sum to <= 1"),
        ("action_interface=torque", r"action_interface must be one of position, velocity, ee_delta"),
        ("disturbance.kind=wind", r"'disturbance.kind'.*none, load, drift"),
        ("disturbance.scale=-0.1", r"'disturbance.scale'.*>= 0"),
        ("disturbance.period_range=[4, 1]", r"'disturbance.period_range'"),
        ("image_size=8", r"image_size must be an int in \[16, 1024\]"),
        ("image_size=64.5", r"'image_size' must be an int"),
        ("observation_latency=true", r"'observation_latency' must be an int"),
        ("sensor_noise=-1", r"sensor_noise must be a finite number >= 0"),
        ("planner.gain=", r"'planner.gain' must be a number, got None"),
        ("arm=3", r"'arm' must be a mapping"),
        ("scale 0.3", r"KEY=VALUE"),
    ],
)
def test_bad_settings_raise_errors_that_name_the_key(override, message):
    with pytest.raises(SimConfigError, match=message):
        load_sim_settings(None, [override])


def test_task_settings_are_checked_against_the_task_the_env_is_built_for():
    settings = load_sim_settings(None, ["task.hold_steps=45"])
    env = make_env("hold", settings=settings)
    assert env.task.config == HoldConfig(hold_steps=45)
    with pytest.raises(SimConfigError, match=r"task 'reach': unknown setting 'task.hold_steps'"):
        make_env("reach", settings=settings)
    with pytest.raises(SimConfigError, match=r"task 'hold': setting 'task.hold_steps' must be an int"):
        make_env("hold", settings=load_sim_settings(None, ["task.hold_steps=long"]))
    with pytest.raises(SimConfigError, match=r"task 'hold': setting 'task.hold_steps'.*<= max_steps 150"):
        make_env("hold", settings=load_sim_settings(None, ["task.hold_steps=500"]))
    given = make_env("hold", settings=settings, task_config=HoldConfig(max_steps=200))  # overrides apply on top
    assert given.task.config == HoldConfig(max_steps=200, hold_steps=45)


def test_settings_files_errors(tmp_path):
    with pytest.raises(SimConfigError, match="cannot read sim settings"):
        load_sim_settings(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("arm: [1, 2\n")
    with pytest.raises(SimConfigError, match=r"not valid YAML \(line"):
        load_sim_settings(bad)
    bad.write_text("- action_interface: velocity\n")
    with pytest.raises(SimConfigError, match="must hold a mapping"):
        load_sim_settings(bad)
    bad.write_text("arm:\n  max_velocity: 2\nextra: 1\n")
    with pytest.raises(SimConfigError, match="unknown sim setting 'extra'"):
        load_sim_settings(bad)
    with pytest.raises(SimConfigError, match="list of KEY=VALUE"):
        load_sim_settings(None, "image_size=64")


def test_envs_follow_settings_and_keyword_arguments_override_them():
    settings = load_sim_settings(CONFIGS / "velocity-load.yaml", ["image_size=32", "arm.max_velocity=2.0"])
    env = make_env("hold", seed=1, settings=settings)
    obs, _ = env.reset()
    assert env.action_interface == "velocity" and obs["image"].shape == (32, 32, 3)
    assert env.action_space.high.tolist() == [2.0, 2.0] and env.settings == settings
    other = make_env("hold", settings=settings, image_size=48, action_interface="ee_delta")
    assert other.reset(seed=0)[0]["image"].shape == (48, 48, 3) and other.action_interface == "ee_delta"
    assert other.settings.disturbance == settings.disturbance
    made = gym.make(GYM_IDS["hold"], settings=settings)
    assert made.unwrapped.action_interface == "velocity" and GYM_IDS["hold"] == "vlash/Hold-v0"
    with pytest.raises(SimConfigError, match="must be a SimSettings"):
        make_env("hold", 0, 64)  # the old positional image_size is refused, not misread
    positional = make_env("reach", 0, load_sim_settings(CONFIGS / "position.yaml"))
    np.testing.assert_array_equal(positional.reset(seed=2)[0]["state"], make_env("reach").reset(seed=2)[0]["state"])
