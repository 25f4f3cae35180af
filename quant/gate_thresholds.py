"""When a quantized variant passes its fidelity check (`GateThresholds`): no torch here, so that `vlash quantize`
generates its gate flags from these fields and checks them before anything is quantized (vlash.quant.fidelity
measures against them)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from vlash.errors import ConfigError


@dataclass(frozen=True)
class GateThresholds:
    """When a quantized variant passes. Action metrics are in normalized model units (q01..q99 -> -1..1)."""

    min_cosine: float = 0.99  # worst per-observation cosine similarity of the action chunk vs fp32
    max_abs_error: float = 0.1  # largest |a - a_fp32| over all observations, steps and action dims
    max_success_drop: float = 0.10  # rollout success rate may fall at most this far below fp32's (0.10 = 10 points)
    max_jerk_ratio: float = 1.5  # rollout mean squared jerk at most this multiple of fp32's

    def __post_init__(self) -> None:
        if not -1.0 <= self.min_cosine <= 1.0:
            raise ConfigError(f"GateThresholds.min_cosine must be in [-1, 1], got {self.min_cosine}")
        for name in ("max_abs_error", "max_success_drop", "max_jerk_ratio"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise ConfigError(f"GateThresholds.{name} must be a finite number >= 0, got {value!r}")
