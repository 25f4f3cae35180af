"""Executable array specs: a robot's observation and action features (`Robot.observation_features`,
`action_features`). `spec.validate(x)` raises a ShapeError that names the spec, so a bad array is caught where it
enters, with a message that says which field and what was expected.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from robot_io.protocol.errors import ShapeError


@dataclass(frozen=True)
class ArraySpec:
    """Shape and dtype contract of one named array. `None` in `shape` matches any size."""

    name: str  # field name, used in error messages ("observation.state")
    shape: tuple[int | None, ...]  # expected shape; None = any size along that axis
    dtype: str  # numpy dtype name, e.g. "float32", "uint8"
    finite: bool = True  # floating arrays must not contain NaN or inf

    def __post_init__(self) -> None:
        try:
            np.dtype(self.dtype)
        except TypeError as exc:
            raise ValueError(f"ArraySpec {self.name!r}: unknown dtype {self.dtype!r}") from exc
        if any(s is not None and s < 0 for s in self.shape):
            raise ValueError(f"ArraySpec {self.name!r}: negative size in shape {self.shape}")

    def validate(self, value: np.ndarray) -> np.ndarray:
        """Return `value` unchanged if it satisfies the spec, else raise ShapeError."""
        if not isinstance(value, np.ndarray):
            raise ShapeError(f"{self.name}: expected numpy array, got {type(value).__name__}")
        if value.dtype != np.dtype(self.dtype):
            raise ShapeError(f"{self.name}: expected dtype {self.dtype}, got {value.dtype}")
        if value.ndim != len(self.shape) or any(
            want is not None and got != want for got, want in zip(value.shape, self.shape, strict=True)
        ):
            raise ShapeError(f"{self.name}: expected shape {self._shape_str()}, got {tuple(value.shape)}")
        if self.finite and value.dtype.kind == "f" and not np.isfinite(value).all():
            raise ShapeError(f"{self.name}: contains NaN or inf")
        return value

    def example(self, fill: float = 0.0) -> np.ndarray:
        """A value that satisfies the spec (None axes become 1) — for tests and warm-up."""
        shape = tuple(1 if s is None else s for s in self.shape)
        return np.full(shape, fill, dtype=self.dtype)

    def _shape_str(self) -> str:
        return "(" + ", ".join("*" if s is None else str(s) for s in self.shape) + ")"
