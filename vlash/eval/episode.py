"""One simulated episode under an execution mode: the control loop, requests, chunk switches.

Per control step k: (1) a request whose delay has passed takes over; (2) launch a request if the mode
says so, using the observation of step k (a zero-delay one takes over at once); (3) command the
running chunk's action for k (or hold the last command while waiting); (4) step the environment.
Everything is deterministic given the episode seed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from vlash.eval.modes import ExecutionConfig, RunningChunk, ensemble_weights
from vlash.eval.requests import ChunkPolicy, GuidanceRequest, PlanRequest


@dataclass
class EpisodeTrace:
    """What happened, for the metrics: commanded actions, states, infos, chunk switch steps."""

    task: str
    seed: int
    mode: str
    delay: int
    dt: float
    commands: list[np.ndarray] = field(default_factory=list)  # [J] per control step
    states: list[np.ndarray] = field(default_factory=list)  # observed [J] per control step (before acting)
    infos: list[dict] = field(default_factory=list)  # env info after each step
    switch_steps: list[int] = field(default_factory=list)  # steps at which a new chunk took over
    # per control step: the observation step of the newest plan behind the command (-1: none yet)
    plan_steps: list[int] = field(default_factory=list)
    hold_steps: int = 0  # steps spent holding (waiting for a chunk)
    requests: int = 0
    success: bool = False
    steps: int = 0


@dataclass
class _Pending:
    arrival: int
    chunk: RunningChunk


class EpisodeRunner:
    def __init__(self, env, policy: ChunkPolicy, cfg: ExecutionConfig, task: str = "") -> None:
        cfg.check_horizon(policy.horizon)
        self.env, self.policy, self.cfg, self.task = env, policy, cfg, task
        self.horizon = policy.horizon

    def run(self, seed: int) -> EpisodeTrace:
        env, cfg = self.env, self.cfg
        obs, _ = env.reset(seed=seed)
        trace = EpisodeTrace(self.task, seed, cfg.mode, cfg.delay, env.dt)
        self._seed, self._obs, self._trace = seed, obs, trace
        self._last_cmd = np.asarray(obs["state"], dtype=np.float32).copy()
        self._current: RunningChunk | None = None
        self._pending: list[_Pending] = []
        self._live: list[RunningChunk] = []  # ensemble
        for k in range(env.max_steps):
            self._deliver(k)  # first: a chunk switching in now can schedule its successor at once (s = d)
            self._maybe_request(k)
            self._deliver(k)  # a zero-delay request is answered within the step
            cmd, plan_step = self._command(k)
            trace.plan_steps.append(plan_step)
            trace.states.append(np.asarray(self._obs["state"], np.float32).copy())
            trace.commands.append(cmd)
            self._obs, _, terminated, truncated, info = env.step(cmd)
            self._last_cmd = cmd
            trace.infos.append(info)
            trace.steps = k + 1
            trace.success = bool(info.get("success", False))
            if terminated or truncated:
                break
        return trace

    # ------------------------------------------------------------------ scheduling
    def _request_due(self, k: int) -> bool:
        cfg, cur = self.cfg, self._current
        if cfg.mode == "ensemble":
            return k % cfg.ensemble_every == 0
        if self._pending:
            return False
        if cur is None:
            return k == 0  # the first chunk; later ones are launched relative to the running chunk
        if cfg.mode == "sync":
            return k >= cur.start_step + cfg.execution_horizon
        return k >= cur.start_step + cfg.execution_horizon - cfg.switch_delay

    def _maybe_request(self, k: int) -> None:
        if not self._request_due(k):
            return
        cfg, cur = self.cfg, self._current
        first = cur is None
        mode = "sync" if first and cfg.mode != "ensemble" else cfg.mode
        wait = cfg.delay if mode in ("sync", "ensemble") else cfg.switch_delay
        q, state = cfg.quantization, np.asarray(self._obs["state"], np.float32)
        request = dict(image=self._obs["image"], instruction=self.env.instruction, seed=self._request_seed())
        first_index = wait * q  # chunk index 0 is the request time: skip what ran during the wait
        if mode == "sync":
            first_index = 0
        elif mode == "vlash":  # plan from where the robot will be at the switch; run from index 0
            state, first_index = cur.action_at(k + wait - 1), 0
            request["start_offset"] = wait
        elif mode in ("prefix", "faster") and wait > 0:
            request["prefix"] = cur.window(k, wait * q)
            request["schedule"] = "horizon-aware" if mode == "faster" else "constant"
        elif mode == "rtc" and wait > 0:
            leftover = cur.window(k, self.horizon)
            valid = self.horizon - cur.index_at(k)
            target = np.where((np.arange(self.horizon) < valid)[:, None], leftover, 0.0).astype(np.float32)
            request["guidance"] = GuidanceRequest(target, wait * q, cfg.execution_horizon * q)
        elif mode == "faster":
            request["schedule"] = "horizon-aware"
        result = self.policy.plan(PlanRequest(state=state, **request), self.env)
        self._trace.requests += 1
        chunk = RunningChunk(result.actions, start_step=k + wait, first_index=first_index, stride=q, request_step=k)
        self._pending.append(_Pending(arrival=k + wait, chunk=chunk))

    def _request_seed(self) -> int:
        return (self._seed * 100_003 + self._trace.requests) % (2**31)

    def _deliver(self, k: int) -> None:
        arrived = [p for p in self._pending if p.arrival <= k]
        if not arrived:
            return
        self._pending = [p for p in self._pending if p.arrival > k]
        for p in arrived:
            self._trace.switch_steps.append(k)
            self._current = p.chunk
            self._live.append(p.chunk)

    def _command(self, k: int) -> tuple[np.ndarray, int]:
        """The command for step k and the observation step of the newest plan behind it."""
        cfg, cur = self.cfg, self._current
        plan_step = -1 if cur is None else cur.request_step
        if cfg.mode == "ensemble":
            live = [c for c in self._live if c.index_at(k) < self.horizon]
            self._live = live
            if not live:
                self._trace.hold_steps += 1
                return self._last_cmd, plan_step
            weights = ensemble_weights(len(live), cfg.ensemble_decay)
            mixed = np.einsum("i,ij->j", weights, np.stack([c.action_at(k) for c in live])).astype(np.float32)
            return mixed, max(c.request_step for c in live)
        if cur is None or k < cur.start_step:
            self._trace.hold_steps += 1
            return self._last_cmd, plan_step
        if cfg.mode == "sync" and k >= cur.start_step + cfg.execution_horizon:
            self._trace.hold_steps += 1
            return self._last_cmd, plan_step
        return np.asarray(cur.action_at(k), np.float32), plan_step
