"""Which robot camera feeds which policy camera (the camera map), and the images sent with a request.

The camera map is resolved once at setup (`resolve_camera_map`) from the robot's cameras, the policy's cameras
(the server's Metadata) and the explicit entries the user gave (`parse_camera_map`: "POLICY=ROBOT", or
"POLICY=none" to leave a policy camera out on purpose; the server then masks it). Identical names map by name;
whenever the names differ an explicit entry is required: a map that is ambiguous (one robot camera feeding two
policy cameras) or incomplete (a policy camera with no robot camera and no "none") is refused with both lists.

Images go out at the camera's native size: the server resizes them exactly as the policy was trained
(aspect-preserving, antialiased, zero padding), so resizing here would only add a second, different resize.
The metadata camera size is a recommendation. Only an image with a side above the protocol's limit is
downscaled here (nearest neighbour, aspect kept) so the server does not refuse it."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from robot_io.protocol import CameraSpec, Limits
from robot_io.protocol.errors import ShapeError

MASKED = "none"  # the right-hand side of a map entry that leaves a policy camera out
CameraMap = dict[str, str | None]  # policy camera -> robot camera (None: left out, masked by the server)


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


def parse_camera_map(entries: Iterable[str]) -> CameraMap:
    """{"POLICY": "ROBOT" or None} from "POLICY=ROBOT" / "POLICY=none" strings; ValueError naming a bad entry."""
    out: CameraMap = {}
    for entry in entries:
        policy, sep, robot = (part.strip() for part in entry.partition("="))
        if not sep or not policy or not robot:
            raise ValueError(f"camera map entry {entry!r}: expected POLICY_CAMERA=ROBOT_CAMERA (or =none)")
        if policy in out:
            raise ValueError(f"camera map: policy camera {policy!r} is mapped twice")
        out[policy] = None if robot.lower() == MASKED else robot
    return out


def resolve_camera_map(
    robot_cameras: Sequence[str], policy_cameras: Sequence[CameraSpec], explicit: Mapping[str, str | None] | None = None
) -> CameraMap:
    """The complete map (every policy camera -> a robot camera or None) or ShapeError listing both sides."""
    explicit, policy = dict(explicit or {}), [c.name for c in policy_cameras]
    problems = [f"{name!r} is not a policy camera" for name in explicit if name not in policy]
    problems += [f"{name}={cam!r}: the robot has no such camera" for name, cam in explicit.items()
                 if cam is not None and cam not in robot_cameras]  # fmt: skip
    resolved: CameraMap = {}
    for name in policy:
        if name in explicit:
            resolved[name] = explicit[name]
        elif name in robot_cameras:
            resolved[name] = name
        else:
            problems.append(f"policy camera {name!r} has no robot camera (map it, or map it to {MASKED})")
    feeds: dict[str, list[str]] = {}
    for name, cam in resolved.items():
        if cam is not None:
            feeds.setdefault(cam, []).append(name)
    problems += [f"robot camera {cam!r} would feed {names}" for cam, names in feeds.items() if len(names) > 1]
    if problems:
        raise ShapeError(
            f"camera map: {'; '.join(problems)}. The policy's cameras: {policy}; the robot's cameras: "
            f"{list(robot_cameras)}. Map them with POLICY_CAMERA=ROBOT_CAMERA entries (vlash run --camera), "
            f"POLICY_CAMERA={MASKED} to leave one out (masked)"
        )
    return resolved


def match_cameras(
    images: Mapping[str, np.ndarray],
    cameras: Sequence[CameraSpec],
    camera_map: Mapping[str, str | None] | None = None,
    max_side: int = Limits().max_image_side,
) -> dict[str, np.ndarray]:
    """The request's images, keyed by policy camera, at their native size (see the module doc). `camera_map`
    (from resolve_camera_map; None: identical names) says which robot image feeds each policy camera; cameras
    mapped to None are left out. Raises ShapeError when a mapped image is missing or not uint8 [H, W, 3]."""
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
