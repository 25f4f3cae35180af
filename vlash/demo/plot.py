"""The demo figure: one column per mode, titled with its mode and delay; each joint's commanded vs measured
trajectory with chunk boundaries, watchdog holds and episode resets (the lines break there: a new episode starts
elsewhere, it is not a jump of the arm); and each chunk's latency (request -> final chunk) and time to the first
needed action. One legend for the whole figure, below the axes, so it never covers data.

The PNG says it is vlash demo's (its Software text chunk, PLOT_SOFTWARE): `vlash demo` replaces a --plot file only
when it wrote it (`written_by_demo`), and says so; any other file there is the user's and is refused."""

from __future__ import annotations

import struct
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from robot_io.runner import RunResult
from vlash.atomic import atomic_write

PLOT_SOFTWARE = "vlash demo"  # the PNG's Software text chunk: what tells vlash demo's plots from anyone else's
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

RESET_STYLE = dict(color="C2", lw=0.9, ls="--", alpha=0.8, zorder=1)
BOUNDARY_STYLE = dict(color="0.75", lw=0.5, zorder=0)


def _step_time(result: RunResult, step: int) -> float:
    """Seconds since the start of control step `step` (its tick time when it ran, else step / rate)."""
    i = np.searchsorted(result.steps, step)
    if i < len(result.steps) and result.steps[i] == step:
        return float(result.time_s[i])
    return step / result.summary.rate_hz


def broken_at(values: np.ndarray, breaks: np.ndarray) -> np.ndarray:
    """`values` (float) with NaN inserted before each index in `breaks`: matplotlib draws no segment across it."""
    return np.insert(np.asarray(values, np.float64), breaks, np.nan, axis=0)


def column_title(mode: str, result: RunResult) -> str:
    """The mode and its delay (the online estimate d, in steps and ms, and the measured latency), then outcomes."""
    s = result.summary
    latency = "" if s.latency_p50_ms is None else f", latency p50 {s.latency_p50_ms:.0f} ms"
    return (f"{mode}: d = {s.delay_steps} steps ({s.delay_steps * 1e3 / s.rate_hz:.0f} ms){latency}\n"
            f"{s.successes}/{s.episodes} episodes, {s.chunks} chunks, {s.missed_deadlines} missed")  # fmt: skip


def _joints(ax_column, result: RunResult) -> None:
    switches = [_step_time(result, r.switch_step) for r in result.records if r.switch_step is not None]
    resets = np.flatnonzero(result.resets)
    time_s = broken_at(result.time_s, resets)
    held = result.held
    for j, ax in enumerate(ax_column):
        ax.plot(time_s, broken_at(result.commands[:, j], resets), lw=1.2, label="commanded")
        ax.plot(time_s, broken_at(result.states[:, j], resets), lw=1.0, ls="--", label="measured")
        if switches:
            ax.vlines(switches, 0, 1, transform=ax.get_xaxis_transform(), label="chunk boundary", **BOUNDARY_STYLE)
        if len(resets):
            ax.vlines(result.time_s[resets], 0, 1, transform=ax.get_xaxis_transform(), label="episode reset",
                      **RESET_STYLE)  # fmt: skip
        if held.any():
            ax.plot(result.time_s[held], result.commands[held, j], "r.", ms=2, label="watchdog hold")
        ax.set_ylabel(f"joint {j} [rad]")


def _latency(ax, result: RunResult) -> None:
    records = [r for r in result.records if r.latency_ms is not None]
    t = [_step_time(result, r.request_step) for r in records]
    ax.plot(t, [r.latency_ms for r in records], "o", ms=3, color="C0", label="chunk latency (final)")
    ready = [(tt, r.ready_ms) for tt, r in zip(t, records, strict=True) if r.ready_ms is not None]
    if ready:
        ax.plot(*zip(*ready, strict=True), "x", ms=4, color="C1", label="first needed action")
    s = result.summary
    ax.axhline(s.delay_steps * 1e3 / s.rate_hz, color="k", lw=0.8, ls=":", label="delay estimate d")
    ax.set_ylabel("latency [ms]")
    ax.set_xlabel("time [s]")


def _legend_entries(fig) -> tuple[list, list[str]]:
    """Each label once, from every axes (columns differ: one may have holds or resets, another none)."""
    seen: dict[str, object] = {}
    for ax in fig.axes:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            seen.setdefault(label, handle)
    return list(seen.values()), list(seen)


def demo_figure(results: Mapping[str, RunResult], title: str = ""):
    """The matplotlib Figure (module doc); the caller saves and closes it."""
    import matplotlib  # extra: sim

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # extra: sim

    modes = list(results)
    joints = next(iter(results.values())).commands.shape[1]
    fig, axes = plt.subplots(
        joints + 1, len(modes), figsize=(5.5 * len(modes), 2.2 * (joints + 1) + 1.0), sharex="col", sharey="row",
        squeeze=False, layout="constrained",
    )  # fmt: skip
    for c, mode in enumerate(modes):
        result = results[mode]
        _joints(axes[:joints, c], result)
        _latency(axes[joints, c], result)
        axes[0, c].set_title(column_title(mode, result), fontsize=10)
    handles, labels = _legend_entries(fig)
    columns = min(len(labels), 3 if len(modes) == 1 else 5)  # a one-column figure is 5.5 in wide: 3 entries a row
    fig.legend(handles, labels, loc="outside lower center", ncol=columns, fontsize=8, frameon=False)
    if title:
        fig.suptitle(title, fontsize=11)
    return fig


def plot_demo(results: Mapping[str, RunResult], path: str | Path, title: str = "") -> Path:
    """Write the figure to `path` (PNG, atomically, marked PLOT_SOFTWARE); one column per mode."""
    fig = demo_figure(results, title)  # selects the Agg backend before pyplot is imported here
    import matplotlib.pyplot as plt  # extra: sim

    save = {"format": "png", "dpi": 110, "bbox_inches": "tight", "metadata": {"Software": PLOT_SOFTWARE}}
    atomic_write(path, lambda f: fig.savefig(f, **save))  # bbox "tight": never crop the legend
    plt.close(fig)
    return Path(path)


def written_by_demo(path: str | Path) -> bool:
    """Whether `path` is a PNG whose Software text chunk (before its image data) is PLOT_SOFTWARE."""
    try:
        with open(path, "rb") as f:
            if f.read(8) != PNG_SIGNATURE:
                return False
            while len(head := f.read(8)) == 8:
                length, kind = struct.unpack(">I4s", head)
                if kind in (b"IDAT", b"IEND"):
                    return False
                data = f.read(length)
                f.seek(4, 1)  # the chunk's CRC
                if kind == b"tEXt" and data == b"Software\0" + PLOT_SOFTWARE.encode():
                    return True
    except OSError:
        return False
    return False
