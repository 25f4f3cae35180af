"""OpenCVCamera: a background thread grabs frames from cv2.VideoCapture; readers get the latest one.

Read semantics: `read_latest(max_age_s)` returns the newest frame (RGB uint8 [H, W, 3]) and its capture time
(time.monotonic_ns) without blocking; it raises DeadlineExceeded when there is no frame yet or the newest is
older than max_age_s (a stalled camera). OpenCV is imported on connect, with an actionable message if missing.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from robot_io.protocol.errors import DeadlineExceeded, RobotIOError

log = logging.getLogger(__name__)
CAP_PROP_FRAME_WIDTH, CAP_PROP_FRAME_HEIGHT, CAP_PROP_FPS = 3, 4, 5  # OpenCV's VideoCaptureProperties values


def _opencv() -> Any:
    try:
        import cv2  # extra: sim
    except ImportError as exc:
        raise RobotIOError(
            "OpenCVCamera needs OpenCV: pip install opencv-python-headless (or the vlash[sim] extra)"
        ) from exc
    return cv2


class OpenCVCamera:
    """A camera by index or path/URL; `capture_factory(source)` replaces cv2.VideoCapture (tests, custom sources)."""

    def __init__(
        self,
        source: int | str = 0,
        width: int | None = None,
        height: int | None = None,
        fps: float | None = None,
        bgr_to_rgb: bool = True,
        connect_timeout_s: float = 5.0,
        capture_factory: Callable[[int | str], Any] | None = None,
    ) -> None:
        self.source, self.width, self.height, self.fps = source, width, height, fps
        self.bgr_to_rgb, self.connect_timeout_s = bgr_to_rgb, connect_timeout_s
        self._factory = capture_factory
        self._capture: Any = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._first = threading.Event()
        self._lock = threading.Lock()
        self._frame: np.ndarray | None = None
        self._frame_ns = 0
        self.frames = 0  # frames grabbed
        self.failures = 0  # failed reads

    def connect(self) -> None:
        factory = self._factory or _opencv().VideoCapture
        cap = factory(self.source)
        if not cap.isOpened():
            raise RobotIOError(f"OpenCVCamera: cannot open camera {self.source!r}")
        settings = {CAP_PROP_FRAME_WIDTH: self.width, CAP_PROP_FRAME_HEIGHT: self.height, CAP_PROP_FPS: self.fps}
        for prop, value in settings.items():
            if value is not None:
                cap.set(prop, value)
        self._capture = cap
        self._stop.clear()
        self._thread = threading.Thread(target=self._grab_loop, name=f"camera-{self.source}", daemon=True)
        self._thread.start()
        if not self._first.wait(self.connect_timeout_s):
            self.disconnect()
            raise DeadlineExceeded(f"OpenCVCamera {self.source!r}: no frame within {self.connect_timeout_s} s")

    def disconnect(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2.0)
            self._thread = None
        if self._capture is not None:
            self._capture.release()
            self._capture = None

    def read_latest(self, max_age_s: float | None = None) -> tuple[np.ndarray, int]:
        """(RGB uint8 [H, W, 3], capture time in time.monotonic_ns) of the newest frame."""
        with self._lock:
            frame, stamp = self._frame, self._frame_ns
        if frame is None:
            raise DeadlineExceeded(f"OpenCVCamera {self.source!r}: no frame yet")
        age = (time.monotonic_ns() - stamp) / 1e9
        if max_age_s is not None and age > max_age_s:
            raise DeadlineExceeded(f"OpenCVCamera {self.source!r}: newest frame is {age * 1e3:.0f} ms old")
        return frame, stamp

    def _grab_loop(self) -> None:
        while not self._stop.is_set():
            ok, frame = self._capture.read()
            stamp = time.monotonic_ns()
            if not ok or frame is None:
                self.failures += 1
                self._stop.wait(0.005)  # a failing device: do not spin
                continue
            image = np.ascontiguousarray(frame[..., ::-1] if self.bgr_to_rgb else frame, dtype=np.uint8)
            with self._lock:
                self._frame, self._frame_ns = image, stamp
            self.frames += 1
            self._first.set()
