"""Guided RTC's weight clip (beta) by value, without torch: the server's and the evaluation's settings check it
before anything heavy loads; vlash.sampling.guidance applies it."""

from __future__ import annotations

import math

from vlash.errors import ConfigError

DEFAULT_GUIDANCE_WEIGHT = 5.0  # beta, the paper's value (LeRobot's max_guidance_weight defaults to 10)
MAX_GUIDANCE_WEIGHT = 1000.0  # past this the clip no longer clips anything a step produces


def check_guidance_weight(value: float, name: str = "guidance_weight") -> None:
    """ConfigError (a ValueError) unless `value` is a finite number in (0, MAX_GUIDANCE_WEIGHT]."""
    if not (isinstance(value, int | float) and math.isfinite(value) and 0 < value <= MAX_GUIDANCE_WEIGHT):
        raise ConfigError(f"{name} must be in (0, {MAX_GUIDANCE_WEIGHT:g}], got {value!r}")
