"""Vision-aux labels replayed from simulator episodes, and the auxiliary term in a training step."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("robot_io.sim")

from robot_io.sim import make_env  # noqa: E402
from robot_io.sim.tasks.base import COLORS  # noqa: E402
from tests.train.synthetic import dot_episodes  # noqa: E402
from vlash.train import trainer  # noqa: E402
from vlash.train.config import TrainConfig  # noqa: E402
from vlash.train.episodes import record_episodes  # noqa: E402
from vlash.train.errors import TrainError  # noqa: E402
from vlash.train.vision_aux import dataset_labels, palette, patch_index, replay_labels  # noqa: E402

MICRO = str(Path(__file__).with_name("pi05-micro.yaml"))


@pytest.fixture(scope="module")
def reach_episodes():
    return record_episodes("reach", 3, seed=0, image_size=32, progress=False)


def test_patch_index_maps_the_view_row_major_with_y_up():
    assert patch_index(np.array([-0.99, 0.99]), 4) == 0  # top left
    assert patch_index(np.array([0.99, 0.99]), 4) == 3  # top right
    assert patch_index(np.array([-0.99, -0.99]), 4) == 12  # bottom left
    assert patch_index(np.array([0.1, -0.1]), 4) == 2 * 4 + 2
    assert patch_index(np.array([5.0, -5.0]), 4) == 15  # clipped into the grid


def test_reach_labels_mark_each_target_in_its_patch_and_colour(reach_episodes):
    e = reach_episodes[0]
    replayed = replay_labels(e, side=4)
    labels = replayed.patches
    assert labels.shape == (len(e), 16, len(palette())) and labels.dtype == bool
    env = make_env("reach", image_size=32)
    env.reset(seed=e.seed)
    world = env.world
    expected = np.zeros((16, len(palette())), bool)
    for xy, color in zip(world.positions, world.colors, strict=True):
        expected[patch_index(xy, 4), palette().index(COLORS[color])] = True
    assert (labels == expected[None]).all()  # reach's targets stay put for the whole episode
    assert labels[0].sum() == len(world.positions)
    assert replayed.has_target.all()  # reach's target: the named one, all along
    np.testing.assert_allclose(replayed.target_xy, np.repeat(world.positions[world.goal][None], len(e), 0), atol=1e-6)


def test_episodes_that_do_not_replay_are_refused():
    with pytest.raises(TrainError, match="does not replay"):
        dataset_labels(dot_episodes(1), side=4, progress=False)


def test_a_training_run_with_the_vision_aux_logs_its_loss(tmp_path, reach_episodes):
    config = TrainConfig(
        policy=MICRO, steps=6, batch_size=4, lr=3e-3, warmup_steps=2, log_every=2, progress=False,
        out=str(tmp_path / "p"), vision_probe_every=3, vision_aux_weight=1.0,
    )  # fmt: skip
    result = trainer.train(config, episodes=reach_episodes)
    assert result.metadata["vision_aux_loss"] > 0
    off = trainer.train(
        TrainConfig(**{**config.to_dict(), "tasks": tuple(config.tasks), "vision_aux_weight": 0.0,
                       "out": str(tmp_path / "q")}),
        episodes=reach_episodes,
    )  # fmt: skip
    assert "vision_aux_loss" not in off.metadata and result.metadata["image_gain"] is not None
    assert result.loss_curve != off.loss_curve  # the aux term is part of the optimized loss
    both = trainer.train(
        TrainConfig(**{**config.to_dict(), "tasks": tuple(config.tasks), "target_aux_weight": 1.0,
                       "out": str(tmp_path / "r")}),
        episodes=reach_episodes,
    )  # fmt: skip
    assert both.metadata["target_aux_loss"] > 0 and both.metadata["vision_aux_loss"] > 0
