"""The planar arm's task space as policy transforms (kinds "planar_arm" and "planar_arm_velocity", see
vlash.policies.processing.transforms), over the arm's kinematics in vlash.planar_arm.

The robot always sends joint states and receives joint-position chunks. A task-space policy sees the
end effector's position instead of the joints (forward kinematics of the state, and of any committed or
guidance actions), and predicts a chunk of end-effector positions; inverse kinematics turns that chunk
back into joint positions, each step on the elbow branch of the step before it, starting from the given
joint state. The conversion is exact both ways on reachable points (unreachable ones are projected onto
the reachable annulus, as `vlash.planar_arm.inverse` does).

With joint-velocity actions (PlanarArmVelocityTaskSpace) the policy predicts end-effector velocities: the chunk
is integrated from the end effector's position at the start state, inverse kinematics gives the joint path, and
its differences over the control period are the joint velocities. Committed joint velocities map the other way
along the joint path they integrate to, so a chunk round-trips exactly (on the start's elbow branch).

Why: where a target is in the image maps to where the end effector must go by a translation, but to the
joint angles only through the arm's inverse kinematics. A small policy trained for minutes learns the first
far more precisely (docs/EVALUATION.md).

numpy only (no gymnasium, no OpenCV): a server loads it when a policy directory names "planar_arm".
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from vlash import planar_arm as kinematics
from vlash.errors import ShapeError

KIND = "planar_arm"  # the kind name written to a policy directory's config.yaml
VELOCITY_KIND = "planar_arm_velocity"


@dataclass(frozen=True)
class PlanarArmTaskSpace:
    """End-effector (x, y) of a 2-joint planar arm (vlash.sim): joints [..., 2] <-> positions [..., 2]."""

    link_lengths: tuple[float, float]  # shoulder->elbow, elbow->end effector (world units)
    joint_limits: tuple[tuple[float, float], tuple[float, float]]  # [rad] (low, high) per joint
    kind: ClassVar[str] = KIND  # the transform kind a policy directory names
    robot_dims: ClassVar[int] = 2  # joint values per state / action vector
    model_dims: ClassVar[int] = 2  # end-effector (x, y) per vector

    def __post_init__(self) -> None:
        links = tuple(float(x) for x in self.link_lengths)
        limits = tuple((float(lo), float(hi)) for lo, hi in self.joint_limits)
        if len(links) != 2 or not all(x > 0 for x in links):
            raise ShapeError(f"link_lengths must be 2 positive lengths, got {self.link_lengths!r}")
        if len(limits) != 2 or not all(lo < hi for lo, hi in limits):
            raise ShapeError(f"joint_limits must be 2 (low, high) pairs with low < high, got {self.joint_limits!r}")
        object.__setattr__(self, "link_lengths", links)
        object.__setattr__(self, "joint_limits", limits)

    @classmethod
    def from_arm(cls, arm: Any) -> PlanarArmTaskSpace:
        """From a `vlash.sim.config.ArmConfig` (its link lengths and joint limits)."""
        return cls(tuple(arm.link_lengths), tuple(tuple(lim) for lim in arm.joint_limits))

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> PlanarArmTaskSpace:
        if doc.get("kind") != KIND:
            raise ShapeError(f"a planar-arm task space has kind {KIND!r}, got {doc.get('kind')!r}")
        try:
            return cls(tuple(doc["link_lengths"]), tuple(tuple(lim) for lim in doc["joint_limits"]))
        except (KeyError, TypeError) as exc:
            raise ShapeError(f"planar-arm task space needs link_lengths and joint_limits, got {dict(doc)!r}") from exc

    def to_dict(self) -> dict[str, Any]:
        limits = [list(pair) for pair in self.joint_limits]
        return {"kind": KIND, "link_lengths": list(self.link_lengths), "joint_limits": limits}

    def to_model(self, joints: np.ndarray) -> np.ndarray:
        """End-effector positions float32 [..., 2] of joint vectors [..., 2] (states or joint-position actions)."""
        joints = np.asarray(joints)
        if joints.shape[-1:] != (2,):
            raise ShapeError(f"a planar-arm task space needs 2 joint values per vector, got shape {joints.shape}")
        return kinematics.forward(joints, self.link_lengths).astype(np.float32)

    def actions_to_model(self, actions: np.ndarray, start: np.ndarray | None = None) -> np.ndarray:
        """Joint-position actions [..., n, 2] -> end-effector positions (each row on its own; `start` unused)."""
        return self.to_model(actions)

    def to_robot(self, positions: np.ndarray, start: np.ndarray) -> np.ndarray:
        """Joint-position chunks float32 [..., H, 2] reaching positions [..., H, 2], all on the elbow branch of
        `start` [..., 2] (the joint state the chunk starts from); joint 0 of step k is the 2*pi-equivalent nearest
        to step k - 1's (step 0: the start's), so a chunk never jumps a turn."""
        positions, start = np.asarray(positions, np.float64), np.asarray(start, np.float64)
        if positions.shape[-1:] != (2,) or positions.ndim < 2 or start.shape != positions.shape[:-2] + (2,):
            raise ShapeError(f"need positions [..., H, 2] and start [..., 2], got {positions.shape} and {start.shape}")
        limits = np.asarray(self.joint_limits)
        flat, starts = positions.reshape(-1, *positions.shape[-2:]), start.reshape(-1, 2)
        out = np.empty(flat.shape, dtype=np.float32)
        # one (2,) vector at a time: kinematics.inverse's scalar path, ~8x faster per chunk than its batched one
        # on [B, 2] (this runs once per chunk on the serving path)
        for row, (chunk, first) in enumerate(zip(flat, starts, strict=True)):
            ref = first.copy()  # ref[1] keeps the start's elbow: a step at full extension (elbow 0) has no branch
            for k, xy in enumerate(chunk):
                out[row, k] = step = kinematics.inverse(xy, self.link_lengths, ref, limits)
                ref[0] = step[0]
        return out.reshape(positions.shape)


@dataclass(frozen=True)
class PlanarArmVelocityTaskSpace:
    """End-effector (x, y) velocities of the planar arm: joint velocities [..., H, 2] <-> (x, y) velocities
    [..., H, 2] along the path from a start state; states map to end-effector positions."""

    positions: PlanarArmTaskSpace  # the arm's geometry, and its inverse kinematics along a path
    control_dt: float  # [s] one action's duration: velocities integrate over it
    kind: ClassVar[str] = VELOCITY_KIND
    robot_dims: ClassVar[int] = 2
    model_dims: ClassVar[int] = 2

    def __post_init__(self) -> None:
        if not (np.isfinite(self.control_dt) and self.control_dt > 0):
            raise ShapeError(f"control_dt must be a positive number of seconds, got {self.control_dt!r}")
        object.__setattr__(self, "control_dt", float(self.control_dt))

    @classmethod
    def from_arm(cls, arm: Any) -> PlanarArmVelocityTaskSpace:
        """From a `vlash.sim.config.ArmConfig` (its geometry and control period)."""
        return cls(PlanarArmTaskSpace.from_arm(arm), arm.control_dt)

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> PlanarArmVelocityTaskSpace:
        if doc.get("kind") != VELOCITY_KIND:
            raise ShapeError(f"a planar-arm velocity task space has kind {VELOCITY_KIND!r}, got {doc.get('kind')!r}")
        if "control_dt" not in doc:
            raise ShapeError(f"planar-arm velocity task space needs control_dt, got {dict(doc)!r}")
        return cls(PlanarArmTaskSpace.from_dict({**doc, "kind": KIND}), doc["control_dt"])

    def to_dict(self) -> dict[str, Any]:
        return {**self.positions.to_dict(), "kind": VELOCITY_KIND, "control_dt": self.control_dt}

    def to_model(self, joints: np.ndarray) -> np.ndarray:
        """End-effector positions float32 [..., 2] of joint states [..., 2]."""
        return self.positions.to_model(joints)

    def actions_to_model(self, actions: np.ndarray, start: np.ndarray | None = None) -> np.ndarray:
        """End-effector velocities float32 [..., n, 2] of joint velocities [..., n, 2] run from joint state `start`
        [..., 2]: the joint path start + dt * cumsum(actions), its end-effector positions differenced over dt."""
        actions = np.asarray(actions, np.float64)
        if start is None:
            raise ShapeError("velocity actions map to the end effector along a path: pass the state they start from")
        start = np.asarray(start, np.float64)
        if actions.shape[-1:] != (2,) or actions.ndim < 2 or start.shape[-1:] != (2,):
            raise ShapeError(f"need actions [..., n, 2] and start [..., 2], got {actions.shape} and {start.shape}")
        path = start[..., None, :] + self.control_dt * np.cumsum(actions, axis=-2)
        ee = kinematics.forward(np.concatenate([np.broadcast_to(start[..., None, :], path[..., :1, :].shape), path],
                                               axis=-2), self.positions.link_lengths)  # fmt: skip
        return (np.diff(ee, axis=-2) / self.control_dt).astype(np.float32)

    def to_robot(self, chunk: np.ndarray, start: np.ndarray) -> np.ndarray:
        """Joint velocities float32 [..., H, 2] of an end-effector velocity chunk [..., H, 2] run from joint state
        `start` [..., 2]: positions fk(start) + dt * cumsum(chunk), inverse kinematics on the start's elbow branch
        (PlanarArmTaskSpace.to_robot), joint differences over dt."""
        chunk, start = np.asarray(chunk, np.float64), np.asarray(start, np.float64)
        if chunk.shape[-1:] != (2,) or chunk.ndim < 2 or start.shape != chunk.shape[:-2] + (2,):
            raise ShapeError(f"need a chunk [..., H, 2] and start [..., 2], got {chunk.shape} and {start.shape}")
        ee = kinematics.forward(start, self.positions.link_lengths)[..., None, :]
        joints = self.positions.to_robot(ee + self.control_dt * np.cumsum(chunk, axis=-2), start)
        path = np.concatenate([start[..., None, :], joints.astype(np.float64)], axis=-2)
        return (np.diff(path, axis=-2) / self.control_dt).astype(np.float32)
