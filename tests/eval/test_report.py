"""The evaluation table and plot: the table shows the executor's settings, the completion interval and missed steps;
the plot's right panel shows reaction latency, or completion time on untimed tasks."""

from __future__ import annotations

import numpy as np
from PIL import Image
from rich.console import Console

from robot_io.executors import ExecutorConfig
from vlash.eval.link import LinkTiming
from vlash.eval.metrics import EpisodeMetrics
from vlash.eval.report import plot_summary, print_table
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
                      executor=ExecutorConfig(mode="vlash", state_source="commanded", quantization=2),
                      timing=LinkTiming(0), seed=SEED_SPLITS["report"])  # fmt: skip
    episodes = [EpisodeMetrics("reach", "vlash", 2, SEED_SPLITS["report"] + i, i == 0, 30, 1.0 + i) for i in (0, 1)]
    episodes[1].missed_steps = 7
    console = Console(record=True, width=200)
    print_table(summarize(cfg, episodes), console)
    text = console.export_text()
    assert "q=2" in text and "state=commanded" in text and "seeds 100000-100001" in text
    row = next(line for line in text.splitlines() if "vlash" in line and "│" in line)
    assert "1.50 [" in row and "│ 7 " in row  # completion over both episodes with its interval; missed steps
