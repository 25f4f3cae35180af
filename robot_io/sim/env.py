"""ArmEnv: the gymnasium environment of the suite (numpy physics, OpenCV camera, scripted expert)."""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np

from robot_io.sim import kinematics
from robot_io.sim.arm import ArmState, Servo
from robot_io.sim.config import ArmConfig, PlannerConfig
from robot_io.sim.errors import SimActionError, SimConfigError, SimStateError
from robot_io.sim.expert import expert_plan
from robot_io.sim.planner import PlanLimits
from robot_io.sim.render import Renderer
from robot_io.sim.tasks import TASK_TYPES

TASKS: tuple[str, ...] = ("reach", "track", "whack", "intercept")


@dataclass
class SimSnapshot:
    """Everything needed to resume an episode exactly (picklable, small)."""

    task: str  # task name the snapshot belongs to
    step_index: int  # control steps since reset
    arm: ArmState  # servo state, including the last two commands
    world: Any  # the task's world (targets, schedule, progress)
    rng_state: dict  # bit-generator state of env.np_random
    done: bool  # the episode had terminated or been truncated


class ArmEnv(gym.Env):
    """Planar 2-joint arm; obs {"image": uint8 [S, S, 3] RGB, "state": float32 [J] joint positions}.

    Actions are absolute joint position targets [J] (clipped to the joint limits; info reports it).
    Sparse reward: 1.0 on the last step of a successful episode (reach/intercept terminate when
    solved, track/whack are judged at max_steps), else 0.0.
    """

    metadata = {"render_modes": ["rgb_array"], "render_fps": 30}

    def __init__(
        self,
        task: str = "reach",
        seed: int | None = 0,
        image_size: int = 96,
        arm: ArmConfig | None = None,
        planner: PlannerConfig | None = None,
        task_config: Any = None,
        render_mode: str | None = None,
    ) -> None:
        if task not in TASK_TYPES:
            raise SimConfigError(f"unknown task {task!r}; choose one of {TASKS}")
        if render_mode not in (None, "rgb_array"):
            raise SimConfigError(f"render_mode must be None or 'rgb_array', got {render_mode!r}")
        self.arm_config = arm or ArmConfig()
        self.limits = PlanLimits.from_configs(self.arm_config, planner or PlannerConfig())
        task_type = TASK_TYPES[task]
        config = task_config if task_config is not None else task_type.config_type()
        if not isinstance(config, task_type.config_type):
            raise SimConfigError(f"task_config for {task!r} must be {task_type.config_type.__name__}, got {config!r}")
        self.task = task_type(config, self.arm_config, self.limits)
        self.render_mode = render_mode
        self._servo = Servo(self.arm_config)
        self._renderer = Renderer(image_size, self.arm_config)
        self._init_seed = seed
        self._state: ArmState | None = None
        self._world: Any = None
        self._step = 0
        self._done = False
        self._image: np.ndarray | None = None
        low, high = (self._servo.limits[:, i].astype(np.float32) for i in (0, 1))
        self.action_space = gym.spaces.Box(low, high, dtype=np.float32)
        self.observation_space = gym.spaces.Dict(
            {
                "image": gym.spaces.Box(0, 255, (image_size, image_size, 3), dtype=np.uint8),
                "state": gym.spaces.Box(low, high, dtype=np.float32),
            }
        )

    # ----------------------------------------------------------------- properties
    @property
    def instruction(self) -> str:
        return self._require_world().instruction

    @property
    def dt(self) -> float:
        return self.arm_config.control_dt

    @property
    def step_index(self) -> int:
        return self._step

    @property
    def max_steps(self) -> int:
        return self.task.max_steps

    @property
    def num_joints(self) -> int:
        return self.arm_config.num_joints

    @property
    def joint_limits(self) -> np.ndarray:
        return self._servo.limits.copy()

    @property
    def task_name(self) -> str:
        return self.task.name

    @property
    def world(self) -> Any:
        """The task's world (read it, do not modify it): targets, schedules, progress."""
        return self._require_world()

    @property
    def arm_state(self) -> ArmState:
        """A copy of the servo state (positions, velocities, last commands)."""
        return self._require_state().copy()

    # ----------------------------------------------------------------- gym API
    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        if seed is None and self._np_random is None:
            seed = self._init_seed
        super().reset(seed=seed)
        rng = self.np_random
        elbow = 1.0 if rng.uniform() < 0.5 else -1.0
        q_init = np.array([rng.uniform(-math.pi, math.pi), elbow * rng.uniform(0.7, 2.2)])
        self._state = ArmState.at_rest(q_init)
        self._world = self.task.sample(rng, q_init)
        self._step, self._done = 0, False
        events = self.task.initial_events(self._world)
        return self._observe(), self._info(events, clipped=False)

    def step(self, action: Any) -> tuple[dict, float, bool, bool, dict]:
        state = self._require_state()
        if self._done:
            raise SimStateError("step() after the episode ended; call reset()")
        command = self._validate_action(action)
        clipped_command = self._servo.clip_command(command)
        self._servo.step(state, clipped_command)
        self._step += 1
        ee_xy = kinematics.forward(state.q, self.arm_config.link_lengths)
        events = self.task.update(self._world, self._step, ee_xy)
        terminated = self.task.terminated(self._world)
        truncated = not terminated and self._step >= self.max_steps
        self._done = terminated or truncated
        reward = float(self._done and self.task.success(self._world))
        info = self._info(events, clipped=bool(np.any(clipped_command != command)))
        return self._observe(), reward, terminated, truncated, info

    def render(self) -> np.ndarray | None:
        if self.render_mode != "rgb_array":
            return None
        return None if self._image is None else self._image.copy()

    # ----------------------------------------------------------------- snapshots and expert
    def snapshot(self) -> SimSnapshot:
        """A deep copy of the arm, the world and the rng; restore() returns to it exactly."""
        return SimSnapshot(
            task=self.task.name,
            step_index=self._step,
            arm=self._require_state().copy(),
            world=copy.deepcopy(self._world),
            rng_state=copy.deepcopy(self.np_random.bit_generator.state),
            done=self._done,
        )

    def restore(self, snapshot: SimSnapshot) -> dict:
        """Go back to `snapshot` (taken from an env of the same task); returns the observation there."""
        if not isinstance(snapshot, SimSnapshot) or snapshot.task != self.task.name:
            raise SimStateError(f"restore: expected a SimSnapshot of task {self.task.name!r}, got {snapshot!r:.80}")
        self._state = snapshot.arm.copy()
        self._world = copy.deepcopy(snapshot.world)
        self._step, self._done = snapshot.step_index, snapshot.done
        self.np_random.bit_generator.state = copy.deepcopy(snapshot.rng_state)
        return self._observe()

    def expert_chunk(
        self,
        horizon: int,
        state: np.ndarray | None = None,
        start_offset: int = 0,
        velocity: np.ndarray | None = None,
        info_delay: int = 0,
    ) -> np.ndarray:
        """The scripted expert's plan: float32 [horizon, J] absolute joint targets for control steps
        step_index + start_offset + i, planned as if the arm's commanded joint position at the start
        were `state`, moving at `velocity`. Defaults: the last command (the servo tracks it; it is
        within ~0.03 rad of obs["state"]) and the measured joint velocity. Planning from the last
        command rather than the measured position keeps the servo's tracking lag out of the plan
        (replanning from measured positions feeds the lag back through the servo's feed-forward).
        Only what is visible at step_index - info_delay is used, never later pop-ups (info_delay > 0
        gives an expert that perceives events late: a pure reaction latency). The env is not modified."""
        arm = self._require_state()
        if not (isinstance(horizon, int | np.integer) and horizon >= 1):
            raise SimConfigError(f"expert_chunk: horizon must be an int >= 1, got {horizon!r}")
        if not (isinstance(start_offset, int | np.integer) and start_offset >= 0):
            raise SimConfigError(f"expert_chunk: start_offset must be an int >= 0, got {start_offset!r}")
        c = arm.command if state is None else self._validate_action(state, "state")
        v = arm.qd if velocity is None else self._validate_action(velocity, "velocity")
        if not (isinstance(info_delay, int | np.integer) and info_delay >= 0):
            raise SimConfigError(f"expert_chunk: info_delay must be an int >= 0, got {info_delay!r}")
        first, visible = self._step + int(start_offset), self._step - int(info_delay)
        plan = expert_plan(self.task, self._world, self.limits, c, v, first, visible, int(horizon))
        return plan.astype(np.float32)

    def expert_action(self) -> np.ndarray:
        """The closed-loop expert's next action: expert_chunk(1)[0]."""
        return self.expert_chunk(1)[0]

    # ----------------------------------------------------------------- helpers
    def _require_state(self) -> ArmState:
        if self._state is None:
            raise SimStateError("call reset() first")
        return self._state

    def _require_world(self) -> Any:
        self._require_state()
        return self._world

    def _validate_action(self, action: Any, name: str = "action") -> np.ndarray:
        value = np.asarray(action, dtype=np.float64)
        if value.shape != (self.num_joints,):
            raise SimActionError(f"{name}: expected shape ({self.num_joints},), got {value.shape}")
        if not np.all(np.isfinite(value)):
            raise SimActionError(f"{name}: contains NaN or inf: {value.tolist()}")
        return value

    def _observe(self) -> dict:
        state = self._require_state()
        self._image = self._renderer.draw(state.q, self.task.draw_items(self._world, self._step))
        return {"image": self._image, "state": state.q.astype(np.float32)}

    def _info(self, events: list, clipped: bool) -> dict:
        state = self._require_state()
        target = self.task.target_xy(self._world, self._step)
        return {
            "success": bool(self.task.success(self._world)),
            "ee_xy": kinematics.forward(state.q, self.arm_config.link_lengths),
            "target_xy": None if target is None else np.asarray(target, dtype=np.float64),
            "events": events,
            "step": self._step,
            "action_clipped": clipped,
            **self.task.metrics(self._world),
        }


def make_env(task: str, seed: int | None = 0, image_size: int = 96, **kwargs: Any) -> ArmEnv:
    """Build an ArmEnv for one of TASKS; extra keyword arguments go to ArmEnv (arm, planner, task_config)."""
    return ArmEnv(task=task, seed=seed, image_size=image_size, **kwargs)


GYM_IDS: dict[str, str] = {task: f"vlash/{task.capitalize()}-v0" for task in TASKS}

for _task, _env_id in GYM_IDS.items():
    if _env_id not in gym.registry:
        gym.register(id=_env_id, entry_point="robot_io.sim.env:ArmEnv", kwargs={"task": _task})
