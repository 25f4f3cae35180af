"""Per-feature normalization of pi0.5 state/action (file loaders: vlash.policies.formats.stats_io).

Formulas (``lo, hi`` = ``min, max`` for MIN_MAX, ``q01, q99`` for QUANTILES, ``q10, q90`` for QUANTILE10):

- ``MEAN_STD``: ``y = (x - mean) / std_f``; inverse ``x = y * std_i + mean``.
- range modes: ``y = (x - lo) / span * 2 - 1`` maps ``[lo, hi]`` to ``[-1, 1]``; inverse
  ``x = (y + 1) / 2 * span + lo``. Nothing is clipped (neither reference clips).

``eps`` enters as each reference does it, chosen by ``EpsRule``:

- ``LEROBOT`` (lerobot/processor/normalize_processor.py, eps 1e-8): ``span = hi - lo`` with a zero span
  replaced by eps; ``std_f = std + eps`` and ``std_i = std`` (eps only when normalizing).
- ``OPENPI`` (openpi/transforms.py Normalize/Unnormalize, eps 1e-6): ``span = hi - lo + eps``,
  ``std_f = std_i = std + eps``.

Either way zero-range stats give finite values. Stats are 1-D ``[D]``; an input whose last axis is longer
than D (pi0.5 pads state/action to 32) has its first D entries transformed and the rest passed through
unchanged; a shorter input is an error. Stats of higher rank (image stats ``[3, 1, 1]``) broadcast as is.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, TypeVar

import numpy as np
import torch

from vlash.errors import VlashError

log = logging.getLogger(__name__)

Array = TypeVar("Array", np.ndarray, torch.Tensor)


class StatsError(VlashError, ValueError):
    """Normalization stats are missing, malformed or do not fit the data."""


class NormMode(StrEnum):
    """Normalization formula; values are LeRobot's ``NormalizationMode`` strings."""

    IDENTITY = "IDENTITY"
    MEAN_STD = "MEAN_STD"
    MIN_MAX = "MIN_MAX"
    QUANTILES = "QUANTILES"
    QUANTILE10 = "QUANTILE10"


class EpsRule(StrEnum):
    """Where eps enters the formulas (see the module docstring)."""

    LEROBOT = "lerobot"
    OPENPI = "openpi"


REQUIRED_STATS: dict[NormMode, tuple[str, ...]] = {
    NormMode.IDENTITY: (),
    NormMode.MEAN_STD: ("mean", "std"),
    NormMode.MIN_MAX: ("min", "max"),
    NormMode.QUANTILES: ("q01", "q99"),
    NormMode.QUANTILE10: ("q10", "q90"),
}


@dataclass(frozen=True, eq=False)
class FeatureNorm:
    """How one feature (e.g. ``"observation.state"``) is normalized."""

    key: str  # feature name, used in error messages
    mode: NormMode  # which formula
    stats: Mapping[str, np.ndarray] = field(default_factory=dict)  # stat name -> array; extras kept unused
    eps: float = 1e-8  # guards zero ranges, see EpsRule
    eps_rule: EpsRule = EpsRule.LEROBOT  # where eps enters the formulas
    _coeffs: tuple[np.ndarray, np.ndarray, np.ndarray] | None = field(init=False, repr=False, default=None)
    _torch_cache: dict[Any, tuple[torch.Tensor, ...]] = field(init=False, repr=False, default_factory=dict)

    def __post_init__(self) -> None:
        try:
            object.__setattr__(self, "mode", NormMode(self.mode))
            object.__setattr__(self, "eps_rule", EpsRule(self.eps_rule))
        except ValueError as e:
            raise StatsError(f"feature {self.key!r}: {e}") from None
        if not (np.isfinite(self.eps) and self.eps > 0):
            raise StatsError(f"feature {self.key!r}: eps must be a positive finite number, got {self.eps!r}")
        try:
            stats = {name: np.asarray(v, dtype=np.float32) for name, v in self.stats.items()}
        except (TypeError, ValueError) as e:
            raise StatsError(f"feature {self.key!r}: stats are not numeric arrays: {e}") from None
        object.__setattr__(self, "stats", stats)
        missing = [s for s in REQUIRED_STATS[self.mode] if s not in stats]
        if missing:
            raise StatsError(
                f"feature {self.key!r} uses {self.mode.value} which needs stats {missing}; found {sorted(stats)}"
            )
        if self.mode is not NormMode.IDENTITY:
            object.__setattr__(self, "_coeffs", self._compute_coeffs(stats))

    def _compute_coeffs(self, stats: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Return (shift, forward divisor, inverse multiplier) as float32 arrays."""
        a_name, b_name = REQUIRED_STATS[self.mode]
        a, b = stats[a_name], stats[b_name]
        if a.shape != b.shape or a.ndim == 0:
            raise StatsError(f"feature {self.key!r}: {a_name} {a.shape} and {b_name} {b.shape} must match")
        for name, v in ((a_name, a), (b_name, b)):
            if not np.all(np.isfinite(v)):
                raise StatsError(f"feature {self.key!r}: stat {name!r} has non-finite values: {v}")
        eps = np.float32(self.eps)
        lerobot = self.eps_rule is EpsRule.LEROBOT
        if self.mode is NormMode.MEAN_STD:
            if np.any(b < 0):
                raise StatsError(f"feature {self.key!r}: std has negative values: {b}")
            return a, b + eps, (b if lerobot else b + eps)
        if np.any(b < a):
            raise StatsError(f"feature {self.key!r}: {b_name} < {a_name} somewhere: {a_name}={a}, {b_name}={b}")
        span = b - a
        span = np.where(span == 0, eps, span).astype(np.float32) if lerobot else span + eps
        return a, span, span

    @property
    def dim(self) -> int | None:
        """Length of the (1-D) stats, or None for IDENTITY / higher-rank stats."""
        if self._coeffs is None or self._coeffs[0].ndim != 1:
            return None
        return int(self._coeffs[0].shape[0])

    def normalize(self, x: Array) -> Array:
        """Map raw values to the model's normalized space."""
        return self._apply(x, inverse=False)

    def unnormalize(self, x: Array) -> Array:
        """Map normalized values back to raw values."""
        return self._apply(x, inverse=True)

    def _apply(self, x: Array, inverse: bool) -> Array:
        if self._coeffs is None:
            return x
        if isinstance(x, torch.Tensor):
            x = x if x.is_floating_point() else x.float()
            shift, fwd, inv = self._torch_coeffs(x)
            concat = torch.cat
        else:
            x = np.asarray(x)
            x = x if np.issubdtype(x.dtype, np.floating) else x.astype(np.float32)
            shift, fwd, inv = (c.astype(x.dtype, copy=False) for c in self._coeffs)
            concat = np.concatenate
        dim = self.dim
        if dim is None:
            return self._formula(x, shift, fwd, inv, inverse)
        if x.ndim == 0 or x.shape[-1] < dim:
            raise StatsError(
                f"feature {self.key!r}: input shape {tuple(x.shape)} has fewer than {dim} entries "
                "in its last axis (the stats length)"
            )
        if x.shape[-1] == dim:
            return self._formula(x, shift, fwd, inv, inverse)
        head = self._formula(x[..., :dim], shift, fwd, inv, inverse)
        return concat([head, x[..., dim:]], -1)

    def _formula(self, x: Array, shift: Array, fwd: Array, inv: Array, inverse: bool) -> Array:
        if self.mode is NormMode.MEAN_STD:
            return x * inv + shift if inverse else (x - shift) / fwd
        return (x + 1) / 2 * inv + shift if inverse else (x - shift) / fwd * 2 - 1

    def _torch_coeffs(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        cache_key = (x.device, x.dtype)
        if cache_key not in self._torch_cache:
            assert self._coeffs is not None
            self._torch_cache[cache_key] = tuple(
                torch.from_numpy(c).to(device=x.device, dtype=x.dtype) for c in self._coeffs
            )
        return self._torch_cache[cache_key]


class Normalizer:
    """A set of FeatureNorm by key; ``normalize(key, x)`` / ``unnormalize(key, x)`` for numpy or torch."""

    def __init__(self, features: Iterable[FeatureNorm]) -> None:
        self._features: dict[str, FeatureNorm] = {}
        for feat in features:
            if not isinstance(feat, FeatureNorm):
                raise StatsError(f"expected FeatureNorm, got {type(feat).__name__}: {feat!r}")
            if feat.key in self._features:
                raise StatsError(f"feature {feat.key!r} given twice")
            self._features[feat.key] = feat

    @property
    def keys(self) -> list[str]:
        """Feature keys, in insertion order."""
        return list(self._features)

    def __contains__(self, key: object) -> bool:
        return key in self._features

    def __repr__(self) -> str:
        modes = {k: f.mode.value for k, f in self._features.items()}
        return f"Normalizer({modes})"

    def feature(self, key: str) -> FeatureNorm:
        """The FeatureNorm for ``key``; StatsError naming the known keys if absent."""
        try:
            return self._features[key]
        except KeyError:
            raise StatsError(f"no normalization stats for {key!r}; known keys: {self.keys}") from None

    def normalize(self, key: str, x: Array) -> Array:
        return self.feature(key).normalize(x)

    def unnormalize(self, key: str, x: Array) -> Array:
        return self.feature(key).unnormalize(x)

    def normalize_dict(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """Normalize every entry whose key this normalizer knows; others are copied through."""
        return {k: (self.normalize(k, v) if k in self._features else v) for k, v in values.items()}
