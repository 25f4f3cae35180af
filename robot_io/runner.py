"""Run a robot under a remote (or fake) policy: ControlLoop + ChunkExecutor + Safety + Robot, then a summary.

Per tick: observation -> executor.tick (action or None) -> safety.filter (clamp; watchdog fallback) ->
robot.send_action. Between ticks the loop's slack goes to executor.receive, so reply arrival times are exact.
The result keeps per-tick logs (commanded action, state, chunk id and index, hold flag) and per-chunk records
(request/reply/switch steps, latency) for plots such as `vlash demo`'s.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from robot_io.control import Clock, ControlLoop, LoopSummary, MonotonicClock, Tick
from robot_io.errors import RobotIOError
from robot_io.executors import ChunkRecord, ExecutorConfig, PolicyLink, make_executor
from robot_io.robots.base import Robot
from robot_io.safety import Safety, SafetyConfig

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunConfig:
    """What to run and for how long."""

    executor: ExecutorConfig = field(default_factory=ExecutorConfig)  # mode, s, q, d0
    rate_hz: float = 30.0  # control rate
    duration_s: float = 10.0  # run length (schedule time)
    on_missing: str = "hold"  # watchdog fallback: "hold" the last command or "stop" at the measured position
    max_step: float | None = None  # largest joint change per tick; None: no limit
    status_every_s: float = 0.25  # how often the status callback is called

    def __post_init__(self) -> None:
        if not (math.isfinite(self.rate_hz) and self.rate_hz > 0):
            raise ValueError(f"RunConfig.rate_hz must be > 0, got {self.rate_hz}")
        if not (math.isfinite(self.duration_s) and self.duration_s > 0):
            raise ValueError(f"RunConfig.duration_s must be > 0, got {self.duration_s}")
        if not self.status_every_s > 0:
            raise ValueError(f"RunConfig.status_every_s must be > 0, got {self.status_every_s}")


@dataclass(frozen=True)
class RunSummary:
    """The numbers a run reports (times in ms; steps are control steps)."""

    mode: str
    rate_hz: float
    duration_s: float
    ticks: int
    requests: int
    chunks: int  # chunks that took over
    ttfa_p50_ms: float | None  # request tick -> first needed action final (median over chunks)
    latency_p50_ms: float | None  # request tick -> final message
    latency_p99_ms: float | None
    delay_steps: int  # final online estimate of d
    missed_deadlines: int  # ticks where the running chunk had no valid action (starved)
    waiting_steps: int  # ticks spent waiting by design (first chunk, sync)
    watchdog_holds: int  # ticks that sent the watchdog fallback (waiting + missed + bad actions)
    clamped: int  # ticks whose action safety changed
    overruns: int
    missed_ticks: int
    jitter_p50_ms: float
    jitter_p99_ms: float
    errors: int
    dropped: int
    timeouts: int
    too_late: int  # replies (or silences) that outlived every usable index of their chunk
    stale_replies: int
    observation_errors: int
    episodes: int  # simulated episodes finished
    successes: int

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class RunResult:
    summary: RunSummary
    loop: LoopSummary
    records: list[ChunkRecord]  # one per request
    time_s: np.ndarray  # [T] tick start since the first tick
    steps: np.ndarray  # [T] control step index
    states: np.ndarray  # [T, J] observed state
    commands: np.ndarray  # [T, J] action really sent
    held: np.ndarray  # [T] bool: the watchdog fallback was sent
    chunk_ids: np.ndarray  # [T] running chunk (request id), -1 none
    chunk_index: np.ndarray  # [T] chunk index commanded, -1 none
    tick_ms: np.ndarray  # [T] each tick's own work: observe, executor, safety, send (loop.tick_p50/p99 aggregate it)
    episodes: list[Any] = field(default_factory=list)  # SimRobot EpisodeOutcome list


def _percentile(values: list[float], q: float) -> float | None:
    return float(np.percentile(values, q)) if values else None


def safety_for(robot: Robot, config: RunConfig) -> SafetyConfig:
    """Joint limits from the robot when it exposes `joint_limits` ([J, 2]), plus the run's max step and fallback."""
    limits = getattr(robot, "joint_limits", None)
    low = high = None
    if limits is not None:
        limits = np.asarray(limits, np.float64)
        low, high = tuple(limits[:, 0].tolist()), tuple(limits[:, 1].tolist())
    return SafetyConfig(low, high, config.max_step, config.on_missing, config.executor.action_kind)


class Runner:
    """Drives one robot with one policy link; `run()` connects the policy, loops for the duration, summarizes."""

    def __init__(
        self,
        robot: Robot,
        client: PolicyLink,
        config: RunConfig,
        clock: Clock | None = None,
        status: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        self.robot, self.client, self.config, self.status = robot, client, config, status
        self.clock = clock or MonotonicClock()
        self.loop = ControlLoop(config.rate_hz, self.clock)
        self.executor = make_executor(client, config.executor, self.loop.period_s, self.clock)
        self.safety = Safety(safety_for(robot, config))
        self.observation_errors = 0
        self._log: dict[str, list] = {
            k: [] for k in ("t", "step", "state", "command", "held", "chunk", "index", "tick_ms")
        }
        self._last_state: np.ndarray | None = None
        self._t0 = 0
        self._next_status = 0

    def run(self) -> RunResult:
        """Handshake, run the loop for config.duration_s, and return the result (the robot must be connected)."""
        meta = self.executor.start()
        dims = self.robot.action_features["action"].shape[0]
        if meta.action_dim != dims or meta.state_dim != self.robot.observation_features["state"].shape[0]:
            raise ValueError(
                f"policy {meta.model_id!r} has state_dim {meta.state_dim} / action_dim {meta.action_dim}, "
                f"the robot has {self.robot.observation_features['state'].shape[0]} / {dims}"
            )
        self._t0 = self.clock.now_ns()
        loop_summary = self.loop.run(self._tick, self.config.duration_s, idle=self.executor.receive)
        return self._result(loop_summary)

    def _tick(self, tick: Tick) -> None:
        obs = self._observe()
        if obs is not None and obs.get("episode_start") and tick.index > 0:
            self.executor.reset()
            self.safety.reset()
        action = self.executor.tick(tick.index, obs, tick.start_ns)
        state = self._last_state
        sent, held = self.safety.filter(action, state, expected=action is None and self.executor.waiting)
        really = np.asarray(self.robot.send_action({"action": sent})["action"], np.float32)
        lg = self._log
        lg["tick_ms"].append((self.clock.now_ns() - tick.start_ns) / 1e6)
        cur = self.executor.current
        lg["t"].append((tick.start_ns - self._t0) / 1e9)
        lg["step"].append(tick.index)
        lg["state"].append(state)
        lg["command"].append(really)
        lg["held"].append(held)
        lg["chunk"].append(-1 if cur is None or held else cur.chunk_id)
        lg["index"].append(-1 if cur is None or held else cur.index_at(tick.index))
        if self.status is not None and tick.start_ns >= self._next_status:
            self._next_status = tick.start_ns + round(self.config.status_every_s * 1e9)
            self.status(self.live_status(tick.index))

    def _observe(self) -> dict | None:
        try:
            obs = self.robot.get_observation()
        except RobotIOError as exc:  # a stalled camera: no request this tick, the watchdog holds
            self.observation_errors += 1
            if self.observation_errors == 1 or self.observation_errors % 100 == 0:
                log.warning("observation failed (%d so far): %s", self.observation_errors, exc)
            if self._last_state is None:
                raise
            return None
        self._last_state = np.asarray(obs["state"], np.float32)
        return obs

    def live_status(self, step: int) -> dict[str, Any]:
        """A few live numbers for a one-line display."""
        ex = self.executor
        lat = [r.latency_ms for r in ex.records[-20:] if r.latency_ms is not None]
        return dict(
            step=step,
            chunks=ex.counts["chunks"],
            delay_steps=ex.delay_steps(),
            latency_ms=lat[-1] if lat else None,
            missed=ex.counts["starved_steps"],
            holds=self.safety.fallbacks,
            overruns=self.loop.overruns,
            episodes=len(getattr(self.robot, "episodes", [])),
            successes=getattr(self.robot, "successes", 0),
        )

    def _result(self, loop: LoopSummary) -> RunResult:
        ex, lg = self.executor, self._log
        ready = [r.ready_ms for r in ex.records if r.ready_ms is not None]
        latency = [r.latency_ms for r in ex.records if r.latency_ms is not None]
        episodes = list(getattr(self.robot, "episodes", []))
        summary = RunSummary(
            mode=self.config.executor.mode,
            rate_hz=self.config.rate_hz,
            duration_s=loop.duration_s,
            ticks=loop.ticks,
            requests=ex.counts["requests"],
            chunks=ex.counts["chunks"],
            ttfa_p50_ms=_percentile(ready, 50),
            latency_p50_ms=_percentile(latency, 50),
            latency_p99_ms=_percentile(latency, 99),
            delay_steps=ex.delay_steps(),
            missed_deadlines=ex.counts["starved_steps"],
            waiting_steps=ex.counts["wait_steps"],
            watchdog_holds=self.safety.fallbacks,
            clamped=self.safety.clamped,
            overruns=loop.overruns,
            missed_ticks=loop.missed_ticks,
            jitter_p50_ms=loop.jitter_p50_ms,
            jitter_p99_ms=loop.jitter_p99_ms,
            errors=ex.counts["errors"],
            dropped=ex.counts["dropped"],
            timeouts=ex.counts["timeouts"],
            too_late=ex.counts["too_late"],
            stale_replies=ex.counts["stale"],
            observation_errors=self.observation_errors,
            episodes=len(episodes),
            successes=sum(bool(getattr(e, "success", False)) for e in episodes),
        )
        j = self.robot.action_features["action"].shape[0]
        return RunResult(
            summary=summary,
            loop=loop,
            records=list(ex.records),
            time_s=np.asarray(lg["t"], np.float64),
            steps=np.asarray(lg["step"], np.int64),
            states=np.asarray(lg["state"], np.float32).reshape(-1, j),
            commands=np.asarray(lg["command"], np.float32).reshape(-1, j),
            held=np.asarray(lg["held"], bool),
            chunk_ids=np.asarray(lg["chunk"], np.int64),
            chunk_index=np.asarray(lg["index"], np.int64),
            tick_ms=np.asarray(lg["tick_ms"], np.float64),
            episodes=episodes,
        )


def run_robot(
    robot: Robot,
    client: PolicyLink,
    config: RunConfig,
    clock: Clock | None = None,
    status: Callable[[dict[str, Any]], None] | None = None,
) -> RunResult:
    """Connect the robot, run it under `client` for config.duration_s, disconnect; returns the RunResult."""
    robot.connect()
    try:
        return Runner(robot, client, config, clock, status).run()
    finally:
        robot.disconnect()
