"""Engine-independent Euler flow sampler with per-token time, prefix clamp, streaming, RTC.

Convention (docs/METHODS.md "Flow sampling"): t = 1 noise, t = 0 data, v ≈ eps - a. Step k moves every token
from tau_k to tau_{k+1}: x <- x + (tau_{k+1} - tau_k) * v(x, tau_k), always in fp32. With the
constant schedule and no prefix this is exactly openpi's x <- x - v(x, t) / N.

Usage:
    run = FlowSampler(SamplerConfig(schedule="horizon-aware")).start(velocity_fn, noise)
    for chunk in run:          # FinalActions, contiguous from index prefix_len
        send(chunk)
    result = run.result        # SampleResult
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Generator
from dataclasses import dataclass

import torch
from torch import Tensor

from vlash.generator_run import GeneratorRun
from vlash.sampling.guidance import GuidanceConfig, guided_velocity
from vlash.sampling.plan import SamplingPlan, make_plan
from vlash.sampling.results import NOT_FINAL, FinalActions, SampleResult
from vlash.sampling.schedules import Schedule, build_tau_grid_f64
from vlash.sampling.velocity import VelocityFn, eval_velocity


@dataclass
class SamplerConfig:
    """Settings of `FlowSampler`."""

    num_steps: int = 10  # N Euler steps from t = 1 to t = 0 (pi0.5: 10), >= 1
    schedule: Schedule | str = Schedule.CONSTANT  # per-token time grid: "constant" or "horizon-aware"
    alpha: float = 0.6  # horizon-aware exponent of the hit times, > 0 (ignored by "constant")
    u0: float | None = None  # horizon-aware hit time of the first new action in [0, 1); None: (N-1)/N
    # Per-token times <= final_tau are snapped to 0 in the grid, so the step that crosses it
    # integrates straight to tau = 0. An action is final once its tau is exactly 0; it never
    # changes afterwards. In [0, 1); the constant schedule is unaffected while 1/N > final_tau.
    final_tau: float = 0.01
    early_stop_final: int | None = None  # stop once indices [0, k) (prefix included) are final; None: all
    guidance: GuidanceConfig | None = None  # guided RTC (constant schedule only); None: off

    def __post_init__(self) -> None:
        if not isinstance(self.num_steps, int) or self.num_steps < 1:
            raise ValueError(f"num_steps must be an int >= 1, got {self.num_steps!r}")
        try:
            self.schedule = Schedule(self.schedule)
        except ValueError:
            names = [s.value for s in Schedule]
            raise ValueError(f"schedule must be one of {names}, got {self.schedule!r}") from None
        if not (math.isfinite(self.alpha) and self.alpha > 0):
            raise ValueError(f"alpha must be a finite float > 0, got {self.alpha!r}")
        if self.u0 is not None and not 0.0 <= self.u0 < 1.0:
            raise ValueError(f"u0 must be None or in [0, 1), got {self.u0!r}")
        if not 0.0 <= self.final_tau < 1.0:
            raise ValueError(f"final_tau must be in [0, 1), got {self.final_tau!r}")
        k = self.early_stop_final
        if k is not None and (not isinstance(k, int) or k < 1):
            raise ValueError(f"early_stop_final must be None or an int >= 1, got {k!r}")
        if self.guidance is not None and self.schedule is not Schedule.CONSTANT:
            raise ValueError(
                f"guided RTC needs schedule='constant', got schedule={self.schedule.value!r}; "
                "use a committed prefix for horizon-aware sampling instead"
            )


class SamplingRun(GeneratorRun[FinalActions, SampleResult]):
    """An in-progress sampling run: iterate it for `FinalActions`, then read `result`."""


class FlowSampler:
    """Euler flow sampler, independent of the engine that evaluates the velocity."""

    def __init__(self, config: SamplerConfig | None = None) -> None:
        self.config = config if config is not None else SamplerConfig()

    def tau_grid(self, horizon: int, prefix_len: int = 0) -> Tensor:
        """The fp32 [N + 1, H] per-token time grid this sampler integrates along (final_tau snapped)."""
        return self._grid_f64(horizon, prefix_len).float()

    def _grid_f64(self, horizon: int, prefix_len: int) -> Tensor:
        cfg = self.config
        grid = build_tau_grid_f64(cfg.schedule, cfg.num_steps, horizon, prefix_len, cfg.alpha, cfg.u0)
        return torch.where(grid <= cfg.final_tau, torch.zeros_like(grid), grid)

    def start(
        self,
        velocity_fn: VelocityFn,
        noise: Tensor,
        prefix: Tensor | None = None,
        guidance_target: Tensor | None = None,
        guidance_delay: int | None = None,
        synchronize: Callable[[], object] | None = None,
    ) -> SamplingRun:
        """Validate the inputs (ValueError) and return a lazy run; nothing is evaluated yet.

        velocity_fn(x fp32 [B, H, A], tau fp32 [B, H]) -> v [B, H, A]; noise: [B, H, A] (ignored
        at prefix positions); prefix: committed actions [B, d, A] with d < H, held at tau = 0 and
        copied into the output bit-exactly (as fp32). guidance_target: the previous chunk's
        leftover aligned to this chunk's indices, [B, H, A]; needs `config.guidance` and turns
        guided RTC on (None: unguided, e.g. the first chunk). guidance_delay: d of the RTC mask,
        defaults to the prefix length. synchronize: called before every clock read (e.g.
        torch.cuda.synchronize) so step timings cover the device work.
        """
        plan = make_plan(self._grid_f64, self.config.guidance, noise, prefix, guidance_target, guidance_delay)
        horizon = plan.x0.shape[1]
        stop_at = self.config.early_stop_final
        if stop_at is not None and stop_at > horizon:
            raise ValueError(f"early_stop_final must be <= horizon {horizon}, got {stop_at}")
        return SamplingRun(self._steps(plan, velocity_fn, synchronize))

    def iter_sample(
        self,
        velocity_fn: VelocityFn,
        noise: Tensor,
        prefix: Tensor | None = None,
        guidance_target: Tensor | None = None,
        guidance_delay: int | None = None,
        synchronize: Callable[[], object] | None = None,
    ) -> SamplingRun:
        """Alias of `start`: an iterator of `FinalActions` with the result on `.result`."""
        return self.start(velocity_fn, noise, prefix, guidance_target, guidance_delay, synchronize)

    def sample(
        self,
        velocity_fn: VelocityFn,
        noise: Tensor,
        prefix: Tensor | None = None,
        guidance_target: Tensor | None = None,
        guidance_delay: int | None = None,
        synchronize: Callable[[], object] | None = None,
    ) -> SampleResult:
        """Run all steps (or until the early stop) and return the result; see `start`."""
        return self.start(velocity_fn, noise, prefix, guidance_target, guidance_delay, synchronize).drain()

    def _steps(
        self, plan: SamplingPlan, velocity_fn: VelocityFn, synchronize: Callable[[], object] | None
    ) -> Generator[FinalActions, None, SampleResult]:
        sync = synchronize if synchronize is not None else _no_sync
        x = plan.x0
        sync()
        t_start = time.perf_counter()
        step_times: list[float] = []
        emitted = plan.prefix_len
        for k in range(self.config.num_steps):
            t0 = time.perf_counter()
            x = self._euler_step(plan, velocity_fn, x, k)
            sync()
            now = time.perf_counter()
            step_times.append(now - t0)
            frontier = plan.frontier[k]
            if frontier > emitted:
                yield FinalActions(emitted, frontier, x[:, emitted:frontier].clone(), k, now - t_start)
                emitted = frontier
            stop_at = self.config.early_stop_final
            if stop_at is not None and frontier >= stop_at:
                break
        steps_run = len(step_times)
        final_at = plan.final_at_step.clone()
        final_at[final_at >= steps_run] = NOT_FINAL
        return SampleResult(x, steps_run, step_times, final_at, plan.prefix_len)

    @staticmethod
    def _euler_step(plan: SamplingPlan, velocity_fn: VelocityFn, x: Tensor, k: int) -> Tensor:
        tau = plan.taus[k]
        if plan.guidance_target is not None:
            assert plan.guidance_mask is not None
            w = plan.guidance_weights[k]
            v = guided_velocity(velocity_fn, x, tau, plan.guidance_target, plan.guidance_mask, w)
        else:
            with torch.no_grad():
                v = eval_velocity(velocity_fn, x, tau)
        x = x + plan.dtaus[k][None, :, None] * v
        if plan.prefix is not None:
            x[:, : plan.prefix_len] = plan.prefix
        return x


def _no_sync() -> None:
    return None
