"""State/action transforms: a policy that sees and predicts vectors in another space than the robot's joints.

The robot always sends joint states and receives chunks of joint actions (positions or velocities). A transform
maps states (and committed or guidance actions) into the model's space before normalization, and the model's chunk
back to joint actions after it. A policy directory names its transform in config.yaml:

    processor:
      transform: {kind: planar_arm, link_lengths: [0.5, 0.4], joint_limits: [[lo, hi], [lo, hi]]}

The implementations are numpy code of their own (the planar arm's in vlash.policies.processing.task_space, over
vlash.planar_arm, the kinematics the simulator's arm uses too): model and server code never import the simulator.
Only the kinds in `TRANSFORMS` load (a checkpoint directory cannot make the server run arbitrary code).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

import numpy as np

from vlash.errors import CheckpointError, ShapeError
from vlash.policies.processing.task_space import KIND, VELOCITY_KIND, PlanarArmTaskSpace, PlanarArmVelocityTaskSpace

# kind -> the class (its `from_dict(doc)` satisfies StateActionTransform)
TRANSFORMS: dict[str, type] = {
    KIND: PlanarArmTaskSpace,  # end-effector (x, y) of a 2-link planar arm (the simulator's)
    VELOCITY_KIND: PlanarArmVelocityTaskSpace,  # its end-effector (x, y) velocities, for joint-velocity actions
}


@runtime_checkable
class StateActionTransform(Protocol):
    kind: str  # the name config.yaml gives
    robot_dims: int  # entries of a robot state / action vector the transform reads
    model_dims: int  # entries of the vector the model sees and predicts

    def to_model(self, joints: np.ndarray) -> np.ndarray:
        """Robot states [..., robot_dims] -> model states [..., model_dims]."""
        ...

    def actions_to_model(self, actions: np.ndarray, start: np.ndarray | None = None) -> np.ndarray:
        """Robot actions [..., n, robot_dims] (committed or guidance rows of a chunk) -> model actions
        [..., n, model_dims]; `start` [..., robot_dims]: the joint state the chunk starts from (a transform whose
        actions depend on the path, e.g. velocities, needs it)."""
        ...

    def to_robot(self, chunk: np.ndarray, start: np.ndarray) -> np.ndarray:
        """A model chunk [..., H, model_dims] -> robot actions [..., H, robot_dims], starting from the joint
        state `start` [..., robot_dims] the chunk was planned from."""
        ...

    def to_dict(self) -> dict[str, Any]:
        """What config.yaml stores (with "kind")."""
        ...


def load_transform(doc: Mapping[str, Any], source: str = "config.yaml") -> StateActionTransform:
    """The transform `doc` describes; CheckpointError naming `source`."""
    if not isinstance(doc, Mapping):
        raise CheckpointError(f"{source}: processor.transform must be a mapping with a 'kind', got {doc!r}")
    kind = doc.get("kind")
    if kind not in TRANSFORMS:
        raise CheckpointError(f"{source}: unknown transform kind {kind!r}; known: {', '.join(sorted(TRANSFORMS))}")
    try:
        transform = TRANSFORMS[kind].from_dict(doc)
    except (ShapeError, ValueError) as exc:
        raise CheckpointError(f"{source}: transform {kind!r}: {exc}") from exc
    if not isinstance(transform, StateActionTransform):
        raise CheckpointError(f"{source}: {TRANSFORMS[kind].__name__} does not implement StateActionTransform")
    return transform
