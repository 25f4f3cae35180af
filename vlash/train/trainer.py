"""Train a pi0.5-shaped policy from scratch on simulated expert data by flow matching.

Pipeline: record (or load) expert episodes -> QUANTILES stats -> word-level tokenizer -> model images
once -> per step: draw samples (future-state offsets, committed prefix, horizon-aware mix) -> times,
noise, x_t -> `Pi05Model.forward_joint` -> masked MSE -> AdamW (warm-up + cosine, gradient clipping).
Writes vlash's policy directory (config.yaml with provenance, weights, stats, tokenizer.json) plus
train_log.json, atomically (`vlash.train.output`). Deterministic given the seed and thread count.
"""

from __future__ import annotations

import logging
import math
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from vlash.policies.pi05.config import load_preset
from vlash.policies.pi05.model import Pi05Model
from vlash.policies.pi05.weights import build_random
from vlash.policies.processing.normalization import NormMode
from vlash.policies.processing.task_space import PlanarArmTaskSpace, PlanarArmVelocityTaskSpace
from vlash.policies.processing.word_tokenizer import train_tokenizer
from vlash.sim.settings import SimSettings
from vlash.train.auxiliaries import Auxiliaries
from vlash.train.base import base_tokenizer, load_base_model
from vlash.train.config import TrainConfig, TrainResult
from vlash.train.data import TrainBatch, TrainingData
from vlash.train.episodes import Episode, in_task_space
from vlash.train.errors import TrainError
from vlash.train.flow import draw_times, flow_loss, noisy_actions, token_times
from vlash.train.init import init_from_scratch, init_state_bin_embeddings, tokenizer_vocab
from vlash.train.interrupt import TrainingInterrupted, interrupted_path, sigint_deferred
from vlash.train.output import git_commit, policy_saver, tail_mean, with_config
from vlash.train.progress import progress_bar
from vlash.train.recording import gather_episodes
from vlash.train.stats import dataset_normalizer
from vlash.train.vision_aux import dataset_labels
from vlash.train.vision_use import VisionProbe

log = logging.getLogger(__name__)

HAS_ALPHA = 0.6  # horizon-aware schedule exponent (docs/METHODS.md "Flow sampling" default)
VISION_PROBE_SIZE = 32  # samples in the fixed image_gain probe batch
ADAM_BETAS = (0.9, 0.95)  # openpi's AdamW betas


def simulator_task_space(sim: SimSettings) -> PlanarArmTaskSpace | PlanarArmVelocityTaskSpace:
    """The task space of the arm the episodes are recorded with: end-effector positions, or with velocity actions
    end-effector velocities."""
    if sim.action_interface == "velocity":
        return PlanarArmVelocityTaskSpace.from_arm(sim.arm)
    return PlanarArmTaskSpace.from_arm(sim.arm)


def lr_factor(step: int, config: TrainConfig) -> float:
    """Learning-rate multiplier at optimizer step `step` (0-based): linear warm-up, then cosine."""
    if step < config.warmup_steps:
        return (step + 1) / config.warmup_steps
    progress = (step - config.warmup_steps) / max(1, config.steps - config.warmup_steps)
    cosine = 0.5 * (1.0 + math.cos(math.pi * min(progress, 1.0)))
    return config.min_lr_ratio + (1.0 - config.min_lr_ratio) * cosine


def make_optimizer(
    model: Pi05Model, config: TrainConfig, extra: torch.nn.Module | None = None
) -> tuple[torch.optim.Optimizer, Any]:
    """AdamW with weight decay on weight matrices only (not norms, biases, embeddings) + the LR schedule;
    `extra` (a training-only head) is optimized alongside."""
    decay, plain = [], []
    named = [*model.named_parameters(), *(extra.named_parameters() if extra is not None else [])]
    for name, p in named:
        (decay if p.ndim >= 2 and "embed" not in name else plain).append(p)
    groups = [{"params": decay, "weight_decay": config.weight_decay}, {"params": plain, "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=config.lr, betas=ADAM_BETAS)
    return opt, torch.optim.lr_scheduler.LambdaLR(opt, lambda step: lr_factor(step, config))


def has_u0(model: Pi05Model) -> float:
    """The horizon-aware schedule's u0 for the model's step count (the first action is final after one step)."""
    return (model.config.num_steps - 1) / model.config.num_steps


def flow_step(
    model: Pi05Model,
    batch: TrainBatch,
    generator: torch.Generator,
    real_dims: int,
    pad_weight: float,
    aux: Auxiliaries | None = None,
    forward: Callable[..., Any] | None = None,
) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
    """(loss, real-dims flow loss, auxiliary losses by name) of one batch: draw times and noise, noise the
    targets, predict velocities; the optimized loss adds the weighted auxiliary losses. `forward`: the model's
    forward_joint or a compiled version of it (None: model.forward_joint)."""
    cfg = model.config
    forward = model.forward_joint if forward is None else forward
    actions = batch.actions
    t = draw_times(actions.shape[0], generator)
    tau = token_times(t, batch.prefix_len, batch.use_has, cfg.action_horizon, alpha=HAS_ALPHA, u0=has_u0(model))
    noise = torch.randn(actions.shape, generator=generator)
    x_t, u = noisy_actions(actions, noise, tau)
    if aux is None:
        v = forward(batch.inputs, x_t, tau)
        return *flow_loss(v, u, batch.loss_mask, tau, real_dims, pad_weight), {}
    out = forward(batch.inputs, x_t, tau, prefix_layer=aux.prefix_layer)
    v, prefix_out = out if aux.prefix_layer is not None else (out, None)
    loss, real = flow_loss(v, u, batch.loss_mask, tau, real_dims, pad_weight)
    losses = aux.losses(batch, prefix_out)
    return loss + aux.total(losses), real, losses


def grounding_step(
    model: Pi05Model, batch: TrainBatch, aux: Auxiliaries
) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
    """(loss, nan, auxiliary losses) of one grounding step (TrainConfig.grounding_steps): the auxiliary heads
    only, on a prefix-only pass (vision tower + the VLM layers below the target head's tap; no expert)."""
    if aux.prefix_layer is None:
        model.embed_prefix(batch.inputs)  # the vision tower's output reaches the head through the tap
        prefix_out = None
    else:
        prefix_out = model.prefix_stream(batch.inputs, aux.prefix_layer)
    losses = aux.losses(batch, prefix_out, expert_ran=False)
    return aux.total(losses), torch.tensor(float("nan")), losses


def run_steps(
    model: Pi05Model,
    data: TrainingData,
    config: TrainConfig,
    checkpoint: Callable[[int, dict, Pi05Model], None],
    keep: Callable[[int, dict, Pi05Model], Path] | None = None,
) -> tuple[dict[str, list[float]], float, Pi05Model]:
    """The optimization loop; returns ({"loss": [...], "real_loss": [...], "lr": [...], "vision_probe": [...]},
    seconds, the weights to save: `model`, or its moving average with config.ema_decay). "vision_probe" holds
    {"step", "loss", "loss_shuffled", "image_gain"} rows (train.vision_use), measured on `model`. The first
    config.grounding_steps steps train the auxiliary heads only (real_loss is nan there). Ctrl-C: `keep` writes the
    state after the last whole step (vlash.train.interrupt), then TrainingInterrupted is raised."""
    ema = None
    if config.ema_decay:  # before the auxiliary taps hook into `model`, so the copy carries none
        multi_avg_fn = torch.optim.swa_utils.get_ema_multi_avg_fn(config.ema_decay)
        ema = torch.optim.swa_utils.AveragedModel(model, multi_avg_fn=multi_avg_fn, use_buffers=True)
    weights = model if ema is None else ema.module
    aux = None
    if config.uses_auxiliaries:
        aux = Auxiliaries(model, config.aux_weights, config.target_aux_layer, config.expert_target_aux_layer)
    opt, schedule = make_optimizer(model, config, aux.heads if aux is not None else None)
    params = [p for group in opt.param_groups for p in group["params"]]
    probe = None
    if config.vision_probe_every:
        probe = VisionProbe.draw(data, VISION_PROBE_SIZE, config.seed, HAS_ALPHA, has_u0(model))
    rng = np.random.default_rng(config.seed)
    generator = torch.Generator().manual_seed(config.seed)
    forward = torch.compile(model.forward_joint) if config.compile else model.forward_joint
    curves: dict[str, list] = {"loss": [], "real_loss": [], "lr": [], "vision_probe": []}
    curves |= {f"{name}_aux_loss": [] for name in (aux.heads if aux is not None else [])}
    gain = ""
    model.train()
    start, reported, done, checkpointed = time.perf_counter(), 0, 0, 0
    try:
        with progress_bar("training", total=config.final_step, enabled=config.progress) as advance:
            for step in range(config.final_step):
                batch = data.batch(config.batch_size, rng)
                if step < config.grounding_steps:
                    loss, real, aux_losses = grounding_step(model, batch, aux)
                else:
                    loss, real, aux_losses = flow_step(
                        model, batch, generator, data.action_dims, config.pad_loss_weight, aux, forward
                    )
                if not torch.isfinite(loss):
                    raise TrainError(f"loss is {loss.item()} at step {step}; lower the learning rate (now {config.lr})")
                opt.zero_grad(set_to_none=True)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(params, config.grad_clip)
                with sigint_deferred():  # the update, whole: Ctrl-C finds the weights of `done` steps
                    curves["lr"].append(schedule.get_last_lr()[0])
                    opt.step()
                    schedule.step()
                    if ema is not None:
                        ema.update_parameters(model)
                    curves["loss"].append(loss.item())
                    curves["real_loss"].append(real.item())
                    for name, value in aux_losses.items():
                        curves[f"{name}_aux_loss"].append(value.item())
                    done = step + 1
                if probe is not None and (done % config.vision_probe_every == 0 or done == config.final_step):
                    curves["vision_probe"].append({"step": done, **probe.measure(model)})
                    gain = f"  image_gain {curves['vision_probe'][-1]['image_gain']:+.4f}"
                if done % config.log_every == 0 or done == config.final_step:
                    rate = done / (time.perf_counter() - start)
                    info = f"loss {np.mean(curves['loss'][-config.log_every :]):.4f}{gain}  {rate:.2f} steps/s"
                    advance(done - reported, info)
                    reported = done
                    log.info("step %d: %s", done, info)
                if config.checkpoint_every and done % config.checkpoint_every == 0 and done < config.final_step:
                    checkpoint(done, curves, weights)
                    checkpointed = done
    except KeyboardInterrupt:
        kept = keep(done, curves, weights) if keep is not None and done else None
        raise TrainingInterrupted(config.out, done, config.final_step, kept, checkpointed) from None
    finally:
        if aux is not None:
            aux.close()
    return curves, time.perf_counter() - start, weights


def _metadata(config: TrainConfig, command: str | None, data: TrainingData, rate: float) -> dict[str, Any]:
    episodes = data.table.episodes
    tasks = sorted({e.task for e in episodes})
    return {
        "trained_by": "vlash.train",
        "command": command,
        "config": config.to_dict(),
        "git": git_commit(),
        # what the policy was trained for: the simulator the episodes were recorded in (its action interface), and
        # its state's entries: the joints, then any extras it observes (vlash eval checks them against its simulator)
        "sim": config.sim_settings().to_dict(),
        "state_names": list(data.state_names) or None,
        "torch": torch.__version__,
        "dataset": {
            "path": config.dataset,
            "episodes": len(episodes),
            "frames": len(data.table),
            "expert_success_rate": rate,
            "tail_steps": sorted({0 if e.tail is None else len(e.tail) for e in episodes}),
            "plan_steps": sorted({0 if e.plans is None else e.plans.shape[1] for e in episodes}),
            "episodes_per_task": {t: sum(e.task == t for e in episodes) for t in tasks},
            "instructions": sorted({e.instruction for e in episodes}),
        },
        "augment": {
            "future_state": data.spec.future_state,
            "prefix_mix": data.spec.prefix_mix,
            "d_max": data.spec.d_max,
            "mix_prob": data.spec.mix_prob,
            "has_prob": data.spec.has_prob,
        },
    }


def train(config: TrainConfig, episodes: Sequence[Episode] | None = None, command: str | None = None) -> TrainResult:
    """Run `config` (on `episodes` when given, else recorded / loaded ones); writes config.out."""
    torch.set_num_threads(config.num_threads)
    start = time.perf_counter()
    policy = load_preset(config.policy)
    spec = config.sample_spec(policy.action_horizon)  # bad settings fail before any recording
    base = load_base_model(config.init_from, policy) if config.init_from is not None else None
    kept, rate = gather_episodes(config, episodes, policy.action_horizon)
    space = simulator_task_space(config.sim_settings()) if config.task_space else None
    learned = kept if space is None else [in_task_space(e, space) for e in kept]
    normalizer = dataset_normalizer(
        learned, policy.action_horizon if config.relative_actions else 0, NormMode(config.action_norm)
    )
    instructions = {e.instruction for e in kept}
    with tempfile.TemporaryDirectory(prefix="vlash-train-") as tmp:
        if config.init_from is not None:
            tokenizer_file = base_tokenizer(config.init_from, instructions)
        else:
            tokenizer_file = train_tokenizer(instructions, tmp, max_vocab=policy.vocab_size)
        data = TrainingData(
            learned,
            policy,
            tokenizer_file,
            normalizer,
            spec,
            config.trim_prompt,
            config.progress,
            config.relative_actions,
        )
        if config.uses_auxiliaries:
            side = policy.vision.image_size // policy.vision.patch_size
            # replayed in the simulator they were recorded in: the joint-space episodes
            data.labels = dataset_labels(kept, side, config.progress, config.sim_settings())
        if base is not None:
            model = with_config(base, data.model_config)  # every weight from the base (same tensors, trimmed prompt)
        else:
            model = build_random(data.model_config, seed=config.seed)
            vocab = tokenizer_vocab(tokenizer_file) if config.bin_embedding_init else None
            if config.scratch_init:
                init_from_scratch(model, vocab)
            elif vocab is not None:
                init_state_bin_embeddings(model, vocab)
        meta = _metadata(config, command, data, rate)
        dims = (data.action_dims, data.state_dims)
        save = policy_saver(config, policy, normalizer, tokenizer_file, dims, meta, space)

        def keep(step: int, curves: dict, weights: Pi05Model) -> Path:  # Ctrl-C: the steps done, beside --out
            return save(step, curves, weights, {"interrupted": True}, interrupted_path(config.out))

        curves, train_s, trained = run_steps(model, data, config, save, keep)
        timing = {
            "wall_time_s": time.perf_counter() - start,
            "train_time_s": train_s,
            "steps_per_s": config.final_step / train_s,
            "real_loss": tail_mean(curves["real_loss"], config.log_every),
        }
        for key, values in curves.items():
            if key.endswith("_aux_loss") and values:
                timing[key] = tail_mean(values, config.log_every)
        if curves["vision_probe"]:
            timing["image_gain"] = curves["vision_probe"][-1]["image_gain"]
        try:
            out = save(config.final_step, curves, trained, timing)
        except KeyboardInterrupt:  # the steps are done: they are kept all the same
            raise TrainingInterrupted(
                config.out, config.final_step, config.final_step, keep(config.final_step, curves, trained)
            ) from None
    return TrainResult(
        out=out,
        final_loss=tail_mean(curves["loss"], config.log_every),
        final_real_loss=timing["real_loss"],
        loss_curve=curves["loss"],
        real_loss_curve=curves["real_loss"],
        wall_time_s=time.perf_counter() - start,
        train_time_s=train_s,
        steps_per_s=timing["steps_per_s"],
        num_episodes=len(kept),
        num_frames=len(data.table),
        success_rate=rate,
        metadata={**meta, **timing},
    )
