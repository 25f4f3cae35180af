"""`vlash run --record-dataset DIR` through the real command line: the fake LeRobot SO-101 (tests/fixtures/fake_lerobot)
under a torch-free loopback policy server; the dataset checked the way LeRobot 0.6.1's loader reads it; what is
refused before anything connects."""

from __future__ import annotations

import pytest

import robot_io.dataset.recorder as recorder_module
from tests.cli.test_run_cmd import SO101_MAP, run_argv, so101_metadata
from tests.fakes import LoopbackPolicyServer, hold_planner
from tests.robot_io.lerobot_fixture import fake_lerobot_on_path
from vlash.cli.main import main

pytest.importorskip("pyarrow")  # the [dataset] extra
pytest.importorskip("PIL")
from tests.robot_io.lerobot_format import check_dataset  # noqa: E402


@pytest.fixture
def fake_lerobot():
    with fake_lerobot_on_path() as path:
        yield path


def test_a_run_on_a_lerobot_robot_is_recorded_as_one_episode_named_after_it(fake_lerobot, tmp_path, capsys):
    target = tmp_path / "rollouts"
    with LoopbackPolicyServer("tcp://127.0.0.1:*", hold_planner(20), so101_metadata()) as server:
        argv = run_argv(server.endpoint, *SO101_MAP, "--record-dataset", str(target), "--prompt", "pick the cube")
        assert main(argv) == 0
    info, episodes, data, tasks = check_dataset(target)
    assert info["robot_type"] == "so101_follower" and tasks == ["pick the cube"] and len(episodes) == 1
    assert info["total_frames"] >= 20  # 30 ticks in 1 s unless deadlines were skipped
    assert info["features"]["action"]["names"] == ["shoulder_pan.pos", "shoulder_lift.pos", "elbow_flex.pos",
                                                   "wrist_flex.pos", "wrist_roll.pos", "gripper.pos"]  # fmt: skip
    assert {n for n in info["features"] if n.startswith("observation.images.")} == {
        "observation.images.front", "observation.images.wrist"}  # fmt: skip
    assert set(data["vlash.mode"]) <= {"", "sync", "vlash"} and "vlash" in data["vlash.mode"]
    out = capsys.readouterr().out
    assert f"wrote {target} (vlash's own (pyarrow) writer): episodes 1, frames {info['total_frames']}\n" in out


@pytest.mark.parametrize(
    ("argv", "match"),
    [
        (["--rate-hz", "29.97"], "--record-dataset needs a whole --rate-hz"),
        (["--record-dataset", "{tmp}/mine"], "--record-dataset: {tmp}/mine is not empty and is not a dataset vlash"),
    ],
)
def test_a_dataset_that_cannot_be_recorded_is_refused_before_anything_connects(tmp_path, capsys, argv, match):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "photo.png").write_bytes(b"x")
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    argv = argv if "--record-dataset" in argv else [*argv, "--record-dataset", str(tmp_path / "new")]
    with LoopbackPolicyServer("tcp://127.0.0.1:*", hold_planner(20), so101_metadata()) as server:
        rc = main(["run", "--server", server.endpoint, "--robot", "sim:reach", "--duration-s", "1", *argv])
        assert server.handshakes == 0
    err = capsys.readouterr().err
    assert (
        rc == 2
        and err.count("\n") == 1
        and err.startswith(f"vlash run: error: {match.replace('{tmp}', str(tmp_path))}")
    )
    assert (tmp_path / "mine" / "photo.png").read_bytes() == b"x" and not (tmp_path / "new").exists()


def test_a_partial_folder_vlash_did_not_write_is_refused_and_left_alone(tmp_path, capsys):
    """The issue: DIR.partial/COMMIT = [] beside a user's notes.txt made the run rmtree the folder and exit 0."""
    partial = tmp_path / "ds.partial"
    partial.mkdir()
    (partial / "COMMIT").write_text("[]")
    (partial / "notes.txt").write_text("mine")
    with LoopbackPolicyServer("tcp://127.0.0.1:*", hold_planner(20), so101_metadata()) as server:
        argv = ["run", "--server", server.endpoint, "--robot", "sim:reach", "--duration-s", "1"]
        rc = main([*argv, "--record-dataset", str(tmp_path / "ds")])
        assert server.handshakes == 0
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and f"{partial}/COMMIT was not written by vlash" in err, err
    assert sorted(p.name for p in partial.iterdir()) == ["COMMIT", "notes.txt"] and not (tmp_path / "ds").exists()


def test_a_link_to_an_empty_folder_records_into_it(fake_lerobot, tmp_path, capsys):
    """The issue: the run was recorded, the final rename failed on the link (ENOTDIR), the recording was discarded
    and the run exited 0. The link is followed before the run."""
    (tmp_path / "disk").mkdir()
    (tmp_path / "rollouts").symlink_to(tmp_path / "disk")
    with LoopbackPolicyServer("tcp://127.0.0.1:*", hold_planner(20), so101_metadata()) as server:
        assert main(run_argv(server.endpoint, *SO101_MAP, "--record-dataset", str(tmp_path / "rollouts"))) == 0
    info, _, _, _ = check_dataset(tmp_path / "disk")
    assert f"wrote {tmp_path / 'rollouts'} " in capsys.readouterr().out and (tmp_path / "rollouts").is_symlink()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["disk", "rollouts"] and info["total_frames"] >= 20


def test_a_recording_that_could_not_be_committed_is_kept_and_the_run_exits_1(
    fake_lerobot, tmp_path, monkeypatch, capsys
):
    """Issue 42: never exit 0 after a recording did not reach DIR (it is kept in DIR.partial, and the line says so)."""
    target = tmp_path / "rollouts"

    def full_disk(partial, destination, appending) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(recorder_module, "commit", full_disk)
    with LoopbackPolicyServer("tcp://127.0.0.1:*", hold_planner(20), so101_metadata()) as server:
        assert main(run_argv(server.endpoint, *SO101_MAP, "--record-dataset", str(target))) == 1
    err = capsys.readouterr().err
    assert f"{target}: the recording could not be moved there" in err and "it is kept in" in err, err
    assert not target.exists() and (tmp_path / "rollouts.partial").is_dir()
