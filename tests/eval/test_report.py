"""The evaluation plot: its right panel shows reaction latency, or completion time on untimed tasks."""

from __future__ import annotations

import numpy as np
from PIL import Image

from vlash.eval.report import plot_summary


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
    empty = plot_summary(_summary(None), tmp_path / "b.png")  # no successes: a note, no lines
    assert _right_panel_colour(empty) == 0.0 and _right_panel_colour(with_lines) > 1e-3
