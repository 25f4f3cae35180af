"""robot_io.dataset: runs recorded as LeRobot datasets (format v3.0), checked the way LeRobot 0.6.1's loader reads
them (tests/robot_io/lerobot_format.py); episodes, appending, what is refused, what a killed run leaves, and that
the control loop only hands frames over."""

from __future__ import annotations

import json
import os
import threading

import numpy as np
import pytest

from robot_io.control import SimulatedClock
from robot_io.dataset import DatasetError, check_dataset, open_dataset, recorder
from robot_io.dataset.directory import JOURNAL, MARKER, partial_path
from robot_io.executors import ExecutorConfig
from robot_io.runner import RunConfig, Runner
from tests.fakes import PointArm, point_metadata, ramp_planner
from vlash.sim.policy_link import SimulatedPolicyLink

pytest.importorskip("pyarrow")  # the [dataset] extra; the robot side's own install (tests/packaging) has neither
pytest.importorskip("PIL")
from tests.robot_io.lerobot_format import check_dataset as check_lerobot_format  # noqa: E402

RATE = 30


@pytest.fixture(autouse=True)
def keep_every_frame(monkeypatch):
    """A simulated clock runs the loop far faster than 30 Hz: let every frame wait for the worker."""
    monkeypatch.setattr(recorder, "MAX_FRAMES_QUEUED", 10_000)


def tick_row(step: int, image: np.ndarray) -> dict:
    """A tick row as the runner hands it to a trace that wants images."""
    command = np.full(2, step, np.float32)
    return dict(t=step / RATE, step=step, state=np.zeros(2), command=command, held=False, chunk=1, index=step,
                tick_ms=1.0, reset=False, mode="vlash", images={"cam": image}, prompt="")  # fmt: skip


def point_run(target, ticks=100, episode_steps=40, prompt="", **open_args):
    """A PointArm (2 joints, a 4 x 4 camera, a new episode every `episode_steps` observations) under a ramp policy,
    recorded to `target`; (recorder, result)."""
    clock = SimulatedClock()
    client = SimulatedPolicyLink(ramp_planner(20), point_metadata(), clock, latency_s=0.05)
    executor = ExecutorConfig("vlash", execution_horizon=5, initial_delay=2, prompt=prompt)
    config = RunConfig(executor, rate_hz=RATE, duration_s=ticks / RATE, trace_ticks=ticks)
    arm = PointArm(episode_steps=episode_steps)
    with open_dataset(target, arm, RATE, "point", prompt, **open_args) as rec:
        result = Runner(arm, client, config, clock, traces=[rec]).run()
    return rec, result


def test_a_run_is_a_lerobot_dataset_of_what_the_robot_observed_and_was_sent(tmp_path):
    rec, result = point_run(tmp_path / "ds", prompt="move right", run={"mode": "vlash"})
    assert rec.error is None and (rec.episodes, rec.frames, rec.dropped_frames) == (3, 100, 0)
    info, episodes, data, tasks = check_lerobot_format(tmp_path / "ds")
    assert (info["fps"], info["robot_type"], tasks) == (RATE, "point", ["move right"])
    assert [e["length"] for e in episodes] == [40, 40, 20]  # a new episode at each reset tick
    assert info["features"]["observation.state"]["names"] == ["joint0", "joint1"]
    assert info["features"]["observation.images.cam"]["shape"] == [4, 4, 3]
    np.testing.assert_array_equal(data["action"], result.commands)  # what was actually sent, tick by tick
    np.testing.assert_array_equal(data["observation.state"], result.states)
    assert data["vlash.step"] == result.steps.tolist() and data["vlash.held"] == result.held.astype(int).tolist()
    assert data["vlash.chunk_id"] == result.chunk_ids.tolist()
    modes = {(c, m) for c, m in zip(data["vlash.chunk_id"], data["vlash.mode"], strict=True)}
    firsts = {e["dataset_from_index"] for e in episodes}  # each episode's first chunk is a sync one
    assert all((c < 0) == (m == "") for c, m in modes) and {m for _, m in modes} == {"", "sync", "vlash"}
    assert all(data["vlash.held"][i] == 1 for i in firsts)  # waiting for the episode's first chunk
    lines = [json.loads(line) for line in (tmp_path / "ds/meta/vlash/run-000.jsonl").read_text().splitlines()]
    assert lines[0]["kind"] == "run" and lines[0]["mode"] == "vlash" and lines[-1]["kind"] == "summary"
    assert [line["frames"] for line in lines if line["kind"] == "episode"] == [40, 40, 20]
    assert sum(line["kind"] == "chunk" for line in lines) == result.summary.requests
    assert not partial_path(tmp_path / "ds").exists()


def test_the_prompt_defaults_to_each_observation_s(tmp_path):
    arm_prompts = iter(["reach red", "reach red", "reach blue"] * 100)
    get = PointArm.get_observation
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(PointArm, "get_observation", lambda self: {**get(self), "prompt": next(arm_prompts)})
        point_run(tmp_path / "ds", ticks=30)
    _, episodes, _, tasks = check_lerobot_format(tmp_path / "ds")
    assert tasks == ["reach red", "reach blue"] and episodes[0]["tasks"] == ["reach red", "reach blue"]


def test_a_second_run_is_appended_and_one_of_another_shape_refused(tmp_path):
    point_run(tmp_path / "ds", ticks=50, prompt="a")
    point_run(tmp_path / "ds", ticks=30, prompt="b")
    info, episodes, data, tasks = check_lerobot_format(tmp_path / "ds")
    assert (info["total_episodes"], info["total_frames"], tasks) == (3, 80, ["a", "b"])  # 40 + 10, then 30
    assert [(e["data/file_index"], e["meta/episodes/file_index"]) for e in episodes] == [(0, 0), (0, 0), (1, 1)]
    assert sorted(p.name for p in (tmp_path / "ds/meta/vlash").iterdir()) == ["run-000.jsonl", "run-001.jsonl"]
    stats = json.loads((tmp_path / "ds/meta/stats.json").read_text())
    assert stats["action"]["count"] == [80] and stats["task_index"]["max"] == [1.0]
    before = sorted(p.read_bytes() for p in (tmp_path / "ds").rglob("*") if p.is_file())
    with pytest.raises(DatasetError, match=r"cannot be appended: it was recorded at 30 Hz, this run runs at 15 Hz"):
        open_dataset(tmp_path / "ds", PointArm(), 15, "point")
    with pytest.raises(DatasetError, match=r"feature 'action': its shape is \[2\], this run's \[3\]"):
        open_dataset(tmp_path / "ds", PointArm(joints=3), RATE, "point")
    assert sorted(p.read_bytes() for p in (tmp_path / "ds").rglob("*") if p.is_file()) == before
    assert not partial_path(tmp_path / "ds").exists()


@pytest.mark.parametrize("kind", ["file", "folder of someone else's", "run in progress or killed"])
def test_what_is_not_ours_is_refused_before_the_run(tmp_path, kind):
    target = tmp_path / "ds"
    if kind == "file":
        target.write_text("x")
    elif kind == "run in progress or killed":
        partial_path(target).mkdir()
    else:
        target.mkdir()
        (target / "notes.txt").write_text("mine")
    match = {"file": "is a file", "run in progress or killed": "remove it to record here"}.get(kind, "is not empty")
    with pytest.raises(DatasetError, match=match):
        check_dataset(target)
    (tmp_path / "empty").mkdir()
    check_dataset(tmp_path / "empty")  # an empty folder is recorded into


def test_a_killed_run_leaves_no_dataset_and_an_interrupted_append_is_finished(tmp_path, monkeypatch):
    target = tmp_path / "ds"
    rec = open_dataset(target, PointArm(), RATE, "point")
    rec.tick(tick_row(0, np.zeros((4, 4, 3), np.uint8)))
    assert not target.exists() and partial_path(target).is_dir()  # killed here: never closed
    rec.close()
    check_lerobot_format(target)
    replace, calls = os.replace, []

    def killed_after_the_first_move(source, destination):  # the marker, run.jsonl, the journal, one file: killed
        calls.append(source)
        if len(calls) == 5:
            raise KeyboardInterrupt
        replace(source, destination)

    monkeypatch.setattr(os, "replace", killed_after_the_first_move)
    with pytest.raises(KeyboardInterrupt):
        point_run(target, ticks=20)
    monkeypatch.setattr(os, "replace", replace)
    assert (partial_path(target) / JOURNAL).is_file()
    with pytest.raises(AssertionError):
        check_lerobot_format(target)  # a data file info.json does not count yet
    check_dataset(target)  # not refused: the journal says how to finish
    point_run(target, ticks=10)  # the next run finishes the commit first
    info, episodes, _, _ = check_lerobot_format(target)
    assert info["total_frames"] == 1 + 20 + 10 and len(episodes) == 3


def _foreign_partial(target, journal: str, marker: str | None = None):
    """DIR.partial holding a COMMIT `journal` (text), a user's notes.txt and, when given, a MARKER `marker`."""
    partial = partial_path(target)
    partial.mkdir(parents=True)
    (partial / JOURNAL).write_text(journal)
    (partial / "notes.txt").write_text("mine")
    if marker is not None:
        (partial / MARKER).write_text(marker)
    return partial


MARKED = json.dumps({"format": "vlash.dataset-run/1", "run": "a" * 32})


@pytest.mark.parametrize(
    ("journal", "marker", "why"),
    [
        ("[]", None, "no VLASH_RUN with the run id"),  # the case: rmtree'd the folder, exit 0
        ("{not json", MARKED, "not JSON"),  # was a JSONDecodeError traceback
        ('{"run": "' + "b" * 32 + '", "files": []}', MARKED, "its run id is not VLASH_RUN's"),
        ('{"run": "' + "a" * 32 + '", "files": ["../../etc/passwd"]}', MARKED, "paths inside it"),
        ('{"run": "' + "a" * 32 + '", "files": []}', MARKED, "it also holds notes.txt, which the journal does not"),
    ],
)
def test_a_journal_vlash_cannot_prove_it_wrote_is_refused_and_nothing_touched(tmp_path, journal, marker, why):
    target = tmp_path / "ds"
    partial = _foreign_partial(target, journal, marker)
    before = sorted((str(p), p.read_bytes()) for p in partial.rglob("*"))
    for attempt in (lambda: check_dataset(target), lambda: open_dataset(target, PointArm(), RATE, "point")):
        with pytest.raises(DatasetError, match=r"^\S+/COMMIT was not written by vlash for the run in ") as caught:
            attempt()
        assert why in str(caught.value) and "nothing was touched" in str(caught.value) and "\n" not in str(caught.value)
    assert sorted((str(p), p.read_bytes()) for p in partial.rglob("*")) == before and not target.exists()


def test_a_link_to_an_empty_folder_is_recorded_into_the_folder(tmp_path):
    """The issue: the whole run was recorded, the final rename failed (ENOTDIR on the link), the recording was
    discarded. The link is followed from the start: DIR.partial goes next to the real folder."""
    (tmp_path / "disk").mkdir()
    (tmp_path / "disk" / "rollouts").mkdir()
    (tmp_path / "rollouts").symlink_to(tmp_path / "disk" / "rollouts")
    check_dataset(tmp_path / "rollouts")
    rec, _ = point_run(tmp_path / "rollouts", ticks=20)
    assert rec.error is None and rec.outcome.startswith(f"wrote {tmp_path / 'rollouts'} ")
    assert (tmp_path / "rollouts").is_symlink()
    info, _, _, _ = check_lerobot_format(tmp_path / "disk" / "rollouts")
    assert info["total_frames"] == 20 and sorted(p.name for p in tmp_path.iterdir()) == ["disk", "rollouts"]
    point_run(tmp_path / "rollouts", ticks=10)  # appended through the link
    assert check_lerobot_format(tmp_path / "disk" / "rollouts")[0]["total_frames"] == 30


@pytest.mark.parametrize("appending", [False, True])
def test_a_commit_that_fails_keeps_the_recording(tmp_path, monkeypatch, appending):
    target = tmp_path / "ds"
    if appending:
        point_run(target, ticks=10)
    moves = {"rename": os.rename, "replace": os.replace}

    def full_disk(name):
        def move(source, destination):
            if str(source) == str(partial_path(target)) or str(destination).startswith(str(target) + "/data"):
                raise OSError(28, "No space left on device")
            return moves[name](source, destination)

        return move

    monkeypatch.setattr(os, "rename", full_disk("rename"))
    monkeypatch.setattr(os, "replace", full_disk("replace"))
    rec, _ = point_run(target, ticks=20)
    monkeypatch.undo()
    assert "No space left on device" in str(rec.error) and rec.committing
    kept = partial_path(target)
    assert kept.is_dir() and any(p.suffix == ".parquet" for p in kept.rglob("*"))  # the frames were not discarded
    if appending:
        assert rec.outcome.startswith(f"{target}: appending was cut short") and (kept / JOURNAL).is_file()
        point_run(target, ticks=5)  # the next run finishes the commit, then records
        assert check_lerobot_format(target)[0]["total_frames"] == 10 + 20 + 5 and not kept.exists()
    else:
        assert rec.outcome == (f"{target}: the recording could not be moved there ([Errno 28] No space left on "
                               f"device); it is kept in {kept}, a whole dataset: rename it yourself")  # fmt: skip
        kept.rename(target)
        assert check_lerobot_format(target)[0]["total_frames"] == 20


def test_a_run_that_recorded_nothing_or_failed_leaves_nothing_and_goes_on(tmp_path, monkeypatch):
    open_dataset(tmp_path / "none", PointArm(), RATE, "point").close()
    assert not (tmp_path / "none").exists() and not partial_path(tmp_path / "none").exists()
    get, other = PointArm.get_observation, {"cam": np.zeros((5, 5, 3), np.uint8)}  # not the shape it declared
    monkeypatch.setattr(PointArm, "get_observation", lambda self: {**get(self), "images": other})
    rec, result = point_run(tmp_path / "ds", ticks=20)
    assert result.summary.ticks == 20 and "a frame's observation.images.cam is [5, 5, 3]" in str(rec.error)
    assert not (tmp_path / "ds").exists() and not partial_path(tmp_path / "ds").exists()


def test_a_lagging_worker_drops_frames_and_the_loop_hands_over_copies(tmp_path, monkeypatch):
    monkeypatch.setattr(recorder, "MAX_FRAMES_QUEUED", 2)
    rec = open_dataset(tmp_path / "ds", PointArm(), RATE, "point")
    release = threading.Event()
    rec._work.put(release.wait)  # the worker is busy: nothing is written until released
    image = np.zeros((4, 4, 3), np.uint8)
    for step in range(6):
        rec.tick(tick_row(step, image))
        image[:] = 255  # the robot reuses its buffer: the frame handed over is a copy
    release.set()
    rec.close()
    assert (rec.frames, rec.dropped_frames) == (2, 4)
    _, _, data, _ = check_lerobot_format(tmp_path / "ds")
    assert data["vlash.step"] == [0, 1] and data["frame_index"] == [0, 1]  # a gap shows in vlash.step, later
    assert json.loads((tmp_path / "ds/meta/stats.json").read_text())["observation.images.cam"]["max"][0] == [[1.0]]


def test_without_the_extra_the_check_names_it(tmp_path, monkeypatch):
    import importlib.util

    find = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "pyarrow" else find(name, *a))
    with pytest.raises(DatasetError) as refused:
        check_dataset(tmp_path / "ds")
    assert str(refused.value) == "recording a dataset needs pyarrow and Pillow: pip install 'vlash[dataset]'"


@pytest.mark.sim  # the simulated arm (gymnasium, OpenCV)
def test_a_simulated_run_is_recorded_episode_by_episode_with_each_instruction(tmp_path):
    from vlash.sim.oracle import expert_planner, sim_metadata
    from vlash.sim.robot import SimRobot

    robot = SimRobot("reach", seed=1)
    robot.connect()
    clock = SimulatedClock()
    client = SimulatedPolicyLink(expert_planner(robot, 50), sim_metadata(robot, 50), clock, latency_s=0.1)
    config = RunConfig(ExecutorConfig(mode="vlash"), rate_hz=RATE, duration_s=4.0)
    with open_dataset(tmp_path / "ds", robot, RATE, "vlash_sim_reach") as rec:
        result = Runner(robot, client, config, clock, traces=[rec]).run()
    info, episodes, data, tasks = check_lerobot_format(tmp_path / "ds")
    finished = [outcome.steps for outcome in result.episodes]  # one env step per tick; the last one cut by the end
    assert len(finished) >= 2 and [e["length"] for e in episodes] == [*finished, 120 - sum(finished)]
    assert all(len(e["tasks"]) == 1 and e["tasks"][0] for e in episodes)  # each episode's instruction (a target)
    assert info["features"]["observation.state"]["names"] == robot.state_names
    assert info["features"][f"observation.images.{robot.camera}"]["shape"][2] == 3
    assert {e["tasks"][0] for e in episodes} == set(tasks) and rec.dropped_frames == 0


class FakeLeRobotDataset:
    """LeRobot 0.6.1's LeRobotDataset write API (create / add_frame / has_pending_frames / save_episode / finalize),
    recording the calls; finalize writes a stand-in meta/info.json."""

    created: list[dict] = []

    @classmethod
    def create(cls, repo_id, fps, features, root=None, robot_type=None, use_videos=True, **options):
        root.mkdir(parents=True, exist_ok=False)  # as LeRobotDatasetMetadata.create: the root must not exist
        dataset = cls()
        dataset.args = dict(repo_id=repo_id, fps=fps, features=features, root=root, robot_type=robot_type,
                            use_videos=use_videos, **options)  # fmt: skip
        dataset.frames, dataset.episodes, dataset.pending = [], [], 0
        cls.created.append(dataset.args)
        return dataset

    def add_frame(self, frame):
        self.frames.append(frame)
        self.pending += 1

    def has_pending_frames(self):
        return self.pending > 0

    def save_episode(self):
        self.episodes.append(self.pending)
        self.pending = 0

    def finalize(self):
        (self.args["root"] / "meta").mkdir(exist_ok=True)
        (self.args["root"] / "meta" / "info.json").write_text(json.dumps({"episodes": self.episodes}))


def test_lerobot_s_own_writer_is_used_where_it_imports(tmp_path, monkeypatch):
    import sys
    import types

    module = types.ModuleType("lerobot.datasets.lerobot_dataset")
    module.LeRobotDataset = FakeLeRobotDataset
    for name in ("lerobot", "lerobot.datasets"):
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    monkeypatch.setitem(sys.modules, "lerobot.datasets.lerobot_dataset", module)
    FakeLeRobotDataset.created.clear()
    rec, _ = point_run(tmp_path / "ds", ticks=50, prompt="go")
    (args,) = FakeLeRobotDataset.created
    assert rec.error is None and rec.writer.name.startswith("LeRobot's own")
    assert args["root"] == partial_path(tmp_path / "ds") / "lerobot" and args["use_videos"] is False
    assert args["fps"] == RATE and args["features"]["observation.images.cam"]["shape"] == (4, 4, 3)
    frame = rec.writer.dataset.frames[-1]
    assert frame["task"] == "go" and frame["vlash.step"].shape == (1,) and frame["vlash.step"].dtype == np.int64
    assert frame["observation.state"].dtype == np.float32 and isinstance(frame["vlash.mode"], str)
    assert json.loads((tmp_path / "ds/meta/info.json").read_text()) == {"episodes": [40, 10]}
    assert (tmp_path / "ds/meta/vlash/run-000.jsonl").is_file() and not partial_path(tmp_path / "ds").exists()


def test_hf_datasets_loads_it_as_lerobot_does(tmp_path):
    """Skipped in CI (HF `datasets` pins huggingface-hub < 2, the dev environment's is newer); run by hand where it
    is installed (LeRobot 0.6.1 pins datasets >= 4.8, < 5)."""
    pytest.importorskip("datasets")
    from tests.robot_io.lerobot_format import load_with_hf_datasets

    point_run(tmp_path / "ds", ticks=50, prompt="a")
    point_run(tmp_path / "ds", ticks=30, prompt="b")  # appended: two data files, two episode files
    load_with_hf_datasets(tmp_path / "ds")
