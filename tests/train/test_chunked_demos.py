"""Demonstrations executed the way a chunk policy runs (vlash.train.chunked_demos, TrainConfig.demo_*)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("vlash.sim")

from vlash.cli.main import main  # noqa: E402
from vlash.resources import config_dir  # noqa: E402
from vlash.sim import load_sim_settings  # noqa: E402
from vlash.train.chunked_demos import ChunkedExecution, ChunkSchedule  # noqa: E402
from vlash.train.config import TrainConfig  # noqa: E402
from vlash.train.dataset import recorded_execution, save_episodes  # noqa: E402
from vlash.train.episodes import record_episodes  # noqa: E402
from vlash.train.errors import ConfigError, DatasetError, TrainError  # noqa: E402
from vlash.train.recording import check_dataset_settings  # noqa: E402

MICRO = str(Path(__file__).with_name("pi05-micro.yaml"))
OBSERVABLE = load_sim_settings(config_dir("eval") / "velocity-observable.yaml")


def run_schedule(execute_steps: int, delay: int, frames: int) -> list[tuple[int, int]]:
    """(frame the running plan was made at, index into it) of every frame: plan t's action i is [t, i]."""
    schedule = ChunkSchedule(execute_steps, delay)
    plans = [np.array([[t, i] for i in range(schedule.plan_steps)]) for t in range(frames)]
    return [tuple(int(v) for v in schedule.action(t, plans[t])) for t in range(frames)]


def test_without_a_delay_each_plan_runs_its_first_s_actions():
    assert run_schedule(3, 0, 7) == [(0, 0), (0, 1), (0, 2), (3, 0), (3, 1), (3, 2), (6, 0)]


def test_under_a_delay_the_previous_plan_runs_on_until_the_new_one_takes_over():
    # plan 3 takes over 2 steps after frame 3, at its index 2 (the actions for frame 5)
    assert run_schedule(3, 2, 9) == [(0, 0), (0, 1), (0, 2), (0, 3), (0, 4), (3, 2), (3, 3), (3, 4), (6, 2)]


def test_a_plan_too_short_for_its_chunk_is_refused():
    schedule = ChunkSchedule(3, 1)
    with pytest.raises(TrainError, match="too short"):
        for t in range(5):
            schedule.action(t, np.zeros((2, 1)))


@pytest.mark.parametrize(("steps", "delay", "match"), [(0, 0, "execute_steps"), (4, 4, "delay_max"), (4, -1, "delay")])
def test_bad_executions_are_refused(steps, delay, match):
    with pytest.raises(TrainError, match=match):
        ChunkedExecution(steps, delay)


def test_each_episode_draws_its_delay_from_its_seed():
    execution = ChunkedExecution(10, 8)
    delays = [execution.schedule(seed).delay for seed in range(200)]
    assert delays == [execution.schedule(seed).delay for seed in range(200)]
    assert set(delays) == set(range(9))
    assert ChunkedExecution().per_step and not ChunkedExecution(10, 0).per_step


def test_recorded_frames_run_stale_plans_and_keep_each_frames_own_plan_as_its_label():
    execution = ChunkedExecution(5, 3)
    episodes = record_episodes(
        "intercept", 6, seed=2, image_size=16, progress=False, plan_steps=8, settings=OBSERVABLE, execution=execution
    )
    for e in episodes:
        delay = execution.schedule(e.seed).delay
        for t in range(len(e)):
            # the chunk planned at the last request at least `delay` steps back (the first runs from frame 0)
            start = max(0, (t - delay) // 5 * 5)
            np.testing.assert_array_equal(e.actions[t], e.plans[start][t - start])
    # the frames differ from the replanning expert's, whose every action is its own plan's first
    plain = record_episodes("intercept", 6, seed=2, image_size=16, progress=False, plan_steps=8, settings=OBSERVABLE)
    assert all(np.array_equal(e.actions, e.plans[:, 0]) for e in plain)
    assert not all(np.array_equal(e.actions, e.plans[:, 0]) for e in episodes)


def test_per_step_execution_records_the_plain_expert():
    kwargs = {"image_size": 16, "progress": False, "settings": OBSERVABLE}
    (plain,) = record_episodes("intercept", 1, seed=4, **kwargs)
    (same,) = record_episodes("intercept", 1, seed=4, execution=ChunkedExecution(1, 0), **kwargs)
    np.testing.assert_array_equal(plain.actions, same.actions)
    with pytest.raises(TrainError, match="plan_steps"):
        record_episodes("intercept", 1, seed=4, execution=ChunkedExecution(10, 0), **kwargs)


def test_training_config_needs_plan_labels_for_chunked_demonstrations():
    with pytest.raises(ConfigError, match="plan_labels"):
        TrainConfig(demo_execute_steps=10)
    with pytest.raises(ConfigError, match="demo_delay_max"):
        TrainConfig(demo_execute_steps=10, demo_delay_max=10, plan_labels=True)
    assert TrainConfig(demo_execute_steps=10, demo_delay_max=8, plan_labels=True).demo_execution().delay_max == 8


def test_datasets_remember_how_the_expert_ran_and_a_run_asking_otherwise_is_refused(tmp_path, capsys):
    (e,) = record_episodes("hold", 1, seed=0, image_size=16, progress=False)
    assert recorded_execution(save_episodes(tmp_path / "a.npz", [e])) is None  # written without: replanning
    data, out = tmp_path / "intercept.npz", tmp_path / "policy"
    args = ["train", "--policy", MICRO, "--tasks", "intercept", "--sim-config", "velocity-observable"]
    args += ["--episodes-per-task", "2", "--steps", "1", "--batch-size", "4", "--image-size", "32", "--plan-labels"]
    args += ["--dataset", str(data), "--out", str(out), "--no-progress", "--json", "--vision-probe-every", "0"]
    chunked = [*args, "--demo-execute-steps", "10", "--demo-delay-max", "4", "--no-only-successful"]
    assert main(chunked) == 0, capsys.readouterr().err
    assert recorded_execution(data) == {"execute_steps": 10, "delay_max": 4}
    capsys.readouterr()
    assert main([*args, "--overwrite"]) == 2  # the plain expert asked for, the chunked one recorded
    assert "the expert in chunks of 10 steps after delays of 0..4 (run: replanning every step)" in (
        capsys.readouterr().err
    )


@pytest.mark.parametrize("execution", [{"execute_steps": 0, "delay_max": 0}, {"steps": 10}])
def test_a_dataset_with_a_malformed_execution_is_refused_by_name(tmp_path, execution):
    (e,) = record_episodes("hold", 1, seed=0, image_size=16, progress=False)
    data = save_episodes(tmp_path / "bad.npz", [e], execution=execution)
    with pytest.raises(DatasetError, match=r"bad\.npz: execution .* is not an expert execution"):
        check_dataset_settings(TrainConfig(dataset=str(data)))
