"""Where does language-conditioned reaching get stuck? Two supervised probes on `reach` expert frames.

Both train a freshly initialised pi05-tiny part (scratch init, AdamW, batch 32) by plain regression and
print the loss every 50 steps next to the loss of predicting the mean (the "nothing learned" level):

- vision: the SigLIP tower alone, a linear head on its flattened patch features -> the (x, y) of the
  target of every colour (masked to the colours present). No language: can the tower see and place
  coloured targets?
- prefix: images + prompt through the vision tower and the Gemma prefix, a linear head on the last
  prompt token -> the (x, y) the episode ends at (the named target). Needs the colour-word lookup.

    python tools/probe_grounding.py --probe vision --steps 600
    python tools/probe_grounding.py --probe prefix --steps 3000 [--image-size 56] [--patch-label-weight 1]

--image-size overrides the preset's input resolution (patch size kept): 56 px gives 16 patches, ~2.4x
faster steps. --patch-label-weight adds the per-patch item-label loss of vlash.train.vision_aux on the
vision tower to the prefix probe (the printed loss then includes it). docs/EVALUATION.md records what
these showed.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from vlash import make_env
from vlash import planar_arm as kinematics
from vlash.policies.pi05.config import load_preset
from vlash.policies.pi05.weights import build_random
from vlash.policies.processing.word_tokenizer import train_tokenizer
from vlash.sim.tasks.base import COLORS
from vlash.train.config import TrainConfig
from vlash.train.data import TrainingData, model_images
from vlash.train.dataset import load_episodes, save_episodes
from vlash.train.episodes import record_episodes
from vlash.train.errors import DatasetError
from vlash.train.init import init_from_scratch, tokenizer_vocab
from vlash.train.stats import dataset_normalizer
from vlash.train.vision_aux import PatchLabelHead, dataset_labels, palette

BATCH = 32


def episodes(path: str | None, count: int) -> list:
    if path:
        try:
            return [e for e in load_episodes(path) if e.success][:count]
        except DatasetError:
            if Path(path).exists():  # never overwrite a file we could not read
                raise
    found = [e for e in record_episodes("reach", count, 0, 96, True) if e.success]
    if path:
        save_episodes(path, found)
    return found


def colour_targets(eps: list) -> tuple[np.ndarray, np.ndarray]:
    """Per frame: (x, y) * 2 of each colour's target [N, 6, 2] and which colours are present [N, 6]."""
    env, names, xy, present = make_env("reach", image_size=96), list(COLORS), [], []
    for e in eps:
        env.reset(seed=e.seed)
        y, m = np.zeros((len(names), 2), np.float32), np.zeros(len(names), np.float32)
        for p, c in zip(env.world.positions, env.world.colors, strict=True):
            y[names.index(c)], m[names.index(c)] = p * 2.0, 1.0
        xy += [y] * len(e)
        present += [m] * len(e)
    return np.array(xy), np.array(present)


def train_loop(steps: int, lr: float, params: list, loss_fn) -> None:
    opt = torch.optim.AdamW(params, lr=lr, betas=(0.9, 0.95), weight_decay=0.01)
    rng, losses, start = np.random.default_rng(0), [], time.perf_counter()
    for step in range(steps):
        loss = loss_fn(rng)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        losses.append(loss.item())
        if (step + 1) % 50 == 0:
            rate = (step + 1) / (time.perf_counter() - start)
            print(f"step {step + 1:5d}  loss {np.mean(losses[-50:]):.4f}  {rate:.1f} steps/s", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--probe", choices=["vision", "prefix"], required=True)
    parser.add_argument("--steps", type=int, default=600)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--episodes", type=int, default=600)
    parser.add_argument("--dataset", default=None, help=".npz of reach episodes (recorded there when missing)")
    parser.add_argument("--image-size", type=int, default=None, help="override the preset's input size")
    parser.add_argument("--patch-label-weight", type=float, default=0.0, help="prefix probe: + per-patch labels")
    args = parser.parse_args()
    torch.set_num_threads(2)
    eps = episodes(args.dataset, args.episodes)
    policy = load_preset("pi05-tiny")
    if args.image_size:
        policy = policy.with_overrides(vision={**policy.to_dict()["vision"], "image_size": args.image_size})
    model = build_random(policy, seed=0)
    if args.probe == "vision":
        xy, present = colour_targets(eps)
        images = model_images(eps, policy.vision.image_size, False)
        init_from_scratch(model)
        tower = model.vision.train()
        head = torch.nn.Linear(policy.vision.width * policy.vision.num_patches, xy.shape[1] * 2)
        print(f"mean-prediction loss {xy[present > 0].var(0).mean():.4f}")

        def loss_fn(rng):
            i = rng.integers(len(images), size=BATCH)
            x = torch.from_numpy(images[i]).permute(0, 3, 1, 2).float() / 127.5 - 1.0
            err = (head(tower(x).flatten(1)).view(BATCH, -1, 2) - torch.from_numpy(xy[i])).square().mean(-1)
            mask = torch.from_numpy(present[i])
            return (err * mask).sum() / mask.sum()

        train_loop(args.steps, args.lr, [*tower.parameters(), *head.parameters()], loss_fn)
        return
    links = make_env("reach").arm_config.link_lengths
    goal = np.concatenate([np.repeat(kinematics.forward(e.states[-1], links)[None] * 2.0, len(e), 0) for e in eps])
    goal = goal.astype(np.float32)
    with tempfile.TemporaryDirectory() as tmp:
        tokenizer = train_tokenizer({e.instruction for e in eps}, tmp, max_vocab=policy.vocab_size)
        spec = TrainConfig(tasks=("reach",), augment=False).sample_spec(policy.action_horizon)
        data = TrainingData(eps, policy, tokenizer, dataset_normalizer(eps, 50), spec, True, False, True)
        model = build_random(data.model_config, seed=0)
        init_from_scratch(model, tokenizer_vocab(tokenizer))
    model.train()
    head = torch.nn.Linear(policy.vlm.width, 2)
    patch_head = PatchLabelHead(policy.vision.width, len(palette()))
    if args.patch_label_weight > 0:
        data.labels = dataset_labels(eps, policy.vision.image_size // policy.vision.patch_size, False)
    print(f"mean-prediction loss {goal.var(0).mean():.4f}")

    def loss_fn(rng):
        draw = data.table.draw(BATCH, data.spec, rng)
        batch = data.tensors(draw)
        _, out = model.encode_prefix(batch.inputs)
        last = batch.inputs.token_masks.sum(1) - 1 + policy.num_cameras * policy.vision.num_patches
        loss = (head(out[torch.arange(BATCH), last]) - torch.from_numpy(goal[draw.frames])).square().mean()
        if args.patch_label_weight > 0:
            features = model.vision(batch.inputs.images[:, 0])
            loss = loss + args.patch_label_weight * patch_head.loss(features, batch.patch_labels)
        return loss

    parts = [model.vision, model.projector, model.vlm, head, patch_head]
    train_loop(args.steps, args.lr, [p for m in parts for p in m.parameters()], loss_fn)


if __name__ == "__main__":
    main()
