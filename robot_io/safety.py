"""Safety between the executor and the robot: clamp every command, and a watchdog for missing actions.

`Safety.filter(action, state)` always returns an action to send, never raises in the loop:
- a missing action (None: the executor has nothing valid before the tick's deadline) or a non-finite one
  is replaced by the fallback — "hold" repeats the last commanded position, "stop" commands the measured
  position (the arm stops where it is) — counted and logged (first occurrence, then every `log_every`);
- the action is clamped to the joint limits, and its change from the last command to `max_step` per tick.
For "delta" actions (increments) the fallback is zero and only `max_step` applies (to the increment).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass

import numpy as np

log = logging.getLogger(__name__)
FALLBACKS = ("hold", "stop")


@dataclass(frozen=True)
class SafetyConfig:
    """Limits applied to every command."""

    joint_low: tuple[float, ...] | None = None  # per-joint lower limit (robot units); None: unlimited
    joint_high: tuple[float, ...] | None = None  # per-joint upper limit
    max_step: float | None = None  # largest change of any joint per tick (robot units); None: unlimited
    on_missing: str = "hold"  # "hold" the last command or "stop" at the measured position
    action_kind: str = "absolute"  # "absolute" targets or "delta" increments
    log_every: int = 100  # log every n-th fallback after the first

    def __post_init__(self) -> None:
        if self.on_missing not in FALLBACKS:
            raise ValueError(f"SafetyConfig.on_missing must be one of {FALLBACKS}, got {self.on_missing!r}")
        if self.action_kind not in ("absolute", "delta"):
            raise ValueError(f"SafetyConfig.action_kind must be 'absolute' or 'delta', got {self.action_kind!r}")
        if (self.joint_low is None) != (self.joint_high is None):
            raise ValueError("SafetyConfig: give both joint_low and joint_high, or neither")
        if self.joint_low is not None and (
            len(self.joint_low) != len(self.joint_high)
            or any(not lo <= hi for lo, hi in zip(self.joint_low, self.joint_high, strict=True))
        ):
            raise ValueError(
                f"SafetyConfig: joint limits must pair low <= high, got {self.joint_low} {self.joint_high}"
            )
        if self.max_step is not None and not (math.isfinite(self.max_step) and self.max_step > 0):
            raise ValueError(f"SafetyConfig.max_step must be > 0 or None, got {self.max_step}")
        if self.log_every < 1:
            raise ValueError(f"SafetyConfig.log_every must be >= 1, got {self.log_every}")


class Safety:
    """Clamps commands and substitutes the fallback for missing ones; counts what it did."""

    def __init__(self, config: SafetyConfig | None = None) -> None:
        self.config = config or SafetyConfig()
        c = self.config
        self._low = None if c.joint_low is None else np.asarray(c.joint_low, np.float32)
        self._high = None if c.joint_high is None else np.asarray(c.joint_high, np.float32)
        self.last_command: np.ndarray | None = None
        self.fallbacks = 0  # ticks without a valid action (watchdog holds/stops)
        self.unexpected = 0  # of which not expected by the executor (missed deadlines, bad actions)
        self.invalid = 0  # of which the action was present but not finite / wrong size
        self.clamped = 0  # ticks whose action was changed by a limit

    def reset(self) -> None:
        """Forget the last command (a new episode: the first command is measured from the state)."""
        self.last_command = None

    def filter(self, action: np.ndarray | None, state: np.ndarray, expected: bool = False) -> tuple[np.ndarray, bool]:
        """(the action to send, whether it is the watchdog fallback). `expected`: a missing action is by design
        (waiting for a first or sync chunk): counted, not logged as a warning."""
        state = np.asarray(state, np.float32)
        if action is not None:
            action = np.asarray(action, np.float32)
            if action.shape != state.shape or not np.isfinite(action).all():
                self.invalid += 1
                action = None
        if action is None:
            self.fallbacks += 1
            self.unexpected += 0 if expected else 1
            if not expected and (self.unexpected == 1 or self.unexpected % self.config.log_every == 0):
                log.warning(
                    "no valid action before the deadline: %s (%d so far)", self.config.on_missing, self.unexpected
                )
            action, held = self._fallback(state), True
        else:
            held = False
        sent = self._clamp(action, state)
        if not held and not np.array_equal(sent, action):
            self.clamped += 1
        if self.config.action_kind == "absolute":
            self.last_command = sent
        return sent, held

    def _fallback(self, state: np.ndarray) -> np.ndarray:
        if self.config.action_kind == "delta":
            return np.zeros_like(state)
        if self.config.on_missing == "hold" and self.last_command is not None:
            return self.last_command.copy()
        return state.copy()

    def _clamp(self, action: np.ndarray, state: np.ndarray) -> np.ndarray:
        out = action.copy()
        step = self.config.max_step
        if self.config.action_kind == "delta":
            return out if step is None else np.clip(out, -step, step)
        if step is not None:
            ref = self.last_command if self.last_command is not None else state
            out = np.clip(out, ref - step, ref + step)
        if self._low is not None:
            out = np.clip(out, self._low, self._high)
        return out.astype(np.float32)
