"""Training-only heads on the policy's streams (`Auxiliaries`), not part of the policy: what they read and their losses.

The heads themselves (and the labels replayed from the simulator) are in `vlash.train.vision_aux`.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

from vlash.policies.pi05.model import Pi05Model
from vlash.train.config import AUX_WEIGHTS
from vlash.train.data import TrainBatch
from vlash.train.errors import ConfigError, TrainError
from vlash.train.vision_aux import (
    FeatureTap,
    NamedPatchHead,
    PatchLabelHead,
    PatchOffsetHead,
    TargetHead,
    palette,
)


class Auxiliaries:
    """Training-only heads (train.vision_aux), not part of the policy: per-patch item labels on the vision
    tower's camera-0 tokens, and where in its patch each item is; the task's target (x, y) from the VLM stream
    entering one of its layers at the last prompt token, and which image token holds it from the same stream;
    and the same target from the expert's residual at every action token."""

    def __init__(
        self,
        model: Pi05Model,
        weights: Mapping[str, float],
        target_layer: int | None = None,
        expert_target_layer: int | None = None,
    ) -> None:
        """`weights`: each head's loss weight by name (config.AUX_WEIGHTS; missing or 0: off). `target_layer`: the
        VLM layer whose input stream the target and named-patch heads read (None: the last layer);
        `expert_target_layer`: the expert layer whose input stream the expert head reads (None: the stream
        entering the expert's final norm)."""
        cfg = model.config
        for name, layer, depth in (
            ("target", target_layer, cfg.vlm.depth),
            ("expert_target", expert_target_layer, cfg.expert.depth),
        ):
            if layer is not None and not 0 <= layer < depth:
                raise ConfigError(f"{name}_aux_layer must be in [0, {depth - 1}] for {depth} layers, got {layer}")
        unknown = set(weights) - set(AUX_WEIGHTS)
        if unknown:
            raise ConfigError(f"unknown auxiliary heads {sorted(unknown)}; known: {', '.join(AUX_WEIGHTS)}")
        self.weights = {name: w for name, w in weights.items() if w > 0}
        on = self.weights.keys()
        self.heads = torch.nn.ModuleDict()
        self.taps: dict[str, FeatureTap] = {}
        if "vision" in on:
            self.heads["vision"] = PatchLabelHead(cfg.vision.width, len(palette()))
        if "patch_offset" in on:
            self.heads["patch_offset"] = PatchOffsetHead(cfg.vision.width, len(palette()))
        if "vision" in on or "patch_offset" in on:
            self.taps["vision"] = FeatureTap(model.vision)
        if "target" in on:
            self.heads["target"] = TargetHead(cfg.vlm.width)
        if "named_patch" in on:
            self.heads["named_patch"] = NamedPatchHead(cfg.vlm.width)
        if "expert_target" in on:
            self.heads["expert_target"] = TargetHead(cfg.expert.width)
            where = model.expert.norm if expert_target_layer is None else model.expert.layers[expert_target_layer]
            if expert_target_layer is not None:
                where = where.input_layernorm  # called with the stream entering that layer
            self.taps["expert_target"] = FeatureTap(where, first_input=True)
        self.cameras, self.patches = cfg.num_cameras, cfg.vision.num_patches
        self.image_tokens = cfg.num_cameras * self.patches
        layer = cfg.vlm.depth - 1 if target_layer is None else target_layer  # see TargetHead
        self.prefix_layer = layer if "target" in self.heads or "named_patch" in self.heads else None

    def losses(
        self, batch: TrainBatch, prefix_out: torch.Tensor | None, expert_ran: bool = True
    ) -> dict[str, torch.Tensor]:
        if batch.patch_labels is None:
            raise TrainError("the batch has no replayed labels (TrainingData.labels is unset)")
        out = {}
        if "vision" in self.taps:
            features = self.taps["vision"].take()[:: self.cameras]
            if "vision" in self.heads:
                out["vision"] = self.heads["vision"].loss(features, batch.patch_labels)
            if "patch_offset" in self.heads:
                out["patch_offset"] = self.heads["patch_offset"].loss(features, batch.patch_labels, batch.patch_offsets)
        if prefix_out is not None and "target" in self.heads:
            last = batch.inputs.token_masks.sum(1) - 1 + self.image_tokens
            out["target"] = self.heads["target"].loss(prefix_out, last, batch.target_xy, batch.has_target)
        if prefix_out is not None and "named_patch" in self.heads:
            camera0 = prefix_out[:, : self.patches]
            out["named_patch"] = self.heads["named_patch"].loss(camera0, batch.target_patch, batch.has_target)
        if expert_ran and "expert_target" in self.taps:
            stream = self.taps["expert_target"].take()
            out["expert_target"] = self.heads["expert_target"].loss_all_tokens(
                stream, batch.target_xy, batch.has_target
            )
        return out

    def total(self, losses: dict[str, torch.Tensor]) -> torch.Tensor:
        return sum(self.weights[name] * value for name, value in losses.items())

    def close(self) -> None:
        for tap in self.taps.values():
            tap.close()
