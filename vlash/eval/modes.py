"""Execution modes under a discrete inference delay (docs/METHODS.md "Execution modes").

Time is counted in control steps. A request made at step k (with the observation of step k) is
answered d steps later. Modes differ in when they request, what state/prefix they send, and which
chunk index runs first:

    sync      request, hold still for d steps, run s actions from index 0, repeat
    naive     async: request s - d steps before the switch with the observed (stale) state,
              run the new chunk from index d
    vlash     async: same timing, but send the future state (the last action that will have been
              commanded before the switch) and run the new chunk from index 0
    rtc       async like naive, the new chunk inpainted toward the previous chunk's leftover
    prefix    async like naive, the d actions executed during the delay sent as a committed prefix
    faster    prefix + horizon-aware sampling, actions streamed: the switch waits only until the first
              new actions are final (one denoise step's share of the delay), so requests start later;
              the sampler stops once the actions run before the next switch are final, so the engine
              is free sooner and s may be shorter than d
    ensemble  a request every `ensemble_every` steps, ACT temporal ensembling of all live chunks

Action quantization q executes every q-th chunk action (index advances q per control step).
One inference engine serves the robot: a request occupies it for `busy_steps` control steps (d, or
faster's early-stopped share of d). ExecutionConfig rejects s < busy_steps, so with a request every s
steps the engine is always free when the next one is made (ensemble excepted: it models overlapping
requests).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from vlash.errors import ConfigError
from vlash.sampling import horizon_aware_tau_grid

MODES = ("sync", "naive", "vlash", "rtc", "prefix", "faster", "ensemble")


@dataclass(frozen=True)
class ExecutionConfig:
    mode: str  # one of MODES
    delay: int  # d: inference latency in control steps
    execution_horizon: int = 10  # s: control steps of a chunk that run before the next takes over
    quantization: int = 1  # q: execute every q-th action
    prefill_fraction: float = 0.15  # share of the delay spent in prefill (faster); pi05-tiny CPU: 9.3/(9.3+51)
    num_steps: int = 10  # denoise steps N (faster's streaming model)
    ensemble_every: int = 2  # ensemble: control steps between requests
    ensemble_decay: float = 0.01  # ensemble: ACT's m in w_i = exp(-m * i), i = 0 the oldest prediction

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ConfigError(f"mode must be one of {MODES}, got {self.mode!r}")
        if self.delay < 0 or self.execution_horizon < 1 or self.quantization < 1:
            raise ConfigError(
                f"need delay >= 0, execution_horizon >= 1, quantization >= 1; got d={self.delay}, "
                f"s={self.execution_horizon}, q={self.quantization}"
            )
        if not 0.0 <= self.prefill_fraction < 1.0:
            raise ConfigError(f"prefill_fraction must be in [0, 1), got {self.prefill_fraction}")
        if self.num_steps < 1:
            raise ConfigError(f"num_steps must be >= 1, got {self.num_steps}")
        if self.mode == "faster" and self.busy_steps > self.execution_horizon:
            raise ConfigError(
                f"faster: the engine is busy {self.busy_steps} steps per request (delay {self.delay}, early stop "
                f"after the first {self.execution_horizon} new actions) > execution horizon {self.execution_horizon}"
            )
        if self.mode not in ("sync", "ensemble", "faster") and self.delay > self.execution_horizon:
            raise ConfigError(
                f"{self.mode}: delay {self.delay} > execution horizon {self.execution_horizon} "
                "(the next chunk would arrive after the current one ran out)"
            )
        if self.ensemble_every < 1:
            raise ConfigError(f"ensemble_every must be >= 1, got {self.ensemble_every}")

    def check_horizon(self, horizon: int) -> None:
        need = (self.execution_horizon + self.delay) * self.quantization
        if self.mode != "ensemble" and need > horizon:
            raise ConfigError(f"(s + d) * q = {need} chunk indices needed, the policy's chunk has {horizon}")

    @cached_property  # the runner asks every control step; faster's search builds tau grids
    def switch_delay(self) -> int:
        """Steps from request to switch: d, or for faster the (shorter) wait for the first final actions."""
        return faster_switch_delay(self) if self.mode == "faster" else self.delay

    @cached_property
    def busy_steps(self) -> int:
        """Control steps one request occupies the engine: d, or for faster the early-stopped share of d."""
        return faster_busy_steps(self) if self.mode == "faster" else self.delay


@dataclass
class RunningChunk:
    """A chunk being executed: robot step `start_step` runs index `first_index`, then q indices per step."""

    actions: np.ndarray  # [H, J]
    start_step: int
    first_index: int
    stride: int
    request_step: int = -1  # the control step whose observation the chunk was planned from

    def index_at(self, step: int) -> int:
        return self.first_index + (step - self.start_step) * self.stride

    def action_at(self, step: int) -> np.ndarray:
        return self.actions[min(self.index_at(step), len(self.actions) - 1)]

    def window(self, step: int, length: int) -> np.ndarray:
        """Chunk indices [index_at(step), + length), the last action repeated past the end."""
        idx = np.minimum(np.arange(length) + self.index_at(step), len(self.actions) - 1)
        return self.actions[idx]


def final_index_steps(num_steps: int, horizon: int, prefix_len: int) -> np.ndarray:
    """[H]: the horizon-aware sampler step after which each index is final (prefix: -1)."""
    grid = horizon_aware_tau_grid(num_steps, horizon, prefix_len=prefix_len).numpy()  # [N + 1, H]
    final = (grid[1:] == 0).argmax(axis=0)
    final[:prefix_len] = -1
    return final


def faster_switch_delay(cfg: ExecutionConfig, horizon: int = 50) -> int:
    """Smallest committed prefix c (control steps) such that every index the robot runs after the switch
    is final before the robot reaches it, with action i final at d * (p + (1 - p) * (k_i + 1) / N)."""
    d, q = cfg.delay, cfg.quantization
    if d == 0:
        return 0
    for c in range(1, d + 1):
        steps = final_index_steps(cfg.num_steps, horizon, c * q)
        idx = np.arange(c * q, min((c + cfg.execution_horizon) * q, horizon))
        if np.all(_final_time(cfg, steps[idx]) <= idx / q + 1e-9):
            return c
    return d


def _final_time(cfg: ExecutionConfig, final_steps: np.ndarray) -> np.ndarray:
    """Control steps from the request until indices with these sampler steps are final (prefill first)."""
    p, n = cfg.prefill_fraction, cfg.num_steps
    return cfg.delay * (p + (1 - p) * (final_steps + 1) / n)


def faster_busy_steps(cfg: ExecutionConfig, horizon: int = 50) -> int:
    """Control steps the engine works on one faster request: sampling stops early once every index the
    robot runs before the next switch, [c q, (c + s) q), is final (docs/METHODS.md "faster"); at most d."""
    c, q = faster_switch_delay(cfg, horizon), cfg.quantization
    if cfg.delay == 0:
        return 0
    steps = final_index_steps(cfg.num_steps, horizon, c * q)
    last = steps[c * q : min((c + cfg.execution_horizon) * q, horizon)].max()
    return min(cfg.delay, int(np.ceil(_final_time(cfg, last) - 1e-9)))


def ensemble_weights(count: int, decay: float) -> np.ndarray:
    """ACT temporal ensembling: w_i = exp(-m * i), i = 0 the oldest prediction, normalised."""
    w = np.exp(-decay * np.arange(count))
    return w / w.sum()


__all__ = [
    "MODES",
    "ExecutionConfig",
    "RunningChunk",
    "ensemble_weights",
    "faster_busy_steps",
    "faster_switch_delay",
    "final_index_steps",
]
