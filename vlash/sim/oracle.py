"""The scripted expert as a chunk policy: an Infer -> a chunk, privileged (it reads the simulated world).

One oracle for every use: `vlash eval --policy oracle` and `expert_planner` below (tests, demos). It
answers a request as a perfect policy trained for that request would:
    committed prefix (prefix, faster): the prefix comes back; the rest continues the plan from the prefix's end,
        its last position and velocity, starting len(prefix) indices after the observation
    future state (vlash): planned from the future state, starting d steps after the observation (what a policy
        trained with future-state offsets learns to anticipate), at the velocity the committed actions have at
        the switch. That velocity is read from `commanded(step)`, the robot's command at a control step (the
        running chunk's, a privileged view the harness gives); without it, the measured velocity
    otherwise (sync, naive, rtc, ensemble): planned from the request's state at the measured velocity; guidance
        is ignored (the expert's plan is already the one guided inpainting would pull toward)
Actions come in the env's action interface (vlash.sim: position targets, velocities, end-effector increments).
A state with extras after the interface's entries (SimSettings.observe) is planned from its leading entries, the
ones the actions act on; the expert reads the world itself and needs none of the extras.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from robot_io.protocol import CameraSpec, Infer, Metadata
from vlash.sim.policy_link import Planner

Commanded = Callable[[int], "np.ndarray | None"]  # control step -> the action the robot commands then (or None)


class ExpertPlanner:
    """`planner(infer)` -> float32 [H, J] actions of the env's scripted expert (module doc)."""

    def __init__(
        self, env: Any, chunk_length: int = 50, commanded: Commanded | None = None, action_stride: int = 1
    ) -> None:
        self.env, self.chunk_length, self.commanded, self.q = env, chunk_length, commanded, action_stride
        self.interface = getattr(env, "action_interface", "position")
        self.action_dim = len(env.action_space.low)  # the leading state entries the actions act on

    def __call__(self, infer: Infer) -> np.ndarray:
        h, state = self.chunk_length, np.asarray(infer.state, np.float64)[: self.action_dim]
        if infer.prefix is not None and len(infer.prefix):
            prefix = np.asarray(infer.prefix, np.float64)
            c = len(prefix)
            before_last = prefix[-2] if c >= 2 else self._command(infer.step_index - 1)
            start, velocity = self._after(state, prefix, before_last)
            rest = self.env.expert_chunk(h - c, state=start, start_offset=c, velocity=velocity)
            return np.concatenate([prefix, rest]).astype(np.float32)
        if infer.future_state is not None:
            d = infer.delay_steps // self.q  # delay_steps counts chunk indices: d control steps * q
            velocity = self._velocity_at(infer.step_index + d)
            future = np.asarray(infer.future_state, np.float64)[: self.action_dim]
            return self.env.expert_chunk(h, state=future, start_offset=d, velocity=velocity).astype(np.float32)
        return self.env.expert_chunk(h, state=state).astype(np.float32)

    def _command(self, step: int) -> np.ndarray | None:
        if self.commanded is None:
            return None
        action = self.commanded(step)
        return None if action is None else np.asarray(action, np.float64)

    def _after(self, state: np.ndarray, prefix: np.ndarray, before_last: np.ndarray | None):
        """(planning state, plan-state joint velocity or None) at the end of a committed prefix (chunk indices)."""
        dt = self.env.dt
        if self.interface == "velocity":
            return state + dt * prefix.sum(axis=0), prefix[-1]
        if self.interface == "ee_delta":
            return state + prefix.sum(axis=0), None
        return prefix[-1], None if before_last is None else (prefix[-1] - before_last) / dt

    def _velocity_at(self, switch_step: int) -> np.ndarray | None:
        """The committed commands' joint velocity per chunk index at `switch_step` (None: unknown; the measured
        one is used). One control step runs q indices."""
        if self.interface == "ee_delta":
            return None
        last = self._command(switch_step - 1)
        if self.interface == "velocity":
            return None if last is None else last / self.q  # a step commands the sum of its q rates
        before = self._command(switch_step - 2)
        if last is None or before is None:
            return None
        return (last - before) / (self.q * self.env.dt)


def expert_planner(robot: Any, chunk_length: int = 50) -> Planner:
    """The scripted-expert oracle (vlash.sim.oracle.ExpertPlanner, as `vlash eval --policy oracle`) of a connected
    SimRobot, without the privileged view of the running chunk (future-state requests get the measured velocity)."""
    return lambda infer: ExpertPlanner(robot.env, chunk_length)(infer)


def sim_metadata(robot: Any, chunk_length: int = 50, rate_hz: float = 30.0) -> Metadata:
    """Metadata of an in-process policy for a connected SimRobot (its camera, its state, its joints)."""
    s = robot.image_size
    return Metadata(
        model_id="scripted-expert",
        cameras=[CameraSpec(robot.camera, s, s)],
        state_dim=len(robot.state_names),
        action_dim=len(robot.action_names),
        chunk_length=chunk_length,
        control_rate_hz=rate_hz,
        precision="fp32",
        engine="in-process",
        num_steps=10,
        schedule="constant",
        relative_actions=False,
    )
