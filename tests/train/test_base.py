"""A grounding-only run as the base of another (`TrainConfig.init_from`, vlash.train.base)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

pytest.importorskip("vlash.sim")

from tests.train.synthetic import dot_episodes  # noqa: E402
from vlash.errors import CheckpointError  # noqa: E402
from vlash.policies.pi05.weights import read_safetensors  # noqa: E402
from vlash.train import trainer  # noqa: E402
from vlash.train.config import TrainConfig  # noqa: E402
from vlash.train.episodes import record_episodes  # noqa: E402
from vlash.train.errors import ConfigError  # noqa: E402

MICRO = str(Path(__file__).with_name("pi05-micro.yaml"))
SMALL = dict(batch_size=4, lr=3e-3, warmup_steps=1, log_every=1, progress=False, vision_probe_every=0)


@pytest.fixture(scope="module")
def reach_episodes():
    return record_episodes("reach", 3, seed=0, image_size=32, progress=False)


@pytest.fixture(scope="module")
def base_dir(tmp_path_factory, reach_episodes) -> Path:
    """A grounding-only run: every step trains the vision tower and the VLM through the heads, none the expert."""
    out = tmp_path_factory.mktemp("base") / "base"
    config = TrainConfig(
        policy=MICRO, steps=3, grounding_steps=3, scratch_init=True, vision_aux_weight=1.0, target_aux_weight=1.0,
        out=str(out), **SMALL,
    )  # fmt: skip
    result = trainer.train(config, episodes=reach_episodes)
    assert len(result.loss_curve) == 3 and all(math.isnan(x) for x in result.real_loss_curve)  # no flow step
    return out


def _starting_weights(config: TrainConfig, episodes, monkeypatch) -> dict[str, torch.Tensor]:
    """The weights `config`'s run starts its optimizer steps from."""
    seen: dict[str, torch.Tensor] = {}
    real = trainer.run_steps

    def capture(model, *args, **kwargs):
        seen.update({k: v.detach().clone() for k, v in model.state_dict().items()})
        return real(model, *args, **kwargs)

    monkeypatch.setattr(trainer, "run_steps", capture)
    trainer.train(config, episodes=episodes)
    monkeypatch.setattr(trainer, "run_steps", real)
    return seen


def test_a_run_from_a_base_starts_from_all_of_its_weights_and_its_tokenizer(
    tmp_path, base_dir, reach_episodes, monkeypatch
):
    config = TrainConfig(policy=MICRO, steps=2, init_from=str(base_dir), out=str(tmp_path / "p"), **SMALL)
    started = _starting_weights(config, reach_episodes, monkeypatch)
    base = read_safetensors(base_dir / "model.safetensors")
    assert started.keys() == base.keys()
    assert all(torch.equal(started[k], base[k]) for k in base)
    assert (tmp_path / "p" / "tokenizer.json").read_bytes() == (base_dir / "tokenizer.json").read_bytes()
    fresh = TrainConfig(policy=MICRO, steps=2, scratch_init=True, out=str(tmp_path / "q"), **SMALL)
    fresh_start = _starting_weights(fresh, reach_episodes, monkeypatch)
    assert not all(torch.equal(fresh_start[k], base[k]) for k in base)  # the base's steps moved some weights


def test_a_base_without_a_token_for_every_instruction_word_is_refused(tmp_path, base_dir):
    config = TrainConfig(policy=MICRO, steps=2, init_from=str(base_dir), out=str(tmp_path / "p"), **SMALL)
    with pytest.raises(ConfigError, match=r"has no token for \['follow', 'moving'\]"):
        trainer.train(config, episodes=dot_episodes(2))  # "reach the red dot", "follow the moving target"


def test_a_base_of_another_shape_is_refused_with_the_mismatches_before_any_data_work(
    tmp_path, base_dir, reach_episodes, monkeypatch
):
    wider = tmp_path / "wider.yaml"
    wider.write_text(Path(MICRO).read_text().replace("expert: {width: 32", "expert: {width: 40"))
    config = TrainConfig(policy=str(wider), steps=2, init_from=str(base_dir), out=str(tmp_path / "p"), **SMALL)

    def no_data(*args, **kwargs):
        raise AssertionError("episodes were gathered before the base was checked")

    monkeypatch.setattr(trainer, "gather_episodes", no_data)
    with pytest.raises(CheckpointError, match="shape mismatches"):
        trainer.train(config, episodes=reach_episodes)
    assert not (tmp_path / "p").exists()


def test_a_base_and_a_scratch_initialisation_at_once_are_refused():
    with pytest.raises(ConfigError, match="init_from and scratch_init both set the initial weights"):
        TrainConfig(policy=MICRO, init_from="somewhere", scratch_init=True)


def test_a_directory_that_is_not_a_policy_is_refused(tmp_path, reach_episodes):
    config = TrainConfig(policy=MICRO, steps=2, init_from=str(tmp_path), out=str(tmp_path / "p"), **SMALL)
    with pytest.raises(ConfigError, match="has no model.safetensors or tokenizer.json: not a vlash policy directory"):
        trainer.train(config, episodes=reach_episodes)
