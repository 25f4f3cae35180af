"""Patch-level supervision of the vision tower with the simulator's item labels (a training-only auxiliary).

pi0.5 starts from a pretrained SigLIP whose patch features already name colours and objects, so the
VLM can look up "the red target" from its first step. From scratch they do not: on `reach` the flow loss
alone never taught pi05-tiny to find the named target (image_gain stayed 0; a probe, docs/history/EVALUATION-LOG.md:
even a direct regression of the goal from the prefix did not get there in 3,000 steps). What does get there is
supervising each patch with what is drawn in it: a linear head on every vision token predicts, per palette
colour, whether an item of that colour has its centre in the patch (multi-label BCE). With that term the
prefix probe's goal loss fell to 0.34 by step 1,200 (0.59 after 3,000 steps without it); see
docs/EVALUATION.md, which also has the runs with the target head (TargetHead) that moved reach to 40%.

Labels come from replaying each episode in the simulator (reset with its seed, its recorded actions):
`task.draw_items` at every frame, checked against the recorded images so a non-replayable episode fails
loudly. The head is not part of the policy checkpoint; inference never runs it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch
from torch import Tensor, nn

from vlash.train.episodes import Episode
from vlash.train.errors import TrainError
from vlash.train.progress import progress_bar

if TYPE_CHECKING:
    from vlash.sim.settings import SimSettings


def palette() -> list[tuple[int, int, int]]:
    """The RGB colours items can have (the label classes, in a fixed order)."""
    from vlash.sim.tasks.base import BALL_COLOR, COLORS  # extra: sim

    return [*COLORS.values(), BALL_COLOR]


def patch_cell(xy: np.ndarray, side: int) -> tuple[int, np.ndarray]:
    """(row-major patch, offset) of world point xy in a side x side grid over the camera's [-1, 1]^2 view (y up):
    the offset from the patch's centre in patch widths, (right, down), each in [-0.5, 0.5]."""
    u, v = (xy[0] + 1.0) / 2.0 * side, (1.0 - xy[1]) / 2.0 * side  # grid coordinates, v down
    col, row = int(np.clip(np.floor(u), 0, side - 1)), int(np.clip(np.floor(v), 0, side - 1))
    offset = np.clip([u - col - 0.5, v - row - 0.5], -0.5, 0.5).astype(np.float32)
    return row * side + col, offset


def patch_index(xy: np.ndarray, side: int) -> int:
    """Row-major patch of world point xy in a side x side grid over the camera's [-1, 1]^2 view (y up)."""
    return patch_cell(xy, side)[0]


@dataclass(frozen=True)
class ReplayLabels:
    """Per-frame labels replayed from the simulator."""

    patches: np.ndarray  # bool [T, side * side, C]: palette colours with an item centred in each patch
    offsets: np.ndarray  # float32 [T, side * side, C, 2]: where in its patch that centre is (patch_cell), else 0
    target_xy: np.ndarray  # float32 [T, 2]: the task's currently relevant target (task.target_xy), 0 if none
    has_target: np.ndarray  # bool [T]: whether there is one
    target_patch: np.ndarray  # int64 [T]: the patch that target's centre is in (patch_cell), 0 if none


def replay_labels(episode: Episode, side: int, env=None) -> ReplayLabels:
    """Replay `episode` (reset with its seed, step its actions) in `env` (None: one with the default simulator
    settings), and label every frame."""
    from vlash.sim import make_env  # extra: sim

    colors = {rgb: i for i, rgb in enumerate(palette())}
    env = env or make_env(episode.task, image_size=episode.images.shape[1])
    obs, _ = env.reset(seed=episode.seed)
    patches = np.zeros((len(episode), side * side, len(colors)), dtype=bool)
    offsets = np.zeros((*patches.shape, 2), np.float32)
    target, has_target = np.zeros((len(episode), 2), np.float32), np.zeros(len(episode), bool)
    target_patch = np.zeros(len(episode), np.int64)
    for t in range(len(episode)):
        if not np.array_equal(obs["image"], episode.images[t]):
            raise TrainError(
                f"episode {episode.task!r} seed {episode.seed} does not replay in vlash.sim (frame {t} "
                "differs): vision-aux labels need simulator episodes; train with --vision-aux-weight 0"
            )
        for item in env.task.draw_items(env.world, env.step_index):
            color = colors.get(tuple(item.rgb))
            if color is not None:
                cell, offset = patch_cell(np.asarray(item.xy), side)
                patches[t, cell, color], offsets[t, cell, color] = True, offset
        xy = env.task.target_xy(env.world, env.step_index)
        if xy is not None:
            target[t], has_target[t], target_patch[t] = xy, True, patch_index(np.asarray(xy), side)
        if t + 1 < len(episode):
            obs, *_ = env.step(episode.actions[t])
    return ReplayLabels(patches, offsets, target, has_target, target_patch)


def dataset_labels(
    episodes: Sequence[Episode], side: int, progress: bool = True, settings: SimSettings | None = None
) -> ReplayLabels:
    """The labels of all episodes, concatenated in FrameTable order (episode by episode), replayed in the simulator
    `settings` they were recorded in (None: the defaults; the image size is each episode's)."""
    from vlash.sim import make_env  # extra: sim

    out, envs = [], {}
    with progress_bar("vision labels", total=len(episodes), enabled=progress) as advance:
        for e in episodes:
            key = (e.task, e.images.shape[1])
            if key not in envs:
                envs[key] = make_env(e.task, settings=settings, image_size=e.images.shape[1])
            out.append(replay_labels(e, side, envs[key]))
            advance(1, "")
    fields = ("patches", "offsets", "target_xy", "has_target", "target_patch")
    return ReplayLabels(*(np.concatenate([getattr(r, f) for r in out]) for f in fields))


class PatchLabelHead(nn.Module):
    """Linear per-patch classifier on the vision tower's output tokens [N, P, W] -> logits [N, P, C]."""

    def __init__(self, width: int, classes: int) -> None:
        super().__init__()
        self.proj = nn.Linear(width, classes)

    def loss(self, features: Tensor, labels: Tensor) -> Tensor:
        """Mean binary cross-entropy over patches and classes; labels bool [N, P, C]."""
        logits = self.proj(features.float())
        return nn.functional.binary_cross_entropy_with_logits(logits, labels.to(logits.dtype))


class PatchOffsetHead(nn.Module):
    """Linear per-patch regression on the vision tower's output tokens [N, P, W] -> [N, P, C, 2]: where in the
    patch the centre of each item it holds lies. The item labels say which patch; this says where in it, to a
    fraction of a patch (a 56 px image has 14 px patches, and touching a target needs ~2 px)."""

    def __init__(self, width: int, classes: int) -> None:
        super().__init__()
        self.classes = classes
        self.proj = nn.Linear(width, classes * 2)

    def loss(self, features: Tensor, labels: Tensor, offsets: Tensor) -> Tensor:
        """Mean squared error [patch widths^2] over the (patch, colour) pairs that hold an item."""
        n, p, _ = features.shape
        pred = self.proj(features.float()).view(n, p, self.classes, 2)
        err = (pred - offsets).square().sum(-1) * labels
        return err.sum() / labels.sum().clamp(min=1)


class TargetHead(nn.Module):
    """LayerNorm + linear head on the VLM's residual stream at the last prompt token -> the task's target (x, y).

    It reads the stream entering the VLM's last layer, not the final output: the action expert attends to
    each VLM layer's keys and values, computed from that layer's input, so what only the last layer's
    output holds is never visible to it (a head on the final output taught the VLM the target while the
    expert's image_gain stayed 0).
    """

    def __init__(self, width: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.proj = nn.Linear(width, 2)

    def loss(self, prefix_out: Tensor, last: Tensor, target: Tensor, has_target: Tensor) -> Tensor:
        """Mean squared error [world units^2] over the samples that have a target; prefix_out [B, P, W]."""
        pred = self.proj(self.norm(prefix_out[torch.arange(len(last)), last].float()))
        err = (pred - target).square().mean(-1) * has_target
        return err.sum() / has_target.sum().clamp(min=1)

    def loss_all_tokens(self, stream: Tensor, target: Tensor, has_target: Tensor) -> Tensor:
        """The same error at every token of a stream [B, T, W] (the expert's action tokens: each must hold the
        target), averaged over the tokens of the samples that have a target."""
        err = (self.proj(self.norm(stream.float())) - target[:, None, :]).square().mean((-1, -2)) * has_target
        return err.sum() / has_target.sum().clamp(min=1)


class NamedPatchHead(nn.Module):
    """LayerNorm + linear score on each camera-0 image token of a VLM stream [B, P, W] -> which patch holds the
    task's target, softmax over the patches. The prefix attends both ways, so the image tokens can read the
    instruction: supervising them to flag the named target hands the action expert, which attends to every
    prefix token, a key to look for and the patch's position with it (TargetHead asks one prompt token instead)."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.proj = nn.Linear(width, 1)

    def loss(self, image_stream: Tensor, target_patch: Tensor, has_target: Tensor) -> Tensor:
        """Cross-entropy [nats] of the named target's patch, over the samples that have a target."""
        logits = self.proj(self.norm(image_stream.float())).squeeze(-1)
        err = nn.functional.cross_entropy(logits, target_patch, reduction="none") * has_target
        return err.sum() / has_target.sum().clamp(min=1)


class FeatureTap:
    """Keeps the last output of a module (the vision tower inside Pi05Model.forward_joint) without a second pass;
    with `first_input`, the first argument it was called with instead (the expert's residual entering its final
    norm)."""

    def __init__(self, module: nn.Module, first_input: bool = False) -> None:
        self.output: Tensor | None = None
        self.name = type(module).__name__
        if first_input:
            self._handle = module.register_forward_pre_hook(self._keep_input)
        else:
            self._handle = module.register_forward_hook(self._keep)

    def _keep(self, _module: nn.Module, _inputs: tuple, output: Tensor) -> None:
        self.output = output

    def _keep_input(self, _module: nn.Module, inputs: tuple) -> None:
        self.output = inputs[0]

    def take(self) -> Tensor:
        if self.output is None:
            raise TrainError(f"the tapped {self.name} did not run in this step")
        out, self.output = self.output, None
        return out

    def close(self) -> None:
        self._handle.remove()
