"""The images sent with a request: each policy camera's image, taken from the robot camera the camera map names
(robot_io.camera_map, resolved once at setup).

Images go out at the camera's native size: the server resizes them exactly as the policy was trained
(aspect-preserving, antialiased, zero padding), so resizing here would only add a second, different resize.
The metadata camera size is a recommendation. Only an image with a side above the protocol's limit is
downscaled here (nearest neighbour, aspect kept) so the server does not refuse it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from robot_io.protocol import CameraSpec, Limits
from robot_io.protocol.errors import ShapeError


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
    images: Mapping[str, np.ndarray],
    cameras: Sequence[CameraSpec],
    camera_map: Mapping[str, str | None] | None = None,
    max_side: int = Limits().max_image_side,
) -> dict[str, np.ndarray]:
    """The request's images, keyed by policy camera, at their native size (see the module doc). `camera_map`
    (robot_io.camera_map.resolve_camera_map; None: identical names) says which robot image feeds each policy camera;
    cameras mapped to None are left out. Raises ShapeError when a mapped image is missing or not uint8 [H, W, 3]."""
    out = {}
    for cam in cameras:
        source = cam.name if camera_map is None else camera_map.get(cam.name, cam.name)
        if source is None:
            continue
        if source not in images:
            raise ShapeError(
                f"policy camera {cam.name!r} needs robot image {source!r}; the observation has {sorted(images)}"
            )
        image = np.asarray(images[source])
        if image.dtype != np.uint8 or image.ndim != 3 or image.shape[2] != 3:
            raise ShapeError(f"camera {source!r}: expected uint8 [H, W, 3], got {image.dtype} {image.shape}")
        out[cam.name] = fit_within(image, max_side)
    return out
