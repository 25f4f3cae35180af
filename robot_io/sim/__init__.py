"""2-D simulation suite for evaluating real-time VLA execution (numpy physics, OpenCV camera, no GL).

    from robot_io.sim import make_env, load_sim_settings, TASKS
    env = make_env("whack", seed=0, image_size=96)
    obs, info = env.reset(seed=123)
    obs, reward, terminated, truncated, info = env.step(env.expert_action())
    env = make_env("hold", settings=load_sim_settings("configs/eval/velocity-load.yaml"))

Tasks: reach, track, whack, intercept, hold (see robot_io/sim/tasks/). Action interfaces: position, velocity,
ee_delta (robot_io.sim.interfaces); settings files: robot_io.sim.settings. The environment needs the `sim` extra
(OpenCV and gymnasium, never torch); the arm's kinematics and its task space (robot_io.sim.kinematics,
robot_io.sim.task_space) are numpy only, so a policy server can load a task-space policy without the
simulator's dependencies: the names below are imported on first use. Gymnasium ids (registered on first
use of the environment): vlash/Reach-v0, vlash/Track-v0, vlash/Whack-v0, vlash/Intercept-v0, vlash/Hold-v0.
"""

from __future__ import annotations

import importlib
from typing import Any

# public name -> module that defines it (imported on first access, PEP 562)
_LAZY: dict[str, str] = {
    "ACTION_KIND": "robot_io.sim.interfaces",
    "INTERFACES": "robot_io.sim.interfaces",
    "DisturbanceConfig": "robot_io.sim.disturbance",
    "SimSettings": "robot_io.sim.settings",
    "load_sim_settings": "robot_io.sim.settings",
    "HoldConfig": "robot_io.sim.tasks",
    "ArmState": "robot_io.sim.arm",
    "ArmConfig": "robot_io.sim.config",
    "PlannerConfig": "robot_io.sim.config",
    "TASKS": "robot_io.sim.env",
    "ArmEnv": "robot_io.sim.env",
    "SimSnapshot": "robot_io.sim.env",
    "make_env": "robot_io.sim.env",
    "GYM_IDS": "robot_io.sim.env",
    "SimActionError": "robot_io.sim.errors",
    "SimConfigError": "robot_io.sim.errors",
    "SimError": "robot_io.sim.errors",
    "SimStateError": "robot_io.sim.errors",
    "InterceptConfig": "robot_io.sim.tasks",
    "ReachConfig": "robot_io.sim.tasks",
    "TrackConfig": "robot_io.sim.tasks",
    "WhackConfig": "robot_io.sim.tasks",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'robot_io.sim' has no attribute {name!r}")
    value = getattr(importlib.import_module(_LAZY[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
