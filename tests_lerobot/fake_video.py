"""`cv2.VideoCapture` replaced by a camera that synthesizes frames (index N: every pixel N), at the fps asked."""

from __future__ import annotations

import time

import cv2
import numpy as np


class SyntheticCapture:
    def __init__(self, index_or_path: int | str, backend: int = 0) -> None:
        self.index = int(index_or_path) if str(index_or_path).isdigit() else -1
        self.props = {cv2.CAP_PROP_FRAME_WIDTH: 640.0, cv2.CAP_PROP_FRAME_HEIGHT: 480.0, cv2.CAP_PROP_FPS: 30.0,
                      cv2.CAP_PROP_FOURCC: 0.0}  # fmt: skip
        self.opened = self.index >= 0

    def isOpened(self) -> bool:  # noqa: N802 (OpenCV's name)
        return self.opened

    def release(self) -> None:
        self.opened = False

    def get(self, prop: int) -> float:
        return self.props.get(prop, 0.0)

    def set(self, prop: int, value: float) -> bool:
        self.props[prop] = float(value)
        return True

    def read(self) -> tuple[bool, np.ndarray | None]:
        if not self.opened:
            return False, None
        time.sleep(1.0 / max(self.props[cv2.CAP_PROP_FPS], 1.0))
        shape = (int(self.props[cv2.CAP_PROP_FRAME_HEIGHT]), int(self.props[cv2.CAP_PROP_FRAME_WIDTH]), 3)
        return True, np.full(shape, self.index, np.uint8)
