"""Sample batches -> model tensors: precomputed model images, prompts with the (future) state, normalized targets.

Images are resized once per frame to the policy's input size exactly as `Pi05Processor` does
(`resize_with_pad`, antialiased) and kept as uint8; they become [-1, 1] floats per batch. The prompt of a
sample carries its own state — the future state when the sample has a future-state offset — normalized
with the dataset's "observation.state" stats and discretized by `Pi05PromptEncoder`. Targets are the
actions normalized with the "action" stats (QUANTILES -> about [-1, 1]) and zero-padded to the policy's
action_dim; with `relative` the targets are first taken relative to the sample's (future) state, as
`Pi05Processor.to_model_actions` does at inference.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from vlash.policies.pi05.config import Pi05Config
from vlash.policies.pi05.model import Pi05Inputs
from vlash.policies.processing.image import resize_with_pad
from vlash.policies.processing.normalization import Normalizer
from vlash.policies.processing.tokenizer import Pi05PromptEncoder, PromptTokenizer
from vlash.train.episodes import Episode
from vlash.train.errors import TrainError
from vlash.train.progress import progress_bar
from vlash.train.samples import FrameTable, SampleBatch, SampleSpec
from vlash.train.stats import ACTION_KEY, STATE_KEY
from vlash.train.vision_aux import ReplayLabels


@dataclass
class TrainBatch:
    """Model-ready tensors of one SampleBatch."""

    inputs: Pi05Inputs  # images, prompt ids and masks
    actions: Tensor  # float32 [B, H, A] normalized targets, zero-padded beyond the real dims
    loss_mask: Tensor  # bool [B, H] real targets after the committed prefix
    prefix_len: Tensor  # int64 [B]
    use_has: Tensor  # bool [B]
    patch_labels: Tensor | None = None  # bool [B, P, C] items per vision patch of camera 0 (train.vision_aux)
    patch_offsets: Tensor | None = None  # float32 [B, P, C, 2] where in its patch each of those items is
    target_xy: Tensor | None = None  # float32 [B, 2] the task's current target at the image frame
    has_target: Tensor | None = None  # bool [B]
    target_patch: Tensor | None = None  # int64 [B] the vision patch of camera 0 that target is in


def model_images(episodes: Sequence[Episode], size: int, progress: bool = True) -> np.ndarray:
    """uint8 [N, size, size, 3]: every frame resized-with-pad as the policy's processor does it."""
    out = np.empty((sum(len(e) for e in episodes), size, size, 3), dtype=np.uint8)
    start = 0
    with progress_bar("resizing images", total=len(episodes), enabled=progress) as advance:
        for e in episodes:
            out[start : start + len(e)] = resize_with_pad(e.images, size, size, antialias=True)
            start += len(e)
            advance(1, "")
    return out


class TrainingData:
    """Episodes + stats + tokenizer, drawing model-ready batches."""

    def __init__(
        self,
        episodes: Sequence[Episode],
        config: Pi05Config,
        tokenizer_file: str | Path,
        normalizer: Normalizer,
        spec: SampleSpec,
        trim_prompt: bool = True,
        progress: bool = True,
        relative: bool = False,
    ) -> None:
        self.relative = relative
        self.table = FrameTable(episodes)
        self.action_dims = episodes[0].num_joints  # real action entries (the joints)
        self.state_dims = episodes[0].state_dims  # state entries in the prompt: the joints, then any extras
        self.state_names = episodes[0].state_names
        if any((e.num_joints, e.state_dims, e.state_names) != (self.action_dims, self.state_dims, self.state_names)
               for e in episodes):  # fmt: skip
            raise TrainError("episodes differ in joint count or state layout (state_names)")
        if self.action_dims > config.action_dim:
            raise TrainError(f"{self.action_dims} joints do not fit the policy's action_dim {config.action_dim}")
        if spec.horizon != config.action_horizon:
            raise TrainError(f"sample horizon {spec.horizon} != policy action_horizon {config.action_horizon}")
        self.config = config
        self.spec = spec
        self.normalizer = normalizer
        tokenizer = PromptTokenizer.from_dir(tokenizer_file)
        full = Pi05PromptEncoder(tokenizer, max_len=config.max_token_len, state_dims=self.state_dims)
        self.prompt_len = self._longest_prompt(full, {e.instruction for e in episodes})
        self.token_len = self.prompt_len if trim_prompt else config.max_token_len
        self.encoder = Pi05PromptEncoder(tokenizer, max_len=self.token_len, state_dims=self.state_dims)
        self.images = model_images(episodes, config.vision.image_size, progress)
        self.labels: ReplayLabels | None = None  # per frame, set when training with the vision / target aux

    def _longest_prompt(self, encoder: Pi05PromptEncoder, instructions: set[str]) -> int:
        """Prompt tokens of the longest instruction; every state bin is one token, so states do not matter."""
        lengths = {}
        for text in sorted(instructions):
            ids = encoder.tokenizer.encode(encoder.format_prompt(text, np.zeros(self.state_dims)), add_bos=True)
            lengths[text] = len(ids)
        text, longest = max(lengths.items(), key=lambda kv: kv[1])
        if longest > self.config.max_token_len:
            raise TrainError(
                f"the prompt of {text!r} is {longest} tokens, more than the policy's max_token_len "
                f"{self.config.max_token_len}: the state would be cut off; shorten the instruction"
            )
        return longest

    @property
    def model_config(self) -> Pi05Config:
        """The policy config the training model is built with (prompt padding trimmed; same weights)."""
        return self.config.with_overrides(max_token_len=self.token_len)

    def batch(self, batch_size: int, rng: np.random.Generator) -> TrainBatch:
        return self.tensors(self.table.draw(batch_size, self.spec, rng))

    def tensors(self, batch: SampleBatch) -> TrainBatch:
        images = torch.from_numpy(self.images[batch.frames]).permute(0, 3, 1, 2).float() / 255.0 * 2.0 - 1.0
        states = self.normalizer.normalize(STATE_KEY, batch.states)
        ids, masks = self.encoder.encode_batch(batch.instructions, states)
        joints = batch.states[:, None, : self.action_dims]
        targets = batch.targets - joints if self.relative else batch.targets
        targets = self.normalizer.normalize(ACTION_KEY, targets).astype(np.float32)
        actions = np.zeros((*targets.shape[:2], self.config.action_dim), dtype=np.float32)
        actions[..., : self.action_dims] = targets
        size, cams = len(batch.frames), self.config.num_cameras
        # The simulator has one camera: the policy's first slot; other slots are masked out as the processor does.
        all_images = torch.full((size, cams, *images.shape[1:]), -1.0)
        all_images[:, 0] = images
        image_masks = torch.zeros(size, cams, dtype=torch.bool)
        image_masks[:, 0] = True
        return TrainBatch(
            inputs=Pi05Inputs(
                images=all_images,
                image_masks=image_masks,
                tokens=torch.from_numpy(ids),
                token_masks=torch.from_numpy(masks),
            ),
            actions=torch.from_numpy(actions),
            loss_mask=torch.from_numpy(batch.loss_mask),
            prefix_len=torch.from_numpy(batch.prefix_len),
            use_has=torch.from_numpy(batch.use_has),
            **self._label_tensors(batch.frames),
        )

    def _label_tensors(self, frames: np.ndarray) -> dict[str, Tensor]:
        if self.labels is None:
            return {}
        return {
            "patch_labels": torch.from_numpy(self.labels.patches[frames]),
            "patch_offsets": torch.from_numpy(self.labels.offsets[frames]),
            "target_xy": torch.from_numpy(self.labels.target_xy[frames]),
            "has_target": torch.from_numpy(self.labels.has_target[frames]),
            "target_patch": torch.from_numpy(self.labels.target_patch[frames]),
        }
