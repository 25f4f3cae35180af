"""What the evaluation harness asks a chunk policy for, and what it gets back."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np


@dataclass(frozen=True)
class GuidanceRequest:
    """Guided-RTC inpainting target (docs/METHODS.md "rtc: guided inference-time RTC"), in chunk-index units."""

    target: np.ndarray  # [H, J] previous chunk's leftover aligned to the new chunk's indices
    delay: int  # d: indices [0, d) are frozen (executed while the new chunk is computed)
    execution_horizon: int  # s: indices >= H - s get no guidance


@dataclass(frozen=True)
class PlanRequest:
    image: np.ndarray  # uint8 [S, S, 3] camera image at request time
    state: np.ndarray  # [J] joint state given to the policy (observed, or the future state for vlash)
    instruction: str  # task prompt
    schedule: str = "constant"  # flow schedule: "constant" or "horizon-aware"
    prefix: np.ndarray | None = None  # [c, J] committed actions for chunk indices [0, c)
    guidance: GuidanceRequest | None = None  # guided RTC target
    start_offset: int = 0  # control steps between the observation and chunk index 0 (privileged oracle only)
    seed: int = 0  # noise seed of this request (determinism)


@dataclass(frozen=True)
class PlanResult:
    actions: np.ndarray  # [H, J] absolute joint targets in robot units
    final_at_step: np.ndarray  # [H] sampler step after which each index was final (-2: prefix)
    num_steps: int  # denoise steps of the sampler (N)


class ChunkPolicy(Protocol):
    """Anything that turns a request into a chunk: the trained model, or the scripted-expert oracle."""

    horizon: int

    def plan(self, request: PlanRequest, env: object) -> PlanResult: ...
