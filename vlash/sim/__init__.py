"""2-D simulation suite for evaluating real-time VLA execution (numpy physics, OpenCV camera, no GL).

    from vlash.sim import make_env, load_sim_settings, TASKS
    env = make_env("whack", seed=0, image_size=96)
    obs, info = env.reset(seed=123)
    obs, reward, terminated, truncated, info = env.step(env.expert_action())
    env = make_env("hold", settings=load_sim_settings("configs/eval/velocity-load.yaml"))

Tasks: reach, track, whack, intercept, hold (see vlash/sim/tasks/). Action interfaces: position, velocity,
ee_delta (vlash.sim.interfaces); settings files: vlash.sim.settings. The environment needs the `sim` extra
(OpenCV and gymnasium, never torch); the arm's kinematics and its task space (vlash.planar_arm,
vlash.policies.processing.task_space) are numpy only, so a policy server can load a task-space policy without the
simulator's dependencies: the names below are imported on first use. Gymnasium ids (registered on first
use of the environment): vlash/Reach-v0, vlash/Track-v0, vlash/Whack-v0, vlash/Intercept-v0, vlash/Hold-v0.
"""

from __future__ import annotations

import importlib
from typing import Any

# public name -> module that defines it (imported on first access, PEP 562)
_LAZY: dict[str, str] = {
    "ACTION_KIND": "vlash.sim.interfaces",
    "INTERFACES": "vlash.sim.interfaces",
    "DisturbanceConfig": "vlash.sim.disturbance",
    "SimSettings": "vlash.sim.settings",
    "load_sim_settings": "vlash.sim.settings",
    "HoldConfig": "vlash.sim.tasks",
    "ArmState": "vlash.sim.arm",
    "ArmConfig": "vlash.sim.config",
    "PlannerConfig": "vlash.sim.config",
    "TASKS": "vlash.sim.env",
    "ArmEnv": "vlash.sim.env",
    "SimSnapshot": "vlash.sim.env",
    "make_env": "vlash.sim.env",
    "GYM_IDS": "vlash.sim.env",
    "SimActionError": "vlash.sim.errors",
    "SimConfigError": "vlash.sim.errors",
    "SimError": "vlash.sim.errors",
    "SimStateError": "vlash.sim.errors",
    "InterceptConfig": "vlash.sim.tasks",
    "ReachConfig": "vlash.sim.tasks",
    "TrackConfig": "vlash.sim.tasks",
    "WhackConfig": "vlash.sim.tasks",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'vlash.sim' has no attribute {name!r}")
    value = getattr(importlib.import_module(_LAZY[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
