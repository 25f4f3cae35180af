"""Per-token time grids for flow sampling: constant and horizon-aware (docs/METHODS.md "Flow sampling").

Convention: t = 1 is pure noise, t = 0 is data. A grid has shape [N + 1, H]: row k holds the
per-token time tau of every chunk index at global time t_k = 1 - k / N. Step k integrates
from row k to row k + 1. Committed prefix positions (i < prefix_len) stay at tau = 0.
"""

from __future__ import annotations

import torch
from torch import Tensor

from vlash.sampling.schedule_names import Schedule

# Times this close to 0 are snapped to exactly 0, so that "final" (tau == 0) is exact even
# when (t_k - u_i) leaves a rounding residue (e.g. t_1 - u0 with u0 = (N - 1) / N).
ZERO_SNAP = 1e-6


def _check_common(num_steps: int, horizon: int, prefix_len: int) -> None:
    if not isinstance(num_steps, int) or num_steps < 1:
        raise ValueError(f"num_steps must be an int >= 1, got {num_steps!r}")
    if not isinstance(horizon, int) or horizon < 1:
        raise ValueError(f"horizon must be an int >= 1, got {horizon!r}")
    if not isinstance(prefix_len, int) or not 0 <= prefix_len < horizon:
        raise ValueError(f"prefix_len must be an int in [0, horizon={horizon}), got {prefix_len!r}")


def global_times(num_steps: int) -> Tensor:
    """Global times t_k = 1 - k / N for k = 0..N, float64 [N + 1] (t_0 = 1, t_N = 0 exactly)."""
    if not isinstance(num_steps, int) or num_steps < 1:
        raise ValueError(f"num_steps must be an int >= 1, got {num_steps!r}")
    k = torch.arange(num_steps + 1, dtype=torch.float64)
    return 1.0 - k / num_steps


def constant_tau_grid_f64(num_steps: int, horizon: int, prefix_len: int = 0) -> Tensor:
    """Float64 version of `constant_tau_grid` (the sampler derives its step sizes from it)."""
    _check_common(num_steps, horizon, prefix_len)
    grid = global_times(num_steps)[:, None].expand(num_steps + 1, horizon).clone()
    grid[:, :prefix_len] = 0.0
    return grid


def horizon_aware_tau(
    t: Tensor, horizon: int, prefix_len: Tensor | int = 0, alpha: float = 0.6, u0: float = 0.9
) -> Tensor:
    """Per-token times [..., H] at global times t [...] (docs/METHODS.md "Flow sampling"), prefix_len broadcast with t.

    u_i = u0 * (1 - j_i**alpha) is the global time at which index i starts moving; tau_i(t) =
    clip((t - u_i) / (1 - u_i), 0, 1); indices i < prefix_len are held at 0. Used by the sampler's grid
    (t = 1, (N-1)/N, ..., 0) and by training (one random t and d per sample).
    """
    if not alpha > 0:
        raise ValueError(f"alpha must be > 0, got {alpha!r}")
    if not 0.0 <= u0 < 1.0:
        raise ValueError(f"u0 must be in [0, 1), got {u0!r}")
    t = torch.as_tensor(t, dtype=torch.float64)
    d = torch.as_tensor(prefix_len, device=t.device).to(torch.float64)[..., None]
    i = torch.arange(horizon, dtype=torch.float64, device=t.device)
    j = (i - d).clamp(min=0.0) / (horizon - 1 - d).clamp(min=1.0)
    u = u0 * (1.0 - j**alpha)  # hit time of each index: u_d = u0, u_{H-1} = 0
    tau = ((t[..., None] - u) / (1.0 - u)).clamp(0.0, 1.0)
    tau = torch.where(tau < ZERO_SNAP, torch.zeros_like(tau), tau)
    return torch.where(i < d, torch.zeros_like(tau), tau)


def horizon_aware_tau_grid_f64(
    num_steps: int, horizon: int, prefix_len: int = 0, alpha: float = 0.6, u0: float | None = None
) -> Tensor:
    """Float64 version of `horizon_aware_tau_grid` (the sampler derives its step sizes from it)."""
    _check_common(num_steps, horizon, prefix_len)
    if u0 is None:
        u0 = (num_steps - 1) / num_steps
    return horizon_aware_tau(global_times(num_steps), horizon, prefix_len, alpha, u0)


def constant_tau_grid(num_steps: int, horizon: int, prefix_len: int = 0) -> Tensor:
    """Constant schedule: every new index follows t_k = 1 - k / N; fp32 [N + 1, H].

    Positions i < prefix_len (committed actions) are held at tau = 0.
    """
    return constant_tau_grid_f64(num_steps, horizon, prefix_len).float()


def horizon_aware_tau_grid(
    num_steps: int, horizon: int, prefix_len: int = 0, alpha: float = 0.6, u0: float | None = None
) -> Tensor:
    """Horizon-aware schedule (FASTER; docs/METHODS.md "Flow sampling"); fp32 [N + 1, H].

    Index i has hit time u_i = u0 * (1 - j_i ** alpha) with j_i = max(i - d, 0) / max(H - 1 - d, 1),
    and tau_i(t) = clip((t - u_i) / (1 - u_i), 0, 1). With the default u0 = (N - 1) / N the first
    new action (i = d) is exactly 0 after one step; the last index (i = H - 1, u = 0) equals the
    constant schedule (when H - 1 > d). Values below `ZERO_SNAP` are snapped to 0. Raises
    ValueError for num_steps < 1, horizon < 1, prefix_len outside [0, H), alpha <= 0 or u0
    outside [0, 1).
    """
    return horizon_aware_tau_grid_f64(num_steps, horizon, prefix_len, alpha, u0).float()


def build_tau_grid_f64(
    schedule: Schedule | str,
    num_steps: int,
    horizon: int,
    prefix_len: int = 0,
    alpha: float = 0.6,
    u0: float | None = None,
) -> Tensor:
    """Float64 [N + 1, H] grid for `schedule` ("constant" ignores alpha and u0)."""
    schedule = Schedule(schedule)
    if schedule is Schedule.CONSTANT:
        return constant_tau_grid_f64(num_steps, horizon, prefix_len)
    return horizon_aware_tau_grid_f64(num_steps, horizon, prefix_len, alpha, u0)


def build_tau_grid(
    schedule: Schedule | str,
    num_steps: int,
    horizon: int,
    prefix_len: int = 0,
    alpha: float = 0.6,
    u0: float | None = None,
) -> Tensor:
    """Fp32 [N + 1, H] grid for `schedule` ("constant" ignores alpha and u0)."""
    return build_tau_grid_f64(schedule, num_steps, horizon, prefix_len, alpha, u0).float()
