"""The demo figure: per mode (columns), each joint's commanded vs measured trajectory with chunk boundaries,
and each chunk's latency (request -> final chunk) and time to the first needed action."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np

from robot_io.runner import RunResult


def _step_time(result: RunResult, step: int) -> float:
    """Seconds since the start of control step `step` (its tick time when it ran, else step / rate)."""
    i = np.searchsorted(result.steps, step)
    if i < len(result.steps) and result.steps[i] == step:
        return float(result.time_s[i])
    return step / result.summary.rate_hz


def _joints(ax_column, result: RunResult) -> None:
    switches = [_step_time(result, r.switch_step) for r in result.records if r.switch_step is not None]
    held = result.held
    for j, ax in enumerate(ax_column):
        ax.plot(result.time_s, result.commands[:, j], lw=1.2, label="commanded")
        ax.plot(result.time_s, result.states[:, j], lw=1.0, ls="--", label="measured")
        for t in switches:
            ax.axvline(t, color="0.75", lw=0.5, zorder=0)
        if held.any():
            ax.plot(result.time_s[held], result.commands[held, j], "r.", ms=2, label="watchdog hold")
        ax.set_ylabel(f"joint {j} [rad]")


def _latency(ax, result: RunResult) -> None:
    records = [r for r in result.records if r.latency_ms is not None]
    t = [_step_time(result, r.request_step) for r in records]
    ax.plot(t, [r.latency_ms for r in records], "o", ms=3, label="final chunk")
    ready = [(tt, r.ready_ms) for tt, r in zip(t, records, strict=True) if r.ready_ms is not None]
    if ready:
        ax.plot(*zip(*ready, strict=True), "x", ms=4, label="first needed action")
    s = result.summary
    ax.axhline(s.delay_steps * 1e3 / s.rate_hz, color="k", lw=0.8, ls=":", label=f"d = {s.delay_steps} steps")
    ax.set_ylabel("latency [ms]")
    ax.set_xlabel("time [s]")


def plot_demo(results: Mapping[str, RunResult], path: str | Path, title: str = "") -> Path:
    """Write the figure to `path` (PNG); one column per mode."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    modes = list(results)
    joints = next(iter(results.values())).commands.shape[1]
    fig, axes = plt.subplots(
        joints + 1, len(modes), figsize=(5.5 * len(modes), 2.2 * (joints + 1)), sharex="col", sharey="row",
        squeeze=False,
    )  # fmt: skip
    for c, mode in enumerate(modes):
        result = results[mode]
        s = result.summary
        _joints(axes[:joints, c], result)
        _latency(axes[joints, c], result)
        axes[0, c].set_title(
            f"{mode}: {s.successes}/{s.episodes} episodes, {s.chunks} chunks, {s.missed_deadlines} missed",
            fontsize=10,
        )
    axes[0, 0].legend(fontsize=7, loc="upper right")
    axes[joints, 0].legend(fontsize=7, loc="upper right")
    if title:
        fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
