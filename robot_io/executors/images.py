"""Match the robot's camera images to the cameras the policy expects (by name, else in order).

Images go out at the camera's native size: the server resizes them exactly as the policy was trained
(aspect-preserving, antialiased, zero padding), so resizing here would only add a second, different resize.
The metadata camera size is a recommendation. Only an image with a side above the protocol's limit is
downscaled here (nearest neighbour, aspect kept) so the server does not refuse it."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from robot_io.errors import ShapeError
from robot_io.protocol import CameraSpec, Limits


def resize_nearest(image: np.ndarray, height: int, width: int) -> np.ndarray:
    """Nearest-neighbour resize in numpy (no OpenCV on the robot path); a no-op when the size already matches."""
    if image.shape[:2] == (height, width):
        return image
    rows = (np.arange(height) * image.shape[0] // height).astype(np.intp)
    cols = (np.arange(width) * image.shape[1] // width).astype(np.intp)
    return np.ascontiguousarray(image[rows[:, None], cols[None, :]])


def fit_within(image: np.ndarray, max_side: int) -> np.ndarray:
    """`image` unchanged when both sides are <= max_side, else downscaled (aspect kept) to fit."""
    height, width = image.shape[:2]
    if max(height, width) <= max_side:
        return image
    scale = max_side / max(height, width)
    return resize_nearest(image, max(1, int(height * scale)), max(1, int(width * scale)))


def match_cameras(
    images: dict[str, np.ndarray],
    cameras: list[CameraSpec],
    warn: Callable[[str, str], None] | None = None,
    max_side: int = Limits().max_image_side,
) -> dict[str, np.ndarray]:
    """Images keyed as the policy's `cameras` want, at their native size (see the module doc). Names match
    exactly; otherwise, with as many images as cameras, in order (warned once). Raises ShapeError when that is
    impossible (a setup error)."""
    if not cameras:
        return {}
    if all(c.name in images for c in cameras):
        pairs = [(c, images[c.name]) for c in cameras]
    elif len(images) == len(cameras):
        pairs = list(zip(cameras, images.values(), strict=True))
        if warn is not None:
            warn("cameras", f"camera names {sorted(images)} differ from the policy's "
                 f"{[c.name for c in cameras]}; matched in order")  # fmt: skip
    else:
        raise ShapeError(f"robot cameras {sorted(images)} cannot feed the policy's {[c.name for c in cameras]}")
    out = {}
    for cam, image in pairs:
        image = np.asarray(image)
        if image.dtype != np.uint8 or image.ndim != 3 or image.shape[2] != 3:
            raise ShapeError(f"camera {cam.name!r}: expected uint8 [H, W, 3], got {image.dtype} {image.shape}")
        out[cam.name] = fit_within(image, max_side)
    return out
