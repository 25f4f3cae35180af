"""The evaluation table and plot: the table shows the executor's settings, the completion interval and missed steps;
the plot's right panel shows reaction latency, or completion time on untimed tasks."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from PIL import Image
from rich.console import Console

from robot_io.executors import ExecutorConfig
from vlash.eval.link import LinkTiming
from vlash.eval.metrics import EpisodeMetrics
from vlash.eval.report import TABLE_WIDTH, TableConfig, plot_summary, print_table
from vlash.eval.sweep import SEED_SPLITS, SweepConfig, summarize


def _summary(completion: float | None) -> dict:
    cell = dict(success_rate=0.9, ci95=[0.8, 0.95], reaction_mean_s=None, completion_s=completion)
    cells = [
        {"mode": m, "delay": d, **cell, "completion_s": completion and completion + 0.1 * d}
        for m in ("sync", "vlash")
        for d in (0, 2, 4)
    ]
    return {"settings": {"task": "reach", "episodes": 10}, "cells": cells}


def _right_panel_colour(path) -> float:
    """Share of coloured (plotted-line) pixels in the right half; text, grid and frame are grey."""
    rgb = np.asarray(Image.open(path).convert("RGB"), dtype=float)
    right = rgb[:, rgb.shape[1] // 2 :]
    spread = right.max(axis=2) - right.min(axis=2)
    return float((spread > 80).mean())


def test_untimed_tasks_plot_completion_time_instead_of_an_empty_panel(tmp_path):
    with_lines = plot_summary(_summary(1.0), tmp_path / "a.png")
    empty = plot_summary(_summary(None), tmp_path / "b.png")  # no completion time (no episodes): a note, no lines
    assert _right_panel_colour(empty) == 0.0 and _right_panel_colour(with_lines) > 1e-3


def test_the_table_names_the_settings_the_seeds_and_the_missed_steps():
    cfg = SweepConfig(task="reach", policy="oracle", modes=("vlash",), delays=(2,), episodes=2,
                      executor=ExecutorConfig(mode="vlash", state_source="commanded", action_stride=2),
                      timing=LinkTiming(0), seed=SEED_SPLITS["report"])  # fmt: skip
    episodes = [EpisodeMetrics("reach", "vlash", 2, SEED_SPLITS["report"] + i, i == 0, 30, 1.0 + i) for i in (0, 1)]
    episodes[1].missed_steps = 7
    console = Console(record=True, width=200)
    print_table(summarize(cfg, episodes), console)
    text = console.export_text()
    assert "q=2" in text and "state=commanded" in text and "seeds 100000-100001" in text
    row = next(line for line in text.splitlines() if "vlash" in line and "│" in line)
    assert "1.50 [" in row and "│ 7 " in row  # completion over both episodes with its interval; missed steps


def test_the_table_gives_units_json_names_and_says_why_faster_repeats():
    """jerk and boundary_jump carry their unit (rad for joint actions, world units for end-effector targets); faster
    waits only for its first actions (d x 0.235 steps after the prefill and one step): d = 2 and 4 both wait 1 step."""
    cfg = SweepConfig(task="reach", policy="oracle", modes=("sync", "faster"), delays=(2, 4, 8), episodes=1,
                      executor=ExecutorConfig(), timing=LinkTiming(0), seed=SEED_SPLITS["report"])  # fmt: skip
    episodes = [
        EpisodeMetrics("reach", m, d, SEED_SPLITS["report"], True, 30, 1.0) for m in cfg.modes for d in (2, 4, 8)
    ]
    summary = summarize(cfg, episodes)
    assert summary["notes"] == [
        "faster at d = 2, 4: the same episodes: it waits only for its first actions, which arrive after the prefill "
        "and one denoise step (d x 0.235 control steps), i.e. 1 step(s) at each"
    ]
    console = Console(record=True, width=250)
    print_table(summary, console, TableConfig(wide=True))
    text = console.export_text()
    assert "jerk rad²/s⁶" in text and "boundary_jump rad" in text and "faster at d = 2, 4" in text
    summary["settings"]["sim"]["action_interface"] = "ee_delta"
    console = Console(record=True, width=250)
    print_table(summary, console, TableConfig(wide=True))
    assert "jerk u²/s⁶" in console.export_text()
    assert summarize(replace(cfg, modes=("sync",)), episodes[:3])["notes"] == []


def test_a_single_delay_gets_one_whole_tick(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    summary = _summary(1.0)
    summary["cells"] = [c for c in summary["cells"] if c["delay"] == 4]
    captured = {}
    real_close = plt.close
    plt.close = lambda fig: captured.setdefault("fig", fig)  # keep the figure to read its axes
    try:
        plot_summary(summary, tmp_path / "one.png")
    finally:
        plt.close = real_close
    for ax in captured["fig"].axes:
        assert list(ax.get_xticks()) == [4] and ax.get_xlim() == (3, 5)


def test_a_summary_round_trips_plain_and_gzip_compressed(tmp_path):
    from vlash.eval.report import read_summary, write_summary

    summary = _summary(1.0)
    plain, packed = write_summary(tmp_path / "a.json", summary), write_summary(tmp_path / "a.json.gz", summary)
    assert read_summary(plain) == read_summary(packed) == summary
    assert packed.read_bytes()[:2] == b"\x1f\x8b" and packed.stat().st_size < plain.stat().st_size / 3


def test_the_table_fits_100_columns_and_wide_prints_every_column():
    """The default table (the settings line, the rows, the notes) fits TABLE_WIDTH on a wide terminal without
    wrapping a cell; --wide adds touch time, jerk and boundary jump (about 145 columns); JSON keeps all of them."""
    cfg = SweepConfig(task="whack", policy="oracle", modes=("sync", "faster"), delays=(4, 12), episodes=2,
                      executor=ExecutorConfig(), timing=LinkTiming(0), seed=SEED_SPLITS["report"])  # fmt: skip
    episodes = []
    for m in cfg.modes:
        for d in cfg.delays:
            for i in range(2):
                e = EpisodeMetrics("whack", m, d, SEED_SPLITS["report"] + i, i == 0, 240, 8.0 - i, [0.633, 1.2], [1.1])
                e.jerk, e.max_boundary_jump, e.hold_fraction, e.missed_steps = 913210.0, 0.135, 0.29, 12
                episodes.append(e)
    summary = summarize(cfg, episodes)
    narrow, wide = Console(record=True, width=250), Console(record=True, width=250)
    print_table(summary, narrow)
    print_table(summary, wide, TableConfig(wide=True))
    narrow_text, wide_text = narrow.export_text(), wide.export_text()
    narrow_lines, wide_lines = narrow_text.splitlines(), wide_text.splitlines()
    assert max(map(len, narrow_lines)) <= TABLE_WIDTH < max(map(len, wide_lines))
    header = next(line for line in narrow_lines if "mode" in line)
    assert "reaction ms mean/p95" in header and "jerk" not in header and "touch" not in header
    assert len([line for line in narrow_lines if "│" in line]) == 4  # one line a row: no cell wrapped
    assert "touch time, jerk and boundary jump: --wide, or --json" in " ".join(narrow_text.split())
    wide_header = next(line for line in wide_lines if "mode" in line)
    assert all(name in wide_header for name in ("touch ms", "jerk rad²/s⁶", "boundary_jump rad", "missed"))
    assert {"touch_mean_s", "jerk", "boundary_jump"} <= set(summary["cells"][0])  # the JSON's cells keep them
