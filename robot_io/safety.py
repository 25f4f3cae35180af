"""Safety between the executor and the robot: clamp every command, a fallback for missing actions, a stall watchdog.

Everything here is in ACTION space (float32 [A]); the state may have other entries (see robot_io.robots.base).
`Safety.filter(action, measured)` returns the action to send, or None, and never raises in the loop:
- a missing action (None: the executor has nothing valid before the tick's deadline) or a non-finite or
  misshaped one is replaced by the fallback, counted and logged (first occurrence, then every `log_every`);
- the action is clamped to the joint limits, and its change from the last command to `max_step` per tick.

`measured` is the hold action read from the current observation: the robot's `hold_action(observation)` if it
has one, else the measured positions of the action's joints (the state entries named like them, or the whole
state when the robot names nothing and state_dim == action_dim), else None (unknown). The fallback:
- "hold": the last command sent; before any command, `measured`;
- "stop": `measured` (the arm stops where it is); when unknown, the last command;
- relative actions ("delta" increments, "velocity" rates): zero, whatever the mode;
- none of these known (nothing sent yet and no measured positions): nothing is sent (None) and the robot's own
  controller keeps doing what it did before the run (position servos hold their goal). Counted as a fallback.
The first command's `max_step` is measured from `measured`; the runner refuses `max_step` without it.

Clamping is counted per entry and per limit. When more than `warn_share` of the actions (after `warn_after`) were
clamped, the policy's actions do not fit the robot's limits (units, normalization, limits too tight, a max step
below the policy's speed): one WARNING line, once per run, names the entries and limits that clamped most.

StallWatchdog covers a stalled loop thread (a tick blocked in a driver, the interpreter descheduled): a small
thread that notices no completed tick within `timeout_s` and calls `hold()` (the runner sends the fallback under
the lock that guards every send), again every `timeout_s` while the stall lasts. The runner starts it only for
robots that do not hold position by themselves (`holds_position` False: streaming or velocity controllers);
position servos (LeRobot arms) and the stepped simulator stay put without new commands.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, get_args

import numpy as np

from robot_io.control.clock import Clock, MonotonicClock

log = logging.getLogger(__name__)
Fallback = Literal["hold", "stop"]  # what the watchdog commands when no valid action is due
FALLBACKS: tuple[str, ...] = get_args(Fallback)
RELATIVE_HOLD = {"delta": "increments", "velocity": "velocity"}  # what the hold of a relative action commands


@dataclass(frozen=True)
class SafetyConfig:
    """Limits applied to every command."""

    joint_low: tuple[float, ...] | None = None  # per-entry lower limit of the action (robot units); None: unlimited
    joint_high: tuple[float, ...] | None = None  # per-entry upper limit of the action
    max_step: float | None = None  # largest change of any joint per tick (robot units); None: unlimited
    on_missing: Fallback = "hold"  # "hold" the last command or "stop" at the measured position
    action_kind: str = "absolute"  # "absolute" targets, "delta" increments or "velocity" rates
    log_every: int = 100  # log every n-th fallback after the first
    warn_share: float = 0.05  # warn once when more than this share of the actions were clamped
    warn_after: int = 20  # ... counted over at least this many actions
    action_names: tuple[str, ...] | None = None  # the action's entries by name, for that warning; None: by index

    def __post_init__(self) -> None:
        if self.on_missing not in FALLBACKS:
            raise ValueError(f"SafetyConfig.on_missing must be one of {FALLBACKS}, got {self.on_missing!r}")
        if self.action_kind not in ("absolute", "delta", "velocity"):
            raise ValueError(
                f"SafetyConfig.action_kind must be 'absolute', 'delta' or 'velocity', got {self.action_kind!r}"
            )
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
        if not 0 <= self.warn_share <= 1 or self.warn_after < 1:
            raise ValueError(f"SafetyConfig: warn_share must be in [0, 1] and warn_after >= 1, got "
                             f"{self.warn_share} and {self.warn_after}")  # fmt: skip


class Safety:
    """Clamps commands and substitutes the fallback for missing ones; counts what it did. `action_dim`: the
    robot's action size (None: taken from `measured`)."""

    def __init__(self, config: SafetyConfig | None = None, action_dim: int | None = None) -> None:
        self.config = config or SafetyConfig()
        c = self.config
        self.action_dim = action_dim
        self._low = None if c.joint_low is None else np.asarray(c.joint_low, np.float32)
        self._high = None if c.joint_high is None else np.asarray(c.joint_high, np.float32)
        self.last_command: np.ndarray | None = None
        self.fallbacks = 0  # ticks without a valid action (watchdog holds/stops)
        self.unexpected = 0  # of which not expected by the executor (missed deadlines, bad actions)
        self.invalid = 0  # of which the action was present but not finite / wrong size
        self.unsent = 0  # of which nothing could be sent (no command yet, no measured positions)
        self.clamped = 0  # ticks whose action was changed by a limit
        self.actions = 0  # ticks with a valid action (the ones that could be clamped)
        self.clamp_counts: dict[tuple[int, str], int] = {}  # (entry, "range" or "max_step") -> actions it clamped
        self.clamp_warned = False  # the warning of too many clamps was logged (once per run: reset() keeps it)

    def reset(self) -> None:
        """Forget the last command (a new episode: the first command is measured from the observation)."""
        self.last_command = None

    def filter(
        self, action: np.ndarray | None, measured: np.ndarray | None, expected: bool = False
    ) -> tuple[np.ndarray | None, bool]:
        """(the action to send or None to send nothing, whether it is the fallback). `measured`: the hold action
        from the current observation, or None (module doc). `expected`: a missing action is by design (waiting
        for a first or sync chunk): counted, not logged as a warning."""
        measured = None if measured is None else np.asarray(measured, np.float32)
        if action is not None:
            action = np.asarray(action, np.float32)
            dim = self.action_dim if self.action_dim is not None else None if measured is None else len(measured)
            if action.ndim != 1 or (dim is not None and len(action) != dim) or not np.isfinite(action).all():
                self.invalid += 1
                action = None
        if action is None:
            self.fallbacks += 1
            self.unexpected += 0 if expected else 1
            if not expected and (self.unexpected == 1 or self.unexpected % self.config.log_every == 0):
                log.warning(
                    "no valid action before the deadline: %s (%d so far)", self.config.on_missing, self.unexpected
                )
            action, held = self.hold_action(measured), True
            if action is None:
                self.unsent += 1
                return None, True
        else:
            held = False
        sent = self._clamp(action, measured, count=not held)
        if not held:
            self.actions += 1
            self.clamped += 0 if np.array_equal(sent, action) else 1
            self._check_clamp_share()
        if self.config.action_kind == "absolute":
            self.last_command = sent
        return sent, held

    def hold_action(self, measured: np.ndarray | None) -> np.ndarray | None:
        """The fallback command (module doc), not counted; None: send nothing."""
        return self.hold_choice(measured)[0]

    def hold_choice(self, measured: np.ndarray | None) -> tuple[np.ndarray | None, str]:
        """(the fallback command or None, what it leaves the robot doing, in words: "holds the last command sent")."""
        c = self.config
        if c.action_kind != "absolute":
            dim = self.action_dim if self.action_dim is not None else None if measured is None else len(measured)
            if dim is not None:
                return np.zeros(dim, np.float32), f"stands still (commanded zero {RELATIVE_HOLD[c.action_kind]})"
        else:
            last = (self.last_command, "holds the last command sent")
            here = (measured, "holds its measured position")
            for choice, what in (last, here) if c.on_missing == "hold" else (here, last):
                if choice is not None:
                    return np.array(choice, np.float32), what
        return None, "was sent nothing: its own controller keeps the goal it had"

    def _clamp(self, action: np.ndarray, measured: np.ndarray | None, count: bool = False) -> np.ndarray:
        """The action within the limits; `count`: add the entries each limit changed to clamp_counts."""
        out = action.copy()
        step = self.config.max_step
        ref = self.last_command if self.last_command is not None else measured
        if self.config.action_kind != "absolute":
            ref = np.zeros_like(out)  # a relative action's step is its own size
        if step is not None and ref is not None:
            out = self._count(out, np.clip(out, ref - step, ref + step), "max_step", count)
        if self._low is not None:
            out = self._count(out, np.clip(out, self._low, self._high), "range", count)
        return out.astype(np.float32)

    def _count(self, before: np.ndarray, after: np.ndarray, limit: str, count: bool) -> np.ndarray:
        if count:
            for entry in np.flatnonzero(before != after).tolist():
                self.clamp_counts[entry, limit] = self.clamp_counts.get((entry, limit), 0) + 1
        return after

    def _check_clamp_share(self) -> None:
        """The once-per-run warning (module doc) when the share of clamped actions is above warn_share."""
        c = self.config
        if self.clamp_warned or self.actions < c.warn_after or self.clamped <= c.warn_share * self.actions:
            return
        self.clamp_warned = True
        log.warning("safety clamped %d of %d actions (%.0f%%, more than %.0f%%): %s. The policy's actions do not "
                    "fit the robot's limits: check its action units and normalization, the limits and max_step "
                    "(said once per run)", self.clamped, self.actions, 100 * self.clamped / self.actions,
                    100 * c.warn_share, self.clamp_report())  # fmt: skip

    def clamp_report(self, most: int = 3) -> str:
        """The `most` entries and limits that clamped most, in words: "joint1.pos to [-2.8, 2.8] in 250 actions"."""
        c, names = self.config, self.config.action_names
        parts = []
        for (entry, limit), n in sorted(self.clamp_counts.items(), key=lambda kv: -kv[1])[:most]:
            name = names[entry] if names is not None and entry < len(names) else f"entry {entry}"
            bound = f"by max_step {c.max_step:g}" if limit == "max_step" else (
                f"to [{c.joint_low[entry]:g}, {c.joint_high[entry]:g}]")  # fmt: skip
            parts.append(f"{name} {bound} in {n} actions")
        return "; ".join(parts) or "no entry"


class StallWatchdog:
    """Calls `hold()` from its own thread when no tick completed (`tick_done()`) for more than `timeout_s` of
    `clock` time, then again every `timeout_s` while the stall lasts. Armed by the first `tick_done()`.
    `poll_s`: how often the thread looks (real time; default timeout_s / 4)."""

    def __init__(
        self, hold: Callable[[], None], timeout_s: float, clock: Clock | None = None, poll_s: float | None = None
    ) -> None:
        if not (math.isfinite(timeout_s) and timeout_s > 0):
            raise ValueError(f"StallWatchdog.timeout_s must be > 0, got {timeout_s}")
        self.hold, self.clock = hold, clock or MonotonicClock()
        self.timeout_ns = round(timeout_s * 1e9)
        self.poll_s = timeout_s / 4 if poll_s is None else poll_s
        self.stalls = 0  # stalls noticed
        self.holds = 0  # hold() calls made
        self.failures = 0  # hold() calls that raised (logged; the watchdog keeps watching)
        self._last_done: int | None = None
        self._last_hold = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self._watch, name="stall-watchdog", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5.0)
            self._thread = None

    def tick_done(self) -> None:
        """Called by the loop thread at the end of each tick."""
        self._last_done = self.clock.now_ns()

    def _watch(self) -> None:
        stalled_since: int | None = None  # the tick completion the current stall follows
        while not self._stop.wait(self.poll_s):
            last, now = self._last_done, self.clock.now_ns()
            if last is None or now - last <= self.timeout_ns:
                continue
            if stalled_since != last:
                stalled_since = last
                self.stalls += 1
                log.warning("control loop stalled: no tick for %.0f ms; commanding the hold", (now - last) / 1e6)
            elif now - self._last_hold < self.timeout_ns:
                continue
            self._last_hold = now
            self.holds += 1
            try:
                self.hold()
            except Exception:  # the watchdog must outlive a failing driver call; it is logged and counted
                self.failures += 1
                log.exception("stall watchdog: the hold command failed")
