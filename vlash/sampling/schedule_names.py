"""The flow schedules by name (no torch: the server's settings and the command line check a schedule before anything
heavy loads); vlash.sampling.schedules builds their time grids."""

from __future__ import annotations

from enum import StrEnum


class Schedule(StrEnum):
    """Which per-token time grid the sampler integrates along."""

    CONSTANT = "constant"
    HORIZON_AWARE = "horizon-aware"
