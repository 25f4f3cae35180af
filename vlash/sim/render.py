"""Top-down RGB camera: anti-aliased OpenCV drawing of the arm and the task's items (no GL).

World square [-1, 1]^2 (y up) maps onto the S x S image (row 0 at the top). Coordinates are drawn
with 4 bits of sub-pixel precision and cv2.LINE_AA, so motion is visible below one pixel.
Deterministic: identical inputs give identical pixels.
"""

from __future__ import annotations

import cv2
import numpy as np

from vlash import planar_arm as kinematics
from vlash.sim.config import ArmConfig
from vlash.sim.errors import SimConfigError
from vlash.sim.tasks.base import DrawItem

SHIFT = 4  # sub-pixel bits of OpenCV's fixed-point coordinates
BACKGROUND = (232, 230, 222)
WORKSPACE = (244, 243, 238)
LINK_COLORS = ((70, 72, 84), (105, 108, 124))
JOINT_COLOR = (35, 35, 40)
EE_FILL, EE_RIM = (250, 250, 250), (20, 20, 20)


class Renderer:
    """Draws frames of one image size; the static background is drawn once."""

    def __init__(self, image_size: int, arm: ArmConfig) -> None:
        if not (isinstance(image_size, int) and 16 <= image_size <= 1024):
            raise SimConfigError(f"image_size must be an int in [16, 1024], got {image_size!r}")
        self.size = image_size
        self.arm = arm
        self._scale = image_size / 2.0
        self._link_px = max(1, round(0.045 * self._scale))
        self._background = self._draw_background()

    def _point(self, xy: np.ndarray) -> tuple[int, int]:
        u = (float(xy[0]) + 1.0) * self._scale - 0.5
        v = (1.0 - float(xy[1])) * self._scale - 0.5
        return round(u * (1 << SHIFT)), round(v * (1 << SHIFT))

    def _radius(self, r: float) -> int:
        return max(1 << SHIFT, round(r * self._scale * (1 << SHIFT)))

    def _disc(self, img: np.ndarray, xy: np.ndarray, r: float, color: tuple[int, int, int]) -> None:
        cv2.circle(img, self._point(xy), self._radius(r), color, -1, cv2.LINE_AA, SHIFT)

    def _draw_background(self) -> np.ndarray:
        img = np.empty((self.size, self.size, 3), dtype=np.uint8)
        img[:] = BACKGROUND
        self._disc(img, np.zeros(2), self.arm.reach, WORKSPACE)
        return img

    def draw(self, q: np.ndarray, items: list[DrawItem]) -> np.ndarray:
        """One RGB frame uint8 [S, S, 3] of the arm at q with the items."""
        img = self._background.copy()
        for item in items:
            self._disc(img, item.xy, item.radius, item.rgb)
            if item.outline:
                width = max(1, round(0.012 * self._scale))
                cv2.circle(img, self._point(item.xy), self._radius(item.radius), EE_RIM, width, cv2.LINE_AA, SHIFT)
        links = self.arm.link_lengths
        base, elbow, ee = np.zeros(2), kinematics.elbow_position(q, links), kinematics.forward(q, links)
        for (a, b), color in zip(((base, elbow), (elbow, ee)), LINK_COLORS, strict=True):
            cv2.line(img, self._point(a), self._point(b), color, self._link_px, cv2.LINE_AA, SHIFT)
        self._disc(img, base, 0.05, JOINT_COLOR)
        self._disc(img, elbow, 0.032, JOINT_COLOR)
        self._disc(img, ee, 0.04, EE_RIM)
        self._disc(img, ee, 0.022, EE_FILL)
        return img
