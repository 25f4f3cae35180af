"""Evaluation output: a table on the console, and plots (success vs delay; reaction latency or completion
time per mode)."""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.table import Table

from vlash.atomic import atomic_write


def write_summary(path: str | Path, summary: dict) -> Path:
    """`vlash eval --json PATH`: the summary as JSON, gzip-compressed when PATH ends in .gz (per-episode records make
    a report run's JSON about 0.5 MB; the docs keep theirs compressed), written atomically."""
    text = json.dumps(summary, indent=1).encode()
    data = gzip.compress(text, mtime=0) if str(path).endswith(".gz") else text
    atomic_write(path, lambda f: f.write(data))
    return Path(path)


def read_summary(path: str | Path) -> dict:
    """A `vlash eval --json` file, plain or .gz."""
    raw = Path(path).read_bytes()
    return json.loads(gzip.decompress(raw) if str(path).endswith(".gz") else raw)


def _fmt(value: float | None, scale: float = 1.0, digits: int = 0) -> str:
    return "-" if value is None else f"{value * scale:.{digits}f}"


def _success(cell: dict) -> str:
    low, high = cell["ci95"]
    return f"{_fmt(cell['success_rate'], 100)} [{low * 100:.0f}-{high * 100:.0f}]"


def _completion(cell: dict) -> str:
    ci = cell.get("completion_ci95")
    return _fmt(cell["completion_s"], 1, 2) + ("" if ci is None else f" [{ci[0]:.2f}-{ci[1]:.2f}]")


JOINT_INTERFACES = ("position", "velocity")  # the simulator's joint action interfaces (ee_delta: world units)


def units(summary: dict) -> tuple[str, str]:
    """(jerk unit, boundary_jump unit): joint commands are in rad, end-effector targets in world units (u)."""
    joints = summary["settings"].get("sim", {}).get("action_interface", "position") in JOINT_INTERFACES
    length = "rad" if joints else "u"
    return f"{length}²/s⁶", length


@dataclass(frozen=True)
class TableConfig:
    """How `vlash eval` prints its table."""

    wide: bool = False  # print every column (touch time, jerk, boundary jump); default: the ones that fit 100 columns


TABLE_WIDTH = 100  # the default table fits a terminal this wide; --json keeps every number, --wide prints them all


def _columns(summary: dict) -> list[tuple[str, Callable[[dict], str], bool]]:
    """(header, cell, wide only) of every column, in order."""
    jerk_unit, jump_unit = units(summary)
    return [
        ("mode", lambda c: c["mode"], False),
        ("d", lambda c: str(c["delay"]), False),
        ("success % [CI]", _success, False),
        ("completion s [CI]", _completion, False),
        ("reaction ms mean/p95", lambda c: f"{_fmt(c['reaction_mean_s'], 1000)} / {_fmt(c['reaction_p95_s'], 1000)}",
         False),
        ("touch ms", lambda c: _fmt(c["touch_mean_s"], 1000), True),
        (f"jerk {jerk_unit}", lambda c: _fmt(c["jerk"], 1, 0), True),
        (f"boundary_jump {jump_unit}", lambda c: _fmt(c["boundary_jump"], 1, 3), True),
        ("hold %", lambda c: _fmt(c["hold_fraction"], 100), False),
        ("missed", lambda c: str(c["missed_steps"]), False),
    ]  # fmt: skip


def print_table(summary: dict, console: Console, config: TableConfig | None = None) -> None:
    """The settings line, one row per (mode, delay) cell and the notes: the columns that fit TABLE_WIDTH, or every
    column with `config.wide` (`vlash eval --wide`); `--json` has every number either way."""
    s, wide = summary["settings"], (config or TableConfig()).wide
    width = None if wide else min(console.width, TABLE_WIDTH)
    ex = s["executor"]
    console.print(
        f"[bold]{s['task']}[/] policy={s['policy']} episodes={s['episodes']} s={ex['execution_horizon']} "
        f"q={ex['action_stride']} state={ex['state_source']} seeds {s['seed']}-{s['seed'] + s['episodes'] - 1}",
        width=width,
    )
    columns = [(header, cell) for header, cell, wide_only in _columns(summary) if wide or not wide_only]
    table = Table(*(header for header, _ in columns))
    for c in summary["cells"]:
        table.add_row(*(cell(c) for _, cell in columns))
    console.print(table, width=width)
    if wide:
        console.print("[CI]: 95% confidence interval; jerk: mean squared jerk of the commanded positions; "
                      "boundary_jump: the largest jump at a chunk switch, per episode, averaged (docs/METHODS.md, "
                      "Metrics)")  # fmt: skip
    else:
        console.print("[CI]: 95% confidence interval; touch time, jerk and boundary jump: --wide, or --json "
                      "(docs/METHODS.md, Metrics)", width=width)  # fmt: skip
    for note in summary.get("notes", []):
        console.print(note, width=width)


def success_bars(cells: list[dict]) -> tuple[list[float], list[list[float]]]:
    """(success %, [below, above] error bar lengths) of summary cells, for matplotlib's errorbar: the 95% interval
    around each rate, never negative (at 0% or 100% a stored Wilson bound equals the rate only up to rounding)."""
    rate = [100 * c["success_rate"] for c in cells]
    below = [max(0.0, r - 100 * c["ci95"][0]) for r, c in zip(rate, cells, strict=True)]
    above = [max(0.0, 100 * c["ci95"][1] - r) for r, c in zip(rate, cells, strict=True)]
    return rate, [below, above]


def plot_summary(summary: dict, path: str | Path) -> Path:
    """Two panels per mode against delay: success rate (95% CI); mean reaction latency on tasks with timed
    events, else mean completion time."""
    import matplotlib  # extra: sim

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # extra: sim

    path = Path(path)
    s = summary["settings"]
    modes = list(dict.fromkeys(c["mode"] for c in summary["cells"]))
    # right panel: reaction latency on tasks with timed events, else the time to complete the task
    timed = any(c["reaction_mean_s"] is not None for c in summary["cells"])
    key, scale = ("reaction_mean_s", 1000.0) if timed else ("completion_s", 1.0)
    fig, (ax_s, ax_r) = plt.subplots(1, 2, figsize=(11, 4), constrained_layout=True)
    for mode in modes:
        cells = [c for c in summary["cells"] if c["mode"] == mode]
        delays = [c["delay"] for c in cells]
        rate, err = success_bars(cells)
        ax_s.errorbar(delays, rate, yerr=err, marker="o", capsize=3, label=mode)
        points = [(d, scale * c[key]) for d, c in zip(delays, cells, strict=True) if c[key] is not None]
        if points:
            xs, ys = zip(*points, strict=True)
            ax_r.plot(xs, ys, marker="o", label=mode)
    ax_s.set(
        xlabel="inference delay d (control steps)",
        ylabel="success rate (%)",
        ylim=(-3, 103),
        title=f"{s['task']}: success vs delay ({s['episodes']} episodes/point, 95% CI)",
    )
    if timed:
        ax_r.set(ylabel="reaction latency (ms)", title=f"{s['task']}: event -> first motion toward it")
    else:
        ax_r.set(ylabel="mean completion time (s)", title=f"{s['task']}: time to success (failures count the limit)")
    ax_r.set(xlabel="inference delay d (control steps)")
    if not ax_r.lines:
        ax_r.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax_r.transAxes)
    delays = sorted({c["delay"] for c in summary["cells"]})
    for ax in (ax_s, ax_r):
        ax.grid(alpha=0.3)
        ax.set_xticks(delays)  # whole control steps, one tick per delay measured
        if len(delays) == 1:
            ax.set_xlim(delays[0] - 1, delays[0] + 1)
    ax_s.legend(fontsize=8)
    atomic_write(path, lambda f: fig.savefig(f, format="png", dpi=110))
    plt.close(fig)
    return path
