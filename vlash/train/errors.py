"""Typed errors of the training pipeline."""

from vlash.errors import ConfigError, VlashError


class TrainError(VlashError, RuntimeError):
    """Training cannot run or cannot finish (no usable episodes, a diverged loss, ...)."""


class DatasetError(VlashError, ValueError):
    """A recorded dataset is malformed: wrong shapes or dtypes, missing arrays, unreadable file."""


__all__ = ["ConfigError", "DatasetError", "TrainError"]
