"""Runs recorded as LeRobot datasets (format v3.0), for fine-tuning a policy on its own rollouts with lerobot-train.

    recorder = open_dataset(Path("rollouts"), robot, fps=30, robot_type="so101_follower", task="")
    with recorder:
        run_robot(robot, client, config, traces=[recorder])

Modules: layout (the format: paths, features, info.json), stats (feature statistics), directory (DIR.partial, the
commit, what is refused), parquet_writer (the standalone writer: pyarrow + Pillow, the `[dataset]` extra),
lerobot_writer (LeRobot's own writer, where it imports), recorder (the TraceSink and its worker thread).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

from robot_io.dataset.directory import DatasetError, check_target, discard, open_partial
from robot_io.dataset.layout import DatasetFormatError, run_features
from robot_io.dataset.lerobot_writer import LeRobotWriter, lerobot_available
from robot_io.dataset.parquet_writer import ParquetDatasetWriter
from robot_io.dataset.recorder import DatasetRecorder
from robot_io.robots.base import Robot, action_dim, robot_cameras, state_dim

EXTRA_MISSING = "recording a dataset needs pyarrow and Pillow: pip install 'vlash[dataset]'"


def check_dataset(target: Path) -> None:
    """Before anything connects: the `[dataset]` extra is installed and `target` may be recorded to (DatasetError
    otherwise, one line)."""
    if any(importlib.util.find_spec(name) is None for name in ("pyarrow", "PIL")):
        raise DatasetError(EXTRA_MISSING)
    check_target(target)


def open_dataset(target: Path, robot: Robot, fps: int, robot_type: str | None, task: str = "",
                 run: dict[str, Any] | None = None) -> DatasetRecorder:  # fmt: skip
    """A recorder for `robot`'s run into `target` (a new dataset, or one vlash recorded with the same fps and
    features, appended to): LeRobot's own writer for a new dataset where it imports, else the standalone one.
    `task`: the prompt given to the policy ("": each observation's)."""
    states = list(getattr(robot, "state_names", None) or [f"state{i}" for i in range(state_dim(robot))])
    actions = list(getattr(robot, "action_names", None) or [f"action{i}" for i in range(action_dim(robot))])
    cameras = {c: robot.observation_features[f"images.{c}"].shape for c in robot_cameras(robot)}
    try:
        features = run_features(states, actions, cameras)
    except DatasetFormatError as exc:
        raise DatasetError(str(exc)) from None
    partial, appending = open_partial(target)
    try:
        if not appending and lerobot_available():
            writer = LeRobotWriter(partial, fps, features, robot_type)
        else:
            writer = ParquetDatasetWriter(partial, fps, features, robot_type, target if appending else None)
    except DatasetFormatError as exc:
        discard(partial)
        raise DatasetError(f"{target}: this run cannot be appended: {exc}") from None
    except BaseException:
        discard(partial)
        raise
    return DatasetRecorder(target, writer, task, run, appending)


__all__ = ["DatasetError", "DatasetRecorder", "check_dataset", "open_dataset"]
