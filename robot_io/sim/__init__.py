"""2-D simulation suite for evaluating real-time VLA execution (numpy physics, OpenCV camera, no GL).

    from robot_io.sim import make_env, TASKS
    env = make_env("whack", seed=0, image_size=96)
    obs, info = env.reset(seed=123)
    obs, reward, terminated, truncated, info = env.step(env.expert_action())

Tasks: reach, track, whack, intercept (see robot_io/sim/tasks/). Uses numpy, OpenCV and gymnasium,
never torch. Gymnasium ids: vlash/Reach-v0, vlash/Track-v0, vlash/Whack-v0, vlash/Intercept-v0.
"""

import gymnasium as gym

from robot_io.sim.arm import ArmState
from robot_io.sim.config import ArmConfig, PlannerConfig
from robot_io.sim.env import TASKS, ArmEnv, SimSnapshot, make_env
from robot_io.sim.errors import SimActionError, SimConfigError, SimError, SimStateError
from robot_io.sim.tasks import InterceptConfig, ReachConfig, TrackConfig, WhackConfig

GYM_IDS: dict[str, str] = {task: f"vlash/{task.capitalize()}-v0" for task in TASKS}

for _task, _env_id in GYM_IDS.items():
    if _env_id not in gym.registry:
        gym.register(id=_env_id, entry_point="robot_io.sim.env:ArmEnv", kwargs={"task": _task})

__all__ = [
    "GYM_IDS",
    "TASKS",
    "ArmConfig",
    "ArmEnv",
    "ArmState",
    "InterceptConfig",
    "PlannerConfig",
    "ReachConfig",
    "SimActionError",
    "SimConfigError",
    "SimError",
    "SimSnapshot",
    "SimStateError",
    "TrackConfig",
    "WhackConfig",
    "make_env",
]
