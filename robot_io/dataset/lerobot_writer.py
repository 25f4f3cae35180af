"""LeRobot's own dataset writer (LeRobotDataset.create / add_frame / save_episode / finalize, LeRobot 0.6.1's API),
used for a new dataset where `lerobot.datasets` imports (the `[lerobot]` extra with LeRobot's own dataset extra).
Appending is left to robot_io.dataset.parquet_writer: LeRobotDataset.resume writes into the dataset in place, and
a run killed midway would leave an info.json that counts episodes whose metadata was never written.

LeRobotDataset.create makes its root itself (it must not exist), so it writes into DIR.partial/lerobot and
finalize moves the result up into DIR.partial, which robot_io.dataset.directory then commits. Cameras are images,
not videos (use_videos=False), as in the standalone writer: no video encoding on the robot computer.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

IMAGE_WRITER_THREADS = 2  # LeRobot's AsyncImageWriter: PNG files written beside add_frame, not in it


def lerobot_available() -> bool:
    """Whether LeRobot's dataset package imports here (it needs LeRobot's own `datasets` and `av` too)."""
    try:
        import lerobot.datasets.lerobot_dataset  # noqa: F401  # extra: lerobot
    except Exception:  # noqa: BLE001 - missing, or its own optional dependencies missing: the standalone writer
        return False
    return True


class LeRobotWriter:
    """Writes a run's episodes with LeRobot's LeRobotDataset into `root` (DIR.partial)."""

    def __init__(self, root: Path, fps: int, features: dict[str, dict], robot_type: str | None) -> None:
        import lerobot  # extra: lerobot
        from lerobot.datasets.lerobot_dataset import LeRobotDataset  # extra: lerobot

        self.name = f"LeRobot's own (lerobot {getattr(lerobot, '__version__', '?')})"
        self.root, self._staging = root, root / "lerobot"
        self.features = features
        lerobot_features = {k: {**v, "shape": tuple(v["shape"])} for k, v in features.items()}  # LeRobot's tuples
        self.dataset = LeRobotDataset.create(
            repo_id=f"vlash/{root.name.removesuffix('.partial')}",
            fps=fps,
            features=lerobot_features,
            root=self._staging,
            robot_type=robot_type,
            use_videos=False,
            image_writer_threads=IMAGE_WRITER_THREADS,
        )
        self.episodes = 0

    def add_frame(self, frame: dict[str, Any], task: str) -> None:
        """One frame: LeRobot wants every [1]-shaped number as an array of that shape, and the task in the frame."""
        values = {}
        for name, ft in self.features.items():
            value = frame[name]
            if list(ft["shape"]) == [1] and ft["dtype"] != "string":
                value = np.asarray(value, ft["dtype"]).reshape(1)
            values[name] = value
        self.dataset.add_frame({**values, "task": task})

    def save_episode(self) -> int | None:
        if not self.dataset.has_pending_frames():
            return None
        self.dataset.save_episode()
        self.episodes += 1
        return self.episodes - 1

    def finalize(self) -> None:
        """LeRobot's finalize (parquet footers, buffered episode metadata), then its files moved up into root."""
        self.dataset.finalize()
        for entry in self._staging.iterdir():
            os.replace(entry, self.root / entry.name)
        self._staging.rmdir()

    def close(self) -> None:
        """The run failed: DIR.partial is discarded whole; LeRobot's writer is only stopped."""
        self.dataset.finalize()
