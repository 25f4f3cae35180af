"""What every checkpoint format gives and takes: `LoadedPolicy` (a model, its processor and where it came from) and
`CheckpointOptions` (what a LeRobot or openpi directory does not store), and the settings a policy's numbers depend
on (`arithmetic`, `input_settings`), as they are recorded.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vlash.policies.pi05.config import Pi05Config
from vlash.policies.pi05.model import Pi05Model
from vlash.policies.processing.processor import Pi05Processor

MODEL_SIZES = ("name", "vision", "vlm", "expert", "vocab_size")  # what --model-config gives a checkpoint


@dataclass
class LoadedPolicy:
    model: Pi05Model
    processor: Pi05Processor
    metadata: dict[str, Any]  # provenance from config.yaml (vlash), config.json (LeRobot) or the openpi assets

    @property
    def config(self) -> Pi05Config:
        return self.model.config


@dataclass(frozen=True)
class CheckpointOptions:
    """What a LeRobot or openpi checkpoint directory does not store; vlash directories need none of it."""

    tokenizer: Path | None = None  # tokenizer.json / tokenizer.model file or its directory (PaliGemma's)
    model_config: Pi05Config | None = None  # the model's sizes (vision, vlm, expert, vocab) when not pi0.5's full size
    asset_id: str | None = None  # openpi: which assets/<id>/norm_stats.json (needed when there are several)
    state_in_prompt: bool | None = None  # openpi: False for configs with discrete_state_input=False (pi05_libero)
    relative_mask: tuple[bool, ...] | None = None  # openpi: DeltaActions dims (e.g. pi05_aloha's joints)

    def sized(self, config: Pi05Config) -> Pi05Config:
        """`config` (from the checkpoint: cameras, chunk length, prompt length) with `model_config`'s sizes."""
        if self.model_config is None:
            return config
        sizes = {k: v for k, v in self.model_config.to_dict().items() if k in MODEL_SIZES}
        return config.with_overrides(**sizes)

    def unused_by(self, layout: str) -> list[str]:
        """The options set here that `layout` does not take."""
        allowed = {"vlash": (), "lerobot": ("tokenizer", "model_config"), "openpi": tuple(self.__dataclass_fields__)}
        names = ("tokenizer", "model_config", "asset_id", "state_in_prompt", "relative_mask")
        return [n for n in names if getattr(self, n) is not None and n not in allowed[layout]]


def arithmetic(processor: Pi05Processor) -> dict[str, str]:
    """The arithmetic a policy's numbers depend on, which follows the implementation that trained it (recorded in
    its metadata): the time embedding's precision (openpi fp32, LeRobot fp64) and resized images (openpi rounds them
    to uint8, LeRobot keeps floats)."""
    return {
        "time_embedding": processor.config.time_embedding,
        "resized_images": "uint8" if processor.round_resized_images else "float",
    }


def input_settings(processor: Pi05Processor) -> dict[str, Any]:
    """How `processor` presents images and the prompt (what differs between checkpoint families): the part of
    config.yaml's `processor` section that `save_policy`'s own arguments do not cover."""
    encoder = processor.prompt_encoder
    return {
        "antialias": processor.antialias,
        "image_pad_value": processor.image_pad_value,
        "round_resized_images": processor.round_resized_images,
        "state_in_prompt": encoder.state_in_prompt,
        "pad_state_to": encoder.pad_state_to,
    }
