"""SimRobot: the vlash.sim arm as a Robot, stepped once per control tick (OpenCV/gymnasium loaded on connect)."""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from robot_io.robots.base import action_vector
from robot_io.specs import ArraySpec
from vlash.sim.interfaces import ACTION_KIND
from vlash.sim.observations import check_observe, extra_names

RECENT_EPISODES = 1000  # outcomes kept in SimRobot.episodes (each holds its events)
SIM_CAMERA = "base_0_rgb"  # pi0.5's name for the base (third-person) view: the top-down camera is one


@dataclass
class EpisodeOutcome:
    """One finished simulated episode."""

    seed: int
    success: bool
    steps: int
    events: list[dict] = field(default_factory=list)


class SimRobot:
    """A simulated task (reach, track, whack, intercept, hold): each `send_action` is one env.step.

    `settings` (vlash.sim.SimSettings, e.g. from load_sim_settings) configures the simulator: its action
    interface decides what an action is and what the state begins with, its `observe` which extras follow
    (`action_interface`, `action_kind`, `state_names`, `action_names`: the action acts on the leading entries);
    `env_options` are more make_env arguments and override it. Episodes restart automatically
    (seed, seed + 1, ...); `episode_count` and `successes` count them all, and `episodes` keeps the outcomes of
    the last RECENT_EPISODES (a long run's memory stays bounded). The env is exposed as `env` (a privileged
    scripted expert can plan from it, see vlash.sim.oracle.expert_planner)."""

    holds_position = True  # stepped by send_action: nothing moves while no command arrives

    def __init__(
        self,
        task: str = "reach",
        seed: int = 0,
        image_size: int | None = None,
        camera: str = SIM_CAMERA,
        env_options: dict[str, Any] | None = None,
        settings: Any = None,
    ) -> None:
        self.task, self.seed, self.camera = task, int(seed), camera
        self.settings = settings  # vlash.sim.SimSettings; None: the simulator's defaults
        self.env_options = dict(env_options or {})  # more make_env arguments (arm, planner, task_config, ...)
        if image_size is not None:
            self.env_options["image_size"] = int(image_size)
        self.image_size = int(self._setting("image_size", 96))
        self.action_interface: str = self._setting("action_interface", "position")
        if self.action_interface not in ACTION_KIND:
            raise ValueError(
                f"SimRobot: action_interface must be one of {list(ACTION_KIND)}, got {self.action_interface!r}"
            )
        self.observe = check_observe(self._setting("observe", ()))  # extras after the interface's state entries
        self.env: Any = None
        self.episodes: deque[EpisodeOutcome] = deque(maxlen=RECENT_EPISODES)
        self.episode_count = 0  # finished episodes, all of them
        self.successes = 0  # successful ones
        self._obs: dict | None = None
        self._episode_seed = self.seed
        self._events: list[dict] = []
        self._fresh = False
        self._num_joints = 2

    @classmethod
    def from_spec(cls, spec: str, **kwargs: Any) -> SimRobot:
        """ "sim:<task>" or "sim:<task>:<seed>" (e.g. "sim:reach", "sim:whack:3")."""
        parts = spec.split(":")
        if parts[0] != "sim" or len(parts) not in (2, 3) or not parts[1]:
            raise ValueError(f"robot spec must be 'sim:<task>[:<seed>]', got {spec!r}")
        if len(parts) == 3:
            try:
                kwargs["seed"] = int(parts[2])
            except ValueError:
                raise ValueError(f"robot spec {spec!r}: seed {parts[2]!r} is not an integer") from None
        return cls(task=parts[1], **kwargs)

    def _setting(self, name: str, default: Any) -> Any:
        """A simulator setting as the env will see it: env_options first, then settings, then the default."""
        if name in self.env_options:
            return self.env_options[name]
        return default if self.settings is None else getattr(self.settings, name)

    # ------------------------------------------------------------------ features
    @property
    def action_kind(self) -> str:
        """How an executor applies the actions: "absolute" (joint targets), "velocity" or "delta" (EE increments)."""
        return ACTION_KIND[self.action_interface]

    @property
    def state_names(self) -> list[str]:
        """The state's entries: joint positions ("joint0", ...) or the end effector's ("ee_x", "ee_y"), then the
        extras `observe` lists ("joint0_velocity", ..., "target_x", ...: vlash.sim.observations)."""
        return self.action_names + extra_names(self.observe, self._num_joints)

    @property
    def action_names(self) -> list[str]:
        """Each action entry acts on the state entry of the same name (as a target, a velocity or an increment)."""
        if self.action_interface == "ee_delta":
            return ["ee_x", "ee_y"]
        return [f"joint{i}" for i in range(self._num_joints)]

    @property
    def observation_features(self) -> dict[str, ArraySpec]:
        s = self.image_size
        return {
            "state": ArraySpec("state", (len(self.state_names),), "float32"),
            f"images.{self.camera}": ArraySpec(self.camera, (s, s, 3), "uint8"),
        }

    @property
    def action_features(self) -> dict[str, ArraySpec]:
        return {"action": ArraySpec("action", (self._num_joints,), "float32")}

    @property
    def joint_limits(self) -> np.ndarray:
        """[J, 2] low/high joint limits (radians)."""
        return self._require_env().joint_limits

    @property
    def action_limits(self) -> np.ndarray:
        """[A, 2] low/high of an action (joint limits, joint speed limits or end-effector step bounds)."""
        space = self._require_env().action_space
        return np.stack([space.low, space.high], axis=1).astype(np.float64)

    @property
    def dt(self) -> float:
        return float(self._require_env().dt)

    # ------------------------------------------------------------------ lifecycle
    def connect(self) -> None:
        from vlash.sim import make_env  # extra: sim; gymnasium + OpenCV: only when a simulated robot is used

        self.env = make_env(self.task, seed=self.seed, settings=self.settings, **self.env_options)
        self._num_joints = self.env.num_joints
        self.action_interface = self.env.action_interface
        if self.env.state_names != self.state_names:  # the names said before connecting must stay true
            raise RuntimeError(f"SimRobot: the env's state is {self.env.state_names}, not {self.state_names}")
        self._reset()

    def disconnect(self) -> None:
        self.env = None

    def get_observation(self) -> dict[str, Any]:
        env = self._require_env()
        obs = {
            "state": np.asarray(self._obs["state"], np.float32).copy(),
            "images": {self.camera: self._obs["image"]},
            "capture_time_ns": time.time_ns(),
            "prompt": env.instruction,
            "episode_start": self._fresh,
            "sim_step": env.step_index,
        }
        self._fresh = False
        return obs

    def send_action(self, action: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        env = self._require_env()
        command = action_vector(action, self.action_features["action"])
        sent = np.clip(command, env.action_space.low, env.action_space.high).astype(np.float32)
        self._obs, _, terminated, truncated, info = env.step(sent)
        self._events.extend(info["events"])
        if terminated or truncated:
            success = bool(info["success"])
            self.episodes.append(EpisodeOutcome(self._episode_seed, success, env.step_index, self._events))
            self.episode_count += 1
            self.successes += success
            self._episode_seed += 1
            self._reset()
        return {"action": sent}

    def _reset(self) -> None:
        self._obs, info = self.env.reset(seed=self._episode_seed)
        self._events = list(info["events"])
        self._fresh = True

    def _require_env(self) -> Any:
        if self.env is None:
            raise RuntimeError("SimRobot: call connect() first")
        return self.env
