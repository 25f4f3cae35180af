"""ArmEnv: the gymnasium environment of the suite (numpy physics, OpenCV camera, scripted expert)."""

from __future__ import annotations

import copy
import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np

from vlash import planar_arm as kinematics
from vlash.sim.arm import ArmState, Servo
from vlash.sim.config import ArmConfig, PlannerConfig
from vlash.sim.disturbance import Unmodelled
from vlash.sim.errors import SimActionError, SimConfigError, SimStateError
from vlash.sim.expert import expert_plan
from vlash.sim.interfaces import ACTION_KIND, make_interface
from vlash.sim.observations import Extras, extra_names
from vlash.sim.planner import PlanLimits
from vlash.sim.render import Renderer
from vlash.sim.settings import SimSettings
from vlash.sim.tasks import TASK_TYPES

TASKS: tuple[str, ...] = ("reach", "track", "whack", "intercept", "hold")
# SimSettings fields that make_env also takes as keyword arguments (task overrides go through `settings`)
SETTING_ARGUMENTS = tuple(f.name for f in dataclasses.fields(SimSettings) if f.name != "task")


@dataclass
class SimSnapshot:
    """Everything needed to resume an episode exactly (picklable, small)."""

    task: str  # task name the snapshot belongs to
    step_index: int  # control steps since reset
    arm: ArmState  # servo state, including the last two commands
    world: Any  # the task's world (targets, schedule, progress)
    rng_state: dict  # bit-generator state of env.np_random
    done: bool  # the episode had terminated or been truncated
    action_interface: str = "position"  # the env's action interface (a snapshot restores into the same one)
    unmodelled: tuple | None = None  # the episode's load and observation channel (Unmodelled.snapshot)


class ArmEnv(gym.Env):
    """Planar 2-joint arm; obs {"image": uint8 [S, S, 3] RGB, "state": float32 [2 + extras]}.

    `settings.action_interface` says what an action is and what "state" begins with (vlash.sim.interfaces):
    position (default): absolute joint targets [J], state = joint positions; velocity: joint velocities [J],
    state = joint positions; ee_delta: end-effector increments [2], state = end-effector [x, y]; then the extras
    `settings.observe` lists (vlash.sim.observations: joint velocities, the target; `state_names`). Out-of-range
    actions are clipped (info reports it). Sparse reward: 1.0 on the last step of a successful episode
    (reach/intercept/hold terminate when solved, track/whack are judged at max_steps), else 0.0.
    Explicit image_size / arm / planner arguments override those of `settings`.
    """

    metadata = {"render_modes": ["rgb_array"], "render_fps": 30}

    def __init__(
        self,
        task: str = "reach",
        seed: int | None = 0,
        image_size: int | None = None,
        arm: ArmConfig | None = None,
        planner: PlannerConfig | None = None,
        task_config: Any = None,
        render_mode: str | None = None,
        settings: SimSettings | None = None,
    ) -> None:
        if task not in TASK_TYPES:
            raise SimConfigError(f"unknown task {task!r}; choose one of {TASKS}")
        if render_mode not in (None, "rgb_array"):
            raise SimConfigError(f"render_mode must be None or 'rgb_array', got {render_mode!r}")
        if not isinstance(settings, SimSettings | None):
            raise SimConfigError(f"settings must be a SimSettings (see load_sim_settings), got {settings!r:.80}")
        given = {"image_size": image_size, "arm": arm, "planner": planner}
        settings = dataclasses.replace(settings or SimSettings(), **{k: v for k, v in given.items() if v is not None})
        self.settings = settings
        self.arm_config = settings.arm
        self.limits = PlanLimits.from_configs(self.arm_config, settings.planner)
        task_type = TASK_TYPES[task]
        if task_config is not None and not isinstance(task_config, task_type.config_type):
            raise SimConfigError(
                f"task_config for {task!r} must be {task_type.config_type.__name__}, got {task_config!r}"
            )
        self.task = task_type(
            settings.task_config(task, task_type.config_type, task_config), self.arm_config, self.limits
        )
        self.render_mode = render_mode
        self._servo = Servo(self.arm_config)
        self.interface = make_interface(settings.action_interface, self.arm_config, self._servo)
        self._renderer = Renderer(settings.image_size, self.arm_config)
        self._init_seed = seed
        self._state: ArmState | None = None
        self._world: Any = None
        self._step = 0
        self._done = False
        self._image: np.ndarray | None = None
        max_speed = self.arm_config.max_velocity + 1.01 * settings.disturbance.scale  # 1%: the load's sampled peak
        self._extras = Extras(settings.observe, self._servo.limits, max_speed)
        size, (low, high) = settings.image_size, self.interface.state_bounds()
        if self._extras:
            extra_low, extra_high = self._extras.bounds()
            low, high = np.concatenate([low, extra_low]), np.concatenate([high, extra_high])
        self._unmodelled = Unmodelled(
            settings.disturbance, settings.sensor_noise, settings.observation_latency, self.arm_config,
            self.task.max_steps * self.dt, (low, high),
        )  # fmt: skip
        self.action_space = gym.spaces.Box(*self.interface.action_bounds(), dtype=np.float32)
        self.observation_space = gym.spaces.Dict(
            {
                "image": gym.spaces.Box(0, 255, (size, size, 3), dtype=np.uint8),
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
    def action_interface(self) -> str:
        """What an action is: "position", "velocity" or "ee_delta" (vlash.sim.interfaces)."""
        return self.interface.name

    @property
    def action_kind(self) -> str:
        """How a chunk executor treats the actions: ACTION_KIND[action_interface]."""
        return ACTION_KIND[self.interface.name]

    @property
    def state_names(self) -> list[str]:
        """Names of the observed state's entries: the interface's (["joint0", "joint1"] or ["ee_x", "ee_y"]), then
        the extras' (["joint0_velocity", ..., "target_x", ...]: vlash.sim.observations)."""
        return self.interface.state_names + extra_names(self._extras.observe, self.num_joints)

    @property
    def action_names(self) -> list[str]:
        """The state entries the actions act on (as targets, velocities or increments): the leading ones."""
        return self.interface.state_names

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
        self.interface.reset(self._state)
        if seed is None and self._unmodelled.randomized:  # from a copy: the worlds of later resets stay the same
            seed = int(copy.deepcopy(self.np_random).integers(2**63 - 1))
        self._unmodelled.reset(seed)  # generators of its own, derived from the episode seed
        self._step, self._done = 0, False
        events = self.task.initial_events(self._world)
        return self._observe(), self._info(events, clipped=False)

    def step(self, action: Any) -> tuple[dict, float, bool, bool, dict]:
        state = self._require_state()
        if self._done:
            raise SimStateError("step() after the episode ended; call reset()")
        action = self._validate_action(action)
        clipped = self.interface.apply(state, action, self._unmodelled.bias(self._step))
        self._step += 1
        ee_xy = kinematics.forward(state.q, self.arm_config.link_lengths)
        events = self.task.update(self._world, self._step, ee_xy)
        terminated = self.task.terminated(self._world)
        truncated = not terminated and self._step >= self.max_steps
        self._done = terminated or truncated
        reward = float(self._done and self.task.success(self._world))
        info = self._info(events, clipped=clipped)
        return self._observe(), reward, terminated, truncated, info

    def render(self) -> np.ndarray | None:
        """The scene now (with observation latency, obs["image"] is older)."""
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
            action_interface=self.interface.name,
            unmodelled=self._unmodelled.snapshot(),
        )

    def restore(self, snapshot: SimSnapshot) -> dict:
        """Go back to `snapshot` (taken from an env of the same task); returns the observation there."""
        if not isinstance(snapshot, SimSnapshot) or snapshot.task != self.task.name:
            raise SimStateError(f"restore: expected a SimSnapshot of task {self.task.name!r}, got {snapshot!r:.80}")
        if snapshot.action_interface != self.interface.name:
            raise SimStateError(
                f"restore: snapshot of a {snapshot.action_interface!r} env into a {self.interface.name!r} one"
            )
        self._state = snapshot.arm.copy()
        if snapshot.unmodelled is not None:
            self._unmodelled.restore(snapshot.unmodelled)
        self._world = copy.deepcopy(snapshot.world)
        self._step, self._done = snapshot.step_index, snapshot.done
        self.np_random.bit_generator.state = copy.deepcopy(snapshot.rng_state)
        return self._observe(record=False)

    def expert_chunk(
        self,
        horizon: int,
        state: np.ndarray | None = None,
        start_offset: int = 0,
        velocity: np.ndarray | None = None,
        info_delay: int = 0,
    ) -> np.ndarray:
        """The scripted expert's plan as float32 [horizon, A] actions of the env's interface for control steps
        step_index + start_offset + i: joint targets c_i (position), (c_i - c_{i-1}) / dt (velocity) or
        fk(c_i) - fk(c_{i-1}) (ee_delta), planned from the planning state c_{-1} = `state` (in state units: joint
        positions, or an end-effector position that IK maps nearest the arm's configuration) moving at joint
        velocity `velocity`. Defaults: the last command (position, ee_delta: the servo tracks it within ~0.03 rad
        of the measured position; planning from measured positions would feed the servo's lag back through its
        feed-forward), the measured position (velocity: there is no position command), and the drive's joint
        velocity. Only what is visible at step_index - info_delay is used, never later pop-ups (info_delay > 0
        gives an expert that perceives events late: a pure reaction latency). The env is not modified."""
        arm = self._require_state()
        if not (isinstance(horizon, int | np.integer) and horizon >= 1):
            raise SimConfigError(f"expert_chunk: horizon must be an int >= 1, got {horizon!r}")
        if not (isinstance(start_offset, int | np.integer) and start_offset >= 0):
            raise SimConfigError(f"expert_chunk: start_offset must be an int >= 0, got {start_offset!r}")
        c = self.interface.plan_start(arm, None if state is None else self._validate_action(state, "state"))
        v = arm.qd if velocity is None else self._validate_action(velocity, "velocity")
        if not (isinstance(info_delay, int | np.integer) and info_delay >= 0):
            raise SimConfigError(f"expert_chunk: info_delay must be an int >= 0, got {info_delay!r}")
        first, visible = self._step + int(start_offset), self._step - int(info_delay)
        plan = expert_plan(self.task, self._world, self.limits, c, v, first, visible, int(horizon))
        return self.interface.to_actions(c, plan).astype(np.float32)

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
        if value.shape != self.action_space.shape:
            raise SimActionError(f"{name}: expected shape {self.action_space.shape}, got {value.shape}")
        if not np.all(np.isfinite(value)):
            raise SimActionError(f"{name}: contains NaN or inf: {value.tolist()}")
        return value

    def _observe(self, record: bool = True) -> dict:
        """The observation now; with noise or latency, the one the channel shows (record=False: without capturing)."""
        state = self._require_state()
        self._image = self._renderer.draw(state.q, self.task.draw_items(self._world, self._step))
        observed = self.interface.observe(state)
        if self._extras:
            target = self.task.target_xy(self._world, self._step)
            velocity = self.task.target_velocity(self._world, self._step)
            extras = self._extras.values(state, self._unmodelled.bias_at(self._step), target, velocity)
            observed = np.concatenate([observed, extras]).astype(np.float32)
        return self._unmodelled.observe({"image": self._image, "state": observed}, record)

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


def make_env(task: str, seed: int | None = 0, settings: SimSettings | None = None, **kwargs: Any) -> ArmEnv:
    """Build an ArmEnv for one of TASKS from `settings` (None: the defaults). Keyword arguments named like a
    SimSettings field (image_size, arm, planner, action_interface, disturbance, sensor_noise, observation_latency,
    observe) override it; task_config and render_mode go to ArmEnv."""
    if not isinstance(settings, SimSettings | None):
        raise SimConfigError(f"make_env: settings must be a SimSettings (see load_sim_settings), got {settings!r:.80}")
    fields = {name: kwargs.pop(name) for name in SETTING_ARGUMENTS if name in kwargs}
    if fields:
        settings = dataclasses.replace(settings or SimSettings(), **fields)
    return ArmEnv(task=task, seed=seed, settings=settings, **kwargs)


GYM_IDS: dict[str, str] = {task: f"vlash/{task.capitalize()}-v0" for task in TASKS}

for _task, _env_id in GYM_IDS.items():
    if _env_id not in gym.registry:
        gym.register(id=_env_id, entry_point="vlash.sim.env:ArmEnv", kwargs={"task": _task})
