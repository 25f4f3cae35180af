"""Training end to end on synthetic episodes: the loss falls, the policy directory loads and acts."""

from __future__ import annotations

import json
import os
import shutil
import signal
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from tests.train.synthetic import dot_episodes
from vlash.policies.formats.loading import load_policy
from vlash.policies.pi05 import load_preset
from vlash.policies.pi05.model import Pi05Inputs
from vlash.policies.pi05.weights import build_random
from vlash.policies.processing.processor import Observation
from vlash.sampling import FlowSampler, SamplerConfig
from vlash.train import trainer
from vlash.train.config import TrainConfig
from vlash.train.errors import ConfigError
from vlash.train.interrupt import TrainingInterrupted, sigint_deferred
from vlash.train.output import with_config

MICRO = str(Path(__file__).with_name("pi05-micro.yaml"))


def _config(tmp_path, **kw) -> TrainConfig:
    base = dict(
        policy=MICRO,
        steps=60,
        batch_size=8,
        lr=3e-3,
        warmup_steps=5,
        log_every=5,
        progress=False,
        out=str(tmp_path / "p"),
    )
    return TrainConfig(**{**base, **kw})


@pytest.fixture(scope="module")
def episodes():
    return dot_episodes(6)


def test_short_run_lowers_the_loss_and_writes_a_loadable_policy(tmp_path, episodes):
    result = trainer.train(_config(tmp_path), episodes=episodes, command="vlash train (test)")
    first, last = np.mean(result.loss_curve[:5]), np.mean(result.loss_curve[-5:])
    assert last < 0.5 * first, (first, last)
    assert result.final_loss == pytest.approx(last) and result.steps_per_s > 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p"]  # no staging or .old directory left
    log = json.loads((tmp_path / "p" / "train_log.json").read_text())
    assert log["loss"] == result.loss_curve and log["step"] == 60
    policy = load_policy(tmp_path / "p")
    meta = policy.metadata
    assert meta["command"] == "vlash train (test)" and meta["complete"] and meta["dataset"]["episodes"] == 6
    assert policy.config.max_token_len == load_preset(MICRO).max_token_len  # saved with the preset's shapes
    e = episodes[0]
    obs = Observation({"base_0_rgb": e.images[0]}, e.states[0], e.instruction)
    inputs = policy.processor.preprocess([obs])
    cache = policy.model.prefill(inputs)
    sampler = FlowSampler(SamplerConfig(schedule="horizon-aware"))
    out = sampler.sample(lambda x, tau: policy.model.denoise_step(x, tau, cache), torch.randn(1, 50, 32))
    assert policy.processor.relative_mask == (True, True)  # the default: chunks relative to the given state
    actions = policy.processor.postprocess(out.actions, e.states[:1])
    assert actions.shape == (1, 50, 2) and np.isfinite(actions).all()


def test_relative_targets_are_taken_from_the_samples_future_state(tmp_path, episodes):
    """The training targets of a relative policy are what the processor makes of the absolute actions."""
    from vlash.policies.processing.word_tokenizer import train_tokenizer
    from vlash.train.data import TrainingData
    from vlash.train.stats import dataset_normalizer

    config, spec = load_preset(MICRO), _config(tmp_path).sample_spec(50)
    normalizer = dataset_normalizer(episodes, relative_horizon=50)
    tok = train_tokenizer({e.instruction for e in episodes}, tmp_path, max_vocab=config.vocab_size)
    data = TrainingData(episodes, config, tok, normalizer, spec, progress=False, relative=True)
    draw = data.table.draw(16, spec, np.random.default_rng(0))
    assert (draw.delta > 0).any()
    batch = data.tensors(draw)
    rel = normalizer.normalize("action", draw.targets - draw.states[:, None, :])
    np.testing.assert_allclose(batch.actions[..., :2].numpy(), rel, atol=1e-6)
    assert not batch.actions[..., 2:].any()
    # relative stats: q01/q99 of actions[t + k] - states[t], not of the absolute actions
    absolute = dataset_normalizer(episodes)
    assert not np.allclose(normalizer.feature("action").stats["q99"], absolute.feature("action").stats["q99"])


def test_tails_are_labels_unless_label_tail_is_off(tmp_path, episodes):
    from vlash.train.stats import dataset_normalizer

    tailed = [replace(e, tail=np.full((50, 2), 9.0, np.float32)) for e in episodes]
    kept, _ = trainer.gather_episodes(_config(tmp_path), tailed, 50)
    assert all(e.tail is not None for e in kept)
    q99 = dataset_normalizer(kept, relative_horizon=50).feature("action").stats["q99"]
    assert (q99 > 5.0).all()  # the relative stats cover the tail's labels
    kept, _ = trainer.gather_episodes(_config(tmp_path, label_tail=False), tailed, 50)
    assert all(e.tail is None for e in kept)


def test_plans_are_labels_only_with_plan_labels(tmp_path, episodes):
    from vlash.train.errors import TrainError
    from vlash.train.stats import dataset_normalizer

    with pytest.raises(TrainError, match="lacks"):
        trainer.gather_episodes(_config(tmp_path, plan_labels=True), episodes, 50)
    planned = [replace(e, plans=np.full((len(e), 58, 2), 9.0, np.float32)) for e in episodes]
    kept, _ = trainer.gather_episodes(_config(tmp_path, plan_labels=True), planned, 50)
    assert all(e.plans is not None for e in kept)
    q99 = dataset_normalizer(kept, relative_horizon=50).feature("action").stats["q99"]
    assert (q99 > 5.0).all()  # the relative stats are those of the plans
    kept, _ = trainer.gather_episodes(_config(tmp_path), planned, 50)
    assert all(e.plans is None for e in kept)


def test_same_seed_same_run_and_checkpoints(tmp_path, episodes):
    a = trainer.train(_config(tmp_path / "a", steps=4, checkpoint_every=2), episodes=episodes)
    b = trainer.train(_config(tmp_path / "b", steps=4), episodes=episodes)
    c = trainer.train(_config(tmp_path / "c", steps=4, seed=1), episodes=episodes)
    assert a.loss_curve == b.loss_curve and a.loss_curve != c.loss_curve


def test_stop_after_ends_a_longer_schedule_early(tmp_path, episodes):
    full = trainer.train(_config(tmp_path / "full", steps=6), episodes=episodes)
    early = trainer.train(_config(tmp_path / "early", steps=6, stop_after=3), episodes=episodes)
    assert early.loss_curve == full.loss_curve[:3]  # the same steps of the same schedule, then the end
    log = json.loads((tmp_path / "early" / "p" / "train_log.json").read_text())
    full_log = json.loads((tmp_path / "full" / "p" / "train_log.json").read_text())
    assert log["step"] == 3 and log["lr"] == full_log["lr"][:3] and log["lr"][-1] != log["lr"][0]
    meta = load_policy(tmp_path / "early" / "p").metadata
    assert meta["complete"] and meta["step"] == 3 and meta["config"]["stop_after"] == 3


@pytest.mark.parametrize("stop_after", [0, 7, 2.5])
def test_stop_after_outside_the_schedule_is_refused(tmp_path, stop_after):
    with pytest.raises(ConfigError, match="stop_after"):
        _config(tmp_path, steps=6, stop_after=stop_after)


def test_ema_saves_the_moving_average_of_the_weights(tmp_path, episodes, monkeypatch):
    saved: dict[str, list[dict[str, torch.Tensor]]] = {}

    def capturing_saver(config, *args, **kwargs):  # policy_saver's signature; keeps what each save gets
        def save(step, curves, trained, extra=None):
            saved.setdefault(config.out, []).append({k: v.detach().clone() for k, v in trained.state_dict().items()})
            return Path(config.out)

        return save

    monkeypatch.setattr(trainer, "policy_saver", capturing_saver)
    raw = _config(tmp_path / "raw", steps=3, checkpoint_every=1)
    averaged = _config(tmp_path / "ema", steps=3, checkpoint_every=1, ema_decay=0.25)
    assert trainer.train(raw, episodes=episodes).loss_curve == trainer.train(averaged, episodes=episodes).loss_curve
    w1, w2, w3 = saved[raw.out]  # the weights after each of the 3 steps
    got = saved[averaged.out][-1]
    for name in w3:  # the first update copies, each later one keeps 0.25 of the average
        expected = 0.25 * (0.25 * w1[name] + 0.75 * w2[name]) + 0.75 * w3[name]
        torch.testing.assert_close(got[name], expected)
    assert any(not torch.equal(got[name], w3[name]) for name in w3)


@pytest.mark.skipif(shutil.which("c++") is None, reason="torch.compile (inductor) needs a C++ compiler")
def test_a_compiled_run_matches_the_eager_run(tmp_path, episodes):
    eager = trainer.train(_config(tmp_path / "eager", steps=3), episodes=episodes)
    compiled = trainer.train(_config(tmp_path / "compiled", steps=3, compile=True), episodes=episodes)
    np.testing.assert_allclose(compiled.loss_curve, eager.loss_curve, rtol=1e-4)
    assert load_policy(tmp_path / "compiled" / "p").metadata["config"]["compile"]


def test_interrupt_keeps_the_previous_policy_whole(tmp_path, episodes, monkeypatch):
    trainer.train(_config(tmp_path, steps=2), episodes=episodes)
    before = (tmp_path / "p" / "model.safetensors").read_bytes()
    real_step = trainer.flow_step
    calls = []

    def interrupted(*args, **kwargs):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real_step(*args, **kwargs)

    monkeypatch.setattr(trainer, "flow_step", interrupted)
    with pytest.raises(TrainingInterrupted) as stop:  # a KeyboardInterrupt: callers that stop on Ctrl-C still do
        trainer.train(_config(tmp_path, steps=5, seed=3), episodes=episodes)
    assert (tmp_path / "p" / "model.safetensors").read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p", "p.interrupted"]
    assert (stop.value.step, stop.value.final_step, stop.value.kept) == (2, 5, tmp_path / "p.interrupted")
    assert stop.value.line().startswith(f"interrupted at step 2/5: {tmp_path / 'p'} was not replaced; the policy as")
    monkeypatch.setattr(trainer, "flow_step", real_step)  # the same run, uninterrupted, checkpointed at step 2
    trainer.train(_config(tmp_path / "whole", steps=5, seed=3, stop_after=2), episodes=episodes)
    kept, whole = tmp_path / "p.interrupted", tmp_path / "whole" / "p"
    got, expected = load_file(kept / "model.safetensors"), load_file(whole / "model.safetensors")
    assert got.keys() == expected.keys() and all(torch.equal(got[k], expected[k]) for k in got)  # step 2's weights
    log = json.loads((kept / "train_log.json").read_text())
    assert log["step"] == 2 and log["loss"] == json.loads((whole / "train_log.json").read_text())["loss"]
    meta = load_policy(kept).metadata
    assert meta["interrupted"] and not meta["complete"] and meta["step"] == 2


def test_an_interrupt_inside_the_update_waits_for_it_to_end():
    """SIGINT inside the optimizer's update (opt.step, the schedule, the average) is held until it is whole."""
    # Python's own handler, as `vlash train` runs with it (an earlier test in this worker may have left another)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        order = []
        with pytest.raises(KeyboardInterrupt), sigint_deferred():
            os.kill(os.getpid(), signal.SIGINT)
            order.append("after the signal")
        assert order == ["after the signal"] and signal.getsignal(signal.SIGINT) is signal.default_int_handler
        with pytest.raises(KeyboardInterrupt):  # outside the block Ctrl-C raises at once, as before
            os.kill(os.getpid(), signal.SIGINT)
            for _ in range(1000):
                order.append("never")
        assert len(order) < 1000
    finally:
        signal.signal(signal.SIGINT, previous)


def test_trimmed_prompt_padding_gives_the_same_velocities():
    """Training pads prompts only to the longest one; the saved preset pads to 48: same function."""
    full = load_preset("pi05-tiny")
    trimmed = with_config(build_random(full, seed=0), full.with_overrides(max_token_len=12))
    model = with_config(trimmed, full)
    g = torch.Generator().manual_seed(0)
    tokens = torch.randint(4, 1024, (2, 12), generator=g)
    masks = torch.ones(2, 12, dtype=torch.bool)
    masks[1, 9:] = False
    images = torch.rand(2, 1, 3, 112, 112, generator=g) * 2 - 1
    x, tau = torch.randn(2, 50, 32, generator=g), torch.rand(2, 50, generator=g)
    image_masks = torch.ones(2, 1, dtype=torch.bool)
    pad = torch.zeros(2, 36, dtype=torch.long)
    v_short = trimmed.forward_joint(Pi05Inputs(images, image_masks, tokens, masks), x, tau)
    long_inputs = Pi05Inputs(images, image_masks, torch.cat([tokens, pad], 1), torch.cat([masks, pad.bool()], 1))
    v_long = model.forward_joint(long_inputs, x, tau)
    torch.testing.assert_close(v_short, v_long, rtol=1e-4, atol=1e-5)


def test_vision_probe_is_logged_and_does_not_change_training(tmp_path, episodes):
    probed = trainer.train(_config(tmp_path / "a", steps=5, vision_probe_every=2), episodes=episodes)
    plain = trainer.train(_config(tmp_path / "b", steps=5, vision_probe_every=0), episodes=episodes)
    assert probed.loss_curve == plain.loss_curve  # the probe draws from its own seeds, under no_grad
    log = json.loads((tmp_path / "a" / "p" / "train_log.json").read_text())
    rows = log["vision_probe"]
    assert [r["step"] for r in rows] == [2, 4, 5]
    for r in rows:
        assert r["image_gain"] == pytest.approx(r["loss_shuffled"] - r["loss"])
    assert probed.summary()["image_gain"] == pytest.approx(rows[-1]["image_gain"])
    assert plain.summary()["image_gain"] is None and "vision_probe" not in plain.metadata


def test_image_gain_is_zero_exactly_when_the_images_cannot_matter(tmp_path, episodes):
    from vlash.policies.processing.word_tokenizer import train_tokenizer
    from vlash.train.data import TrainingData
    from vlash.train.stats import dataset_normalizer
    from vlash.train.vision_use import VisionProbe

    config, spec = load_preset(MICRO), _config(tmp_path).sample_spec(50)
    tok = train_tokenizer({e.instruction for e in episodes}, tmp_path, max_vocab=config.vocab_size)
    data = TrainingData(episodes, config, tok, dataset_normalizer(episodes, 50), spec, progress=False, relative=True)
    probe = VisionProbe.draw(data, 8, seed=0, has_alpha=0.6, u0=0.9)
    model = build_random(data.model_config, seed=0)
    seeing = probe.measure(model)
    assert seeing["image_gain"] != 0.0  # a random model's velocities depend on its images
    with torch.no_grad():  # cut the image tokens off: the projector maps every image to its bias
        model.projector.weight.zero_()
    blind = probe.measure(model)
    assert blind["image_gain"] == 0.0 and blind["loss"] == blind["loss_shuffled"]
    with pytest.raises(ValueError, match="2 samples"):
        VisionProbe.draw(data, 1, seed=0, has_alpha=0.6, u0=0.9)


def test_the_interrupt_line_says_what_out_holds():
    kept = Path("run.interrupted")
    assert (
        TrainingInterrupted("run", 5, 9, kept, checkpoint=4)
        .line()
        .startswith(
            "interrupted at step 5/9: run holds the checkpoint of step 4; the policy as of step 5 is in run.interrupted"
        )
    )
    assert (
        TrainingInterrupted("run", 0, 9, None)
        .line()
        .endswith("run was not replaced; no step was done, nothing to keep")
    )
