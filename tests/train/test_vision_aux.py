"""Vision-aux labels replayed from simulator episodes, and the auxiliary term in a training step."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

pytest.importorskip("vlash.sim")

from tests.train.synthetic import dot_episodes  # noqa: E402
from vlash.policies.pi05 import load_preset  # noqa: E402
from vlash.policies.pi05.weights import build_random  # noqa: E402
from vlash.sim import make_env  # noqa: E402
from vlash.sim.tasks.base import COLORS  # noqa: E402
from vlash.train import trainer  # noqa: E402
from vlash.train.config import TrainConfig  # noqa: E402
from vlash.train.episodes import record_episodes  # noqa: E402
from vlash.train.errors import ConfigError, TrainError  # noqa: E402
from vlash.train.vision_aux import (  # noqa: E402
    NamedPatchHead,
    PatchOffsetHead,
    dataset_labels,
    palette,
    patch_cell,
    patch_index,
    replay_labels,
)

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


def test_patch_cell_gives_the_offset_from_the_patch_centre_in_patch_widths_right_and_down():
    cell, offset = patch_cell(np.array([-0.5, 0.5]), 4)  # the corner shared by patches 0, 1, 4 and 5
    assert cell == 5 and np.allclose(offset, [-0.5, -0.5])
    cell, offset = patch_cell(np.array([0.3, -0.6]), 4)  # grid (u, v) = (2.6, 3.2): column 2, row 3
    assert cell == 3 * 4 + 2 and np.allclose(offset, [0.1, -0.3]) and offset.dtype == np.float32
    assert np.allclose(patch_cell(np.array([5.0, -5.0]), 4)[1], [0.5, 0.5])  # clipped with the cell


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
    for xy, color in zip(world.positions, world.colors, strict=True):
        cell, offset = patch_cell(xy, 4)
        assert np.allclose(replayed.offsets[:, cell, palette().index(COLORS[color])], offset)
    assert not replayed.offsets[:, ~expected].any()  # 0 where no item is
    assert labels[0].sum() == len(world.positions)
    assert replayed.has_target.all()  # reach's target: the named one, all along
    np.testing.assert_allclose(replayed.target_xy, np.repeat(world.positions[world.goal][None], len(e), 0), atol=1e-6)
    assert (replayed.target_patch == patch_index(world.positions[world.goal], 4)).all()


def test_episodes_that_do_not_replay_are_refused():
    with pytest.raises(TrainError, match="does not replay"):
        dataset_labels(dot_episodes(1), side=4, progress=False)


def test_a_training_run_with_the_vision_aux_logs_its_loss(tmp_path, reach_episodes):
    config = TrainConfig(
        policy=MICRO, steps=6, batch_size=4, lr=3e-3, warmup_steps=2, log_every=2, progress=False,
        out=str(tmp_path / "p"), vision_probe_every=3, vision_aux_weight=1.0,
    )  # fmt: skip

    def variant(out: str, **changes):  # the same run with other head settings, into tmp_path / out
        changed = TrainConfig(
            **{**config.to_dict(), "tasks": tuple(config.tasks), "out": str(tmp_path / out), **changes}
        )
        return trainer.train(changed, episodes=reach_episodes)

    result = trainer.train(config, episodes=reach_episodes)
    assert result.metadata["vision_aux_loss"] > 0
    off = variant("q", vision_aux_weight=0.0)
    assert "vision_aux_loss" not in off.metadata and result.metadata["image_gain"] is not None
    assert result.loss_curve != off.loss_curve  # the aux term is part of the optimized loss
    both = variant("r", target_aux_weight=1.0)
    assert both.metadata["target_aux_loss"] > 0 and both.metadata["vision_aux_loss"] > 0
    every = variant("s", target_aux_weight=1.0, expert_target_aux_weight=1.0)
    assert every.metadata["target_aux_loss"] > 0 and every.metadata["expert_target_aux_loss"] > 0
    assert every.loss_curve != both.loss_curve
    earlier = variant(
        "t", target_aux_weight=1.0, expert_target_aux_weight=1.0, target_aux_layer=0, expert_target_aux_layer=0
    )
    assert earlier.metadata["target_aux_loss"] != every.metadata["target_aux_loss"]  # other streams are read
    assert earlier.metadata["expert_target_aux_loss"] != every.metadata["expert_target_aux_loss"]
    offsets = variant("u", patch_offset_weight=1.0)
    assert offsets.metadata["patch_offset_aux_loss"] > 0 and offsets.metadata["vision_aux_loss"] > 0
    assert offsets.loss_curve != result.loss_curve
    named = variant("v", vision_aux_weight=0.0, named_patch_weight=1.0)
    assert named.metadata["named_patch_aux_loss"] > 0 and "target_aux_loss" not in named.metadata
    assert named.loss_curve != off.loss_curve


def test_grounding_steps_train_the_heads_vision_and_vlm_but_not_the_expert(tmp_path, reach_episodes, monkeypatch):
    snapshots, calls = {}, {"grounding": 0, "flow": 0}
    real_grounding, real_flow = trainer.grounding_step, trainer.flow_step

    def weights(model):
        return {k: v.detach().clone() for k, v in model.state_dict().items()}

    def grounding(model, *args, **kwargs):
        calls["grounding"] += 1
        snapshots.setdefault("start", weights(model))
        return real_grounding(model, *args, **kwargs)

    def flow(model, *args, **kwargs):
        calls["flow"] += 1
        snapshots.setdefault("after_grounding", weights(model))
        return real_flow(model, *args, **kwargs)

    monkeypatch.setattr(trainer, "grounding_step", grounding)
    monkeypatch.setattr(trainer, "flow_step", flow)
    config = TrainConfig(
        policy=MICRO, steps=5, grounding_steps=3, batch_size=4, lr=3e-3, warmup_steps=1, log_every=1,
        progress=False, out=str(tmp_path / "p"), vision_probe_every=0, vision_aux_weight=1.0, target_aux_weight=1.0,
        expert_target_aux_weight=1.0,
    )  # fmt: skip
    result = trainer.train(config, episodes=reach_episodes)
    assert calls == {"grounding": 3, "flow": 2}
    log = json.loads((tmp_path / "p" / "train_log.json").read_text())
    assert len(log["target_aux_loss"]) == 5 and len(log["expert_target_aux_loss"]) == 2  # the expert runs in flow steps
    assert np.isnan(result.real_loss_curve[:3]).all() and np.isfinite(result.real_loss_curve[3:]).all()
    start, after = snapshots["start"], snapshots["after_grounding"]
    changed = {name for name in start if not np.array_equal(start[name].numpy(), after[name].numpy())}
    assert changed and all(name.startswith(("vision.", "projector.", "vlm.")) for name in changed), sorted(changed)
    assert any(name.startswith("vision.") for name in changed) and any(name.startswith("vlm.") for name in changed)


@pytest.mark.parametrize(
    "settings, message",
    [
        ({"steps": 5, "grounding_steps": 6, "target_aux_weight": 1.0}, r"grounding_steps must be <= steps \(5\)"),
        ({"steps": 5, "grounding_steps": 2}, "set one of vision_aux_weight, patch_offset_weight, target_aux_weight"),
        ({"steps": 5, "grounding_steps": 2, "expert_target_aux_weight": 1.0}, "set one of"),  # it needs the expert
    ],
)
def test_grounding_steps_are_checked(settings, message):
    with pytest.raises(ConfigError, match=message):
        TrainConfig(policy=MICRO, **settings)


def test_auxiliaries_refuse_a_head_they_do_not_know():
    model = build_random(load_preset(MICRO), seed=0)
    with pytest.raises(ConfigError, match=r"unknown auxiliary heads \['targets'\]"):
        trainer.Auxiliaries(model, {"targets": 1.0})


def test_patch_offset_loss_averages_the_squared_error_over_the_patches_that_hold_an_item():
    head = PatchOffsetHead(width=3, classes=2)
    torch.nn.init.zeros_(head.proj.weight)
    with torch.no_grad():
        head.proj.bias.copy_(torch.tensor([0.1, 0.2, 0.0, 0.0]))  # predicts (0.1, 0.2) for colour 0, 0 for 1
    labels = torch.zeros(1, 3, 2, dtype=torch.bool)
    labels[0, 1, 0] = labels[0, 2, 1] = True
    offsets = torch.zeros(1, 3, 2, 2)
    offsets[0, 1, 0] = torch.tensor([0.4, -0.2])  # error (0.3, 0.4): 0.25
    offsets[0, 2, 1] = torch.tensor([0.0, 0.5])  # error (0, 0.5): 0.25
    offsets[0, 0, 0] = torch.tensor([9.0, 9.0])  # no item there: ignored
    loss = head.loss(torch.zeros(1, 3, 3), labels, offsets)
    assert loss.item() == pytest.approx(0.25)


def test_named_patch_loss_is_the_cross_entropy_of_the_target_s_patch_over_samples_with_a_target():
    head = NamedPatchHead(width=2)
    torch.nn.init.zeros_(head.proj.bias)
    with torch.no_grad():
        head.proj.weight.copy_(torch.tensor([[1.0, -1.0]]))  # score = a - b after LayerNorm: (1, 0) -> 2
    stream = torch.tensor([[[1.0, 0.0], [0.0, 1.0], [0.0, 1.0]]] * 2)  # scores (2, -2, -2) in both samples
    loss = head.loss(stream, torch.tensor([0, 2]), torch.tensor([True, False]))
    expected = -torch.log_softmax(torch.tensor([2.0, -2.0, -2.0]), 0)[0]  # the second sample has no target
    assert loss.item() == pytest.approx(expected.item(), rel=1e-3)


def test_all_token_target_loss_averages_every_token_of_samples_with_a_target():
    torch = pytest.importorskip("torch")
    from vlash.train.vision_aux import TargetHead

    head = TargetHead(8)
    stream = torch.randn(3, 5, 8)
    target, has = torch.randn(3, 2), torch.tensor([True, True, False])
    last = torch.full((3,), 4)  # a one-token stream gives the last-token loss
    torch.testing.assert_close(head.loss_all_tokens(stream[:, 4:], target, has), head.loss(stream, last, target, has))
    errors = (head.proj(head.norm(stream)) - target[:, None]).square().mean(-1)
    want = (errors[0].sum() + errors[1].sum()) / 10  # sample 2 has no target
    torch.testing.assert_close(head.loss_all_tokens(stream, target, has), want)
