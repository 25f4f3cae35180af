"""Episodes <-> .npz: round trip, atomic write, validation with clear errors."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from tests.train.synthetic import dot_episodes, ramp_episode
from vlash.train.dataset import load_episodes, save_episodes
from vlash.train.episodes import Episode
from vlash.train.errors import DatasetError


def test_round_trip(tmp_path):
    episodes = dot_episodes(3)
    episodes[1] = replace(episodes[1], success=False)
    episodes[2] = replace(episodes[2], tail=np.full((7, 2), 0.5, np.float32))
    path = save_episodes(tmp_path / "data.npz", episodes)
    loaded = load_episodes(path)
    assert len(loaded) == 3
    for a, b in zip(episodes, loaded, strict=True):
        assert (a.task, a.instruction, a.seed, a.success) == (b.task, b.instruction, b.seed, b.success)
        for name in ("images", "states", "actions"):
            np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
            assert getattr(a, name).dtype == getattr(b, name).dtype
    assert loaded[0].tail is None and loaded[1].tail is None
    np.testing.assert_array_equal(loaded[2].tail, episodes[2].tail)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data.npz"]  # no temp file left


def test_plans_round_trip_and_format_2_files_still_load(tmp_path):
    planned = [replace(e, plans=np.full((len(e), 4, 2), float(i), np.float32)) for i, e in enumerate(dot_episodes(2))]
    loaded = load_episodes(save_episodes(tmp_path / "p.npz", planned))
    for a, b in zip(planned, loaded, strict=True):
        np.testing.assert_array_equal(a.plans, b.plans)
    with pytest.raises(DatasetError, match="differ in plan steps"):
        save_episodes(tmp_path / "mixed.npz", [planned[0], replace(planned[1], plans=None)])
    path = save_episodes(tmp_path / "old.npz", dot_episodes(2))
    with np.load(path, allow_pickle=False) as data:
        arrays = {k: data[k] for k in data.files if k != "plans"}
    np.savez(path, **{**arrays, "format": np.array("vlash.episodes/2")})
    assert all(e.plans is None for e in load_episodes(path))


def _tamper(path, **changes):
    with np.load(path, allow_pickle=False) as data:
        arrays = {k: data[k] for k in data.files}
    arrays.update(changes)
    np.savez(path, **arrays)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"states": np.zeros((5, 2), np.float64)}, "states must be float32"),
        ({"lengths": np.array([3, 3], np.int64)}, "lengths sum to 6"),
        ({"format": np.array("other/9")}, "format"),
        ({"format": np.array("vlash.episodes/1")}, "record it again"),
        ({"tail_lengths": np.array([0, 3], np.int64)}, "tail_lengths sum to 3"),
        ({"tasks": np.array(["a"])}, "per-episode arrays"),
        ({"plans": np.zeros((21, 0, 2), np.float32)}, "plans must be float32 \\[22, K, J\\]"),
    ],
)
def test_malformed_files_are_rejected(tmp_path, changes, message):
    path = save_episodes(tmp_path / "data.npz", [ramp_episode(10), ramp_episode(12)])
    _tamper(path, **changes)
    with pytest.raises(DatasetError, match=message):
        load_episodes(path)


def test_missing_and_corrupt_files(tmp_path):
    with pytest.raises(DatasetError, match="not found"):
        load_episodes(tmp_path / "nope.npz")
    (tmp_path / "bad.npz").write_bytes(b"not a zip")
    with pytest.raises(DatasetError, match="cannot read"):
        load_episodes(tmp_path / "bad.npz")


def test_episode_validation():
    e = ramp_episode(5)
    with pytest.raises(DatasetError, match="frame counts"):
        Episode("reach", "x", e.images, e.states[:4], e.actions, 0)
    with pytest.raises(DatasetError, match="uint8"):
        Episode("reach", "x", e.images.astype(np.float32), e.states, e.actions, 0)
    with pytest.raises(DatasetError, match="tail must be float32"):
        Episode("reach", "x", e.images, e.states, e.actions, 0, tail=np.zeros((3, 2)))
    with pytest.raises(DatasetError, match="finite columns"):
        Episode("reach", "x", e.images, e.states, e.actions, 0, tail=np.zeros((3, 3), np.float32))
