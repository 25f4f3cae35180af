"""One simulated episode driven by the robot's own chunk executor (robot_io.executors) in simulated time.

Per control step k: the executor ticks with the observation of step k (it ingests the replies that arrived,
switches chunks, launches requests) and returns the action for k or None; robot_io.safety substitutes the hold
for None (the last command for position targets, zero for increments and velocities), exactly as on a robot; the
environment steps. The policy link is a SimulatedPolicyLink on a SimulatedClock whose replies arrive as LinkTiming
says (vlash/eval/link.py). Everything is deterministic given the episode seed.

The simulator's state may hold extras after the entries the actions act on (SimSettings.observe): the executor is
told where the action's entries are (`state_index`, as `vlash run` tells it from the robot's names), so the future
state rolls those forward and keeps the extras as observed, and the hold is taken from them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from robot_io.control import SimulatedClock
from robot_io.executors import ExecutorConfig, make_executor
from robot_io.protocol import CameraSpec, Metadata
from robot_io.run_trace import TraceSink
from robot_io.safety import Safety, SafetyConfig
from vlash.eval.link import LinkTiming
from vlash.eval.policies import ChunkPolicy
from vlash.sim.interfaces import ACTION_KIND
from vlash.sim.policy_link import SimulatedPolicyLink


@dataclass
class EpisodeTrace:
    """What happened, for the metrics: commanded actions, states, infos, chunk switch steps."""

    task: str
    seed: int
    mode: str
    delay: int
    dt: float
    interface: str = "position"  # the simulator's action interface: what `commands` are
    commands: list[np.ndarray] = field(default_factory=list)  # [A] sent per control step
    states: list[np.ndarray] = field(default_factory=list)  # observed state per control step (before acting)
    infos: list[dict] = field(default_factory=list)  # env info after each step
    reset_events: list[dict] = field(default_factory=list)  # events of the reset (targets visible at step 0)
    switch_steps: list[int] = field(default_factory=list)  # steps at which a new chunk took over
    # per control step: the observation step of the newest plan behind the command (-1: none yet)
    plan_steps: list[int] = field(default_factory=list)
    hold_steps: int = 0  # steps the hold was sent (waiting for a chunk, or a missed deadline)
    missed_steps: int = 0  # of those, steps the running chunk had no action (a deadline missed)
    requests: int = 0
    success: bool = False
    steps: int = 0
    max_steps: int = 0  # the task's time limit (completion time of an episode that did not succeed)


def executor_config(base: ExecutorConfig, delay: int, interface: str, seed: int) -> ExecutorConfig:
    """The executor settings of one episode: the cell's mode and knobs, d measured online (its first request is
    sync and measures the latency exactly), the interface's action kind, and the episode's noise seeds."""
    initial = max(1, delay) if base.mode in ("sync", "ensemble") else min(max(1, delay), base.execution_horizon)
    return replace(base, initial_delay=initial, adapt_delay=True, action_kind=ACTION_KIND[interface],
                   seed=(seed * 100_003) % 2**31)  # fmt: skip


class EpisodeRunner:
    """Runs episodes of one (policy, executor settings, link timing) cell on one environment."""

    def __init__(self, env, policy: ChunkPolicy, executor: ExecutorConfig, timing: LinkTiming, task: str = "") -> None:
        self.env, self.policy, self.base, self.timing, self.task = env, policy, executor, timing, task
        self.interface = getattr(env, "action_interface", "position")

    def run(self, seed: int, traces: Sequence[TraceSink] = ()) -> EpisodeTrace:
        """One episode; `traces` (robot_io.run_trace.TraceSink, e.g. `vlash eval --record`'s RerunTrace) get each
        step as a `vlash run` tick row (simulated time) and every chunk record at the end."""
        env, policy, timing = self.env, self.policy, self.timing
        obs, reset_info = env.reset(seed=seed)
        period_ns = round(env.dt * 1e9)
        clock = SimulatedClock()
        config = executor_config(self.base, timing.delay, self.interface, seed)
        trace = EpisodeTrace(self.task, seed, config.mode, timing.delay, env.dt, self.interface)
        trace.max_steps = env.max_steps
        trace.reset_events = list(reset_info.get("events", ()))

        def commanded(step: int) -> np.ndarray | None:  # the oracle's privileged view of the robot's commands
            if 0 <= step < len(trace.commands):
                return trace.commands[step]
            cur = executor.current
            return None if step < 0 or cur is None else cur.command(step)

        planner = policy.planner(env, commanded, config.action_stride)
        link = SimulatedPolicyLink(lambda infer: timing.planned(planner(infer)), self._metadata(obs), clock,
                                latency_s=timing.delay * period_ns / 1e9)  # fmt: skip
        executor = make_executor(link, config, env.dt, clock)
        executor.state_index = index = np.arange(len(env.action_space.low))  # the leading entries: the action's
        if traces:  # each chunk record once it is final, as `vlash run` streams them
            executor.on_record = lambda record: [sink.chunk(record) for sink in traces]
        executor.start()
        safety = Safety(SafetyConfig(action_kind=config.action_kind), len(env.action_space.low))
        for k in range(env.max_steps):
            clock.sleep_until(k * period_ns)
            state = np.asarray(obs["state"], np.float32)
            observation = {"state": state, "images": {policy.camera: obs["image"]}, "prompt": env.instruction}
            action = executor.tick(k, observation)
            command, held = safety.filter(action, state[index], expected=executor.waiting)
            cur = executor.current
            if traces:
                row = dict(t=k * env.dt, step=k, state=state, command=command, held=held,
                           chunk=-1 if cur is None else cur.chunk_id, index=-1 if cur is None else cur.index_at(k),
                           tick_ms=0.0, reset=False, images=observation["images"],
                           mode=executor.running_mode)  # fmt: skip
                for sink in traces:
                    sink.tick(row)
            trace.plan_steps.append(-1 if cur is None else self._request_step(executor, cur.chunk_id))
            trace.states.append(state.copy())
            trace.commands.append(command)
            obs, _, terminated, truncated, info = env.step(command)
            trace.infos.append(info)
            trace.steps = k + 1
            trace.success = bool(info.get("success", False))
            if terminated or truncated:
                break
        executor.finish()
        trace.hold_steps, trace.missed_steps = safety.fallbacks, executor.counts.missed_deadlines  # fresh per episode
        trace.switch_steps = sorted(r.switch_step for r in executor.records if r.switch_step is not None)
        trace.requests = executor.counts.requests
        return trace

    def _metadata(self, obs: dict) -> Metadata:
        s = obs["image"].shape[0]
        state_dim, action_dim = len(obs["state"]), len(self.env.action_space.low)
        return Metadata("eval", [CameraSpec(self.policy.camera, s, s)], state_dim, action_dim, self.policy.horizon,
                        1 / self.env.dt, "fp32", "in-process", self.timing.num_steps, "constant", False)  # fmt: skip

    @staticmethod
    def _request_step(executor, chunk_id: int) -> int:
        for record in reversed(executor.records):
            if record.chunk_id == chunk_id:
                return record.request_step
        return -1
