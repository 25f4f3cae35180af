"""RecentWindow: the most recent N numbers of a long run, in constant memory (percentiles of live statistics)."""

from __future__ import annotations

import numpy as np


class RecentWindow:
    """A ring of the last `capacity` values in one preallocated array: appending never allocates, so a control
    loop that runs for days keeps its statistics in the same memory as one that ran for a minute."""

    def __init__(self, capacity: int, dtype: type = np.float64) -> None:
        if not (isinstance(capacity, int) and capacity >= 1):
            raise ValueError(f"RecentWindow.capacity must be an int >= 1, got {capacity!r}")
        self._values = np.empty(capacity, dtype)
        self.total = 0  # values appended since the last clear(), including those the window no longer holds

    @property
    def capacity(self) -> int:
        return len(self._values)

    def __len__(self) -> int:
        return min(self.total, self.capacity)

    def append(self, value: float) -> None:
        self._values[self.total % self.capacity] = value
        self.total += 1

    def clear(self) -> None:
        self.total = 0

    def values(self) -> np.ndarray:
        """The values held, oldest first (a copy)."""
        n, cap = len(self), self.capacity
        if self.total <= cap:
            return self._values[:n].copy()
        start = self.total % cap
        return np.concatenate([self._values[start:], self._values[:start]])

    def last(self) -> float | None:
        return None if self.total == 0 else self._values[(self.total - 1) % self.capacity].item()

    def percentile(self, q: float) -> float | None:
        """The q-th percentile of the values held; None when empty."""
        return float(np.percentile(self._values[: len(self)], q)) if self.total else None

    def max(self) -> float | None:
        return float(self._values[: len(self)].max()) if self.total else None
