"""Which robot camera feeds which policy camera (the camera map), resolved once at setup.

The map is made from the robot's cameras, the policy's cameras (the server's Metadata) and the explicit entries the
user gave (`parse_camera_map`: "POLICY=ROBOT", or "POLICY=none" to leave a policy camera out on purpose; the server
then masks it). Identical names map by name; whenever the names differ an explicit entry is required: a map that is
ambiguous (one robot camera feeding two policy cameras) or incomplete (a policy camera with no robot camera and no
"none") is refused with both lists. The executor applies it to every request (robot_io.executors.images).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from robot_io.protocol import CameraSpec
from robot_io.protocol.errors import ShapeError

MASKED = "none"  # the right-hand side of a map entry that leaves a policy camera out
CameraMap = dict[str, str | None]  # policy camera -> robot camera (None: left out, masked by the server)


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
