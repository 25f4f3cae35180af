"""Run a robot under a remote (or fake) policy: ControlLoop + ChunkExecutor + Safety + Robot, then a summary.

Setup (after the handshake): the robot must fit the policy's Metadata: state_dim and action_dim equal, every
policy camera fed by a robot camera or left out on purpose (robot_io.executors.images's camera map); a mismatch
is refused with both sides named. Per tick: observation -> executor.tick (action or None) -> safety.filter
(clamp; fallback in action space, see robot_io.safety) -> robot.send_action. Between ticks the loop's slack goes
to executor.receive, so reply arrival times are exact. For robots that do not hold position by themselves a
StallWatchdog thread commands the hold when the loop thread stalls; every send goes through one lock.
The result keeps per-tick logs (commanded action, state, chunk id and index, hold flag) and per-chunk records
(request/reply/switch steps, latency) for plots such as `vlash demo`'s.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from robot_io.control import Clock, ControlLoop, LoopSummary, MonotonicClock, Tick
from robot_io.errors import RobotIOError, ShapeError
from robot_io.executors import ChunkRecord, ExecutorConfig, PolicyLink, make_executor
from robot_io.executors.images import resolve_camera_map
from robot_io.protocol import Metadata
from robot_io.robots.base import Robot, action_dim, action_state_index, holds_position, robot_cameras, state_dim
from robot_io.safety import Safety, SafetyConfig, StallWatchdog

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
    # policy camera -> robot camera, None: left out on purpose (masked); cameras named alike need no entry
    camera_map: dict[str, str | None] = field(default_factory=dict)
    stall_timeout_s: float | None = None  # no tick done this long: the stall watchdog holds; None: max(0.25, 4 periods)

    def __post_init__(self) -> None:
        if not (math.isfinite(self.rate_hz) and self.rate_hz > 0):
            raise ValueError(f"RunConfig.rate_hz must be > 0, got {self.rate_hz}")
        if not (math.isfinite(self.duration_s) and self.duration_s > 0):
            raise ValueError(f"RunConfig.duration_s must be > 0, got {self.duration_s}")
        if self.stall_timeout_s is not None and not (
            math.isfinite(self.stall_timeout_s) and self.stall_timeout_s > 2 / self.rate_hz
        ):
            raise ValueError(f"RunConfig.stall_timeout_s must exceed two control periods ({2 / self.rate_hz:.3f} "
                             f"s), got {self.stall_timeout_s}")  # fmt: skip
        if not self.status_every_s > 0:
            raise ValueError(f"RunConfig.status_every_s must be > 0, got {self.status_every_s}")

    @property
    def stall_timeout(self) -> float:
        """The stall watchdog's bound in seconds."""
        return self.stall_timeout_s if self.stall_timeout_s is not None else max(0.25, 4 / self.rate_hz)


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
    unsent_ticks: int  # of which nothing could be sent (no command yet, hold unknown): the robot's controller held
    stall_holds: int  # hold commands the stall watchdog sent from its thread while the loop was stalled
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
    states: np.ndarray  # [T, S] observed state
    commands: np.ndarray  # [T, A] action really sent (NaN: nothing sent that tick)
    held: np.ndarray  # [T] bool: the watchdog fallback was sent
    chunk_ids: np.ndarray  # [T] running chunk (request id), -1 none
    chunk_index: np.ndarray  # [T] chunk index commanded, -1 none
    tick_ms: np.ndarray  # [T] each tick's own work: observe, executor, safety, send (loop.tick_p50/p99 aggregate it)
    episodes: list[Any] = field(default_factory=list)  # SimRobot EpisodeOutcome list


def _percentile(values: list[float], q: float) -> float | None:
    return float(np.percentile(values, q)) if values else None


def safety_for(robot: Robot, config: RunConfig) -> SafetyConfig:
    """Joint limits from the robot when it exposes `joint_limits` ([A, 2]), plus the run's max step and fallback."""
    limits = getattr(robot, "joint_limits", None)
    low = high = None
    if limits is not None:
        limits = np.asarray(limits, np.float64)
        low, high = tuple(limits[:, 0].tolist()), tuple(limits[:, 1].tolist())
    return SafetyConfig(low, high, config.max_step, config.on_missing, config.executor.action_kind)


def fit_policy(robot: Robot, meta: Metadata, config: RunConfig) -> tuple[dict[str, str | None], np.ndarray | None]:
    """(camera map, action_state_index) when the robot can run the policy; ShapeError naming both sides if not."""
    name, (s, a) = type(robot).__name__, (state_dim(robot), action_dim(robot))
    if (s, a) != (meta.state_dim, meta.action_dim):
        raise ShapeError(f"policy {meta.model_id!r} expects state_dim {meta.state_dim} and action_dim "
                         f"{meta.action_dim}; the robot ({name}) has state_dim {s} and action_dim {a}")  # fmt: skip
    cameras = resolve_camera_map(robot_cameras(robot), meta.cameras, config.camera_map)
    index = action_state_index(robot)
    if index is None and config.executor.mode == "vlash":
        raise ShapeError(f"vlash mode rolls the state forward from the actions, but the robot ({name}) does not say "
                         f"which of its {s} state entries its {a} action entries are (state_names / action_names); "
                         "use another mode or name them")  # fmt: skip
    if index is None and config.max_step is not None and not callable(getattr(robot, "hold_action", None)):
        raise ShapeError(f"max_step needs the measured positions of the commanded joints; the robot ({name}) gives "
                         "neither state_names / action_names nor hold_action(observation)")  # fmt: skip
    return cameras, index


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
        self.safety = Safety(safety_for(robot, config), action_dim(robot))
        self.watchdog: StallWatchdog | None = None
        if not holds_position(robot):
            self.watchdog = StallWatchdog(self._stall_hold, config.stall_timeout, self.clock)
        self.observation_errors = 0
        self._log: dict[str, list] = {
            k: [] for k in ("t", "step", "state", "command", "held", "chunk", "index", "tick_ms")
        }
        self._send_lock = threading.Lock()  # the loop's and the stall watchdog's sends never interleave
        self._hold_hook = getattr(robot, "hold_action", None)
        self._state_index: np.ndarray | None = None
        self._last_state: np.ndarray | None = None
        self._measured: np.ndarray | None = None  # the hold action from the latest observation (robot_io.safety)
        self._t0 = 0
        self._next_status = 0

    def run(self) -> RunResult:
        """Handshake, check the robot against the policy, run the loop for config.duration_s, and return the
        result (the robot must be connected)."""
        meta = self.executor.start()
        self.executor.camera_map, self._state_index = fit_policy(self.robot, meta, self.config)
        self.executor.state_index = self._state_index
        self._t0 = self.clock.now_ns()
        if self.watchdog is not None:
            self.watchdog.start()
        try:
            loop_summary = self.loop.run(self._tick, self.config.duration_s, idle=self.executor.receive)
        finally:
            if self.watchdog is not None:
                self.watchdog.stop()
        return self._result(loop_summary)

    def _tick(self, tick: Tick) -> None:
        obs = self._observe()
        if obs is not None and obs.get("episode_start") and tick.index > 0:
            self.executor.reset()
            self.safety.reset()
        action = self.executor.tick(tick.index, obs, tick.start_ns)
        expected = action is None and self.executor.waiting
        with self._send_lock:
            sent, held = self.safety.filter(action, self._measured, expected=expected)
            really = None if sent is None else self.robot.send_action({"action": sent})["action"]
        lg = self._log
        lg["tick_ms"].append((self.clock.now_ns() - tick.start_ns) / 1e6)
        cur = self.executor.current
        lg["t"].append((tick.start_ns - self._t0) / 1e9)
        lg["step"].append(tick.index)
        lg["state"].append(self._last_state)
        lg["command"].append(np.full(action_dim(self.robot), np.nan, np.float32) if really is None else really)
        lg["held"].append(held)
        lg["chunk"].append(-1 if cur is None or held else cur.chunk_id)
        lg["index"].append(-1 if cur is None or held else cur.index_at(tick.index))
        if self.status is not None and tick.start_ns >= self._next_status:
            self._next_status = tick.start_ns + round(self.config.status_every_s * 1e9)
            self.status(self.live_status(tick.index))
        if self.watchdog is not None:
            self.watchdog.tick_done()

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
        self._measured = self._hold_reference(obs)
        return obs

    def _hold_reference(self, obs: dict) -> np.ndarray | None:
        """The action that keeps the robot where it is now (robot_io.safety's `measured`), or None."""
        if callable(self._hold_hook):
            hold = self._hold_hook(obs)
            return None if hold is None else np.asarray(hold, np.float32)
        if self._state_index is not None:
            return self._last_state[self._state_index]
        return None

    def _stall_hold(self) -> None:
        """The stall watchdog's hold (its own thread): the fallback, sent under the send lock."""
        if not self._send_lock.acquire(timeout=self.config.stall_timeout):
            log.warning("stall watchdog: the loop is stalled inside robot.send_action; cannot command the hold")
            return
        try:
            action = self.safety.hold_action(self._measured)
            if action is not None:
                self.robot.send_action({"action": action})
        finally:
            self._send_lock.release()

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
            unsent_ticks=self.safety.unsent,
            stall_holds=0 if self.watchdog is None else self.watchdog.holds,
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
        s, a = state_dim(self.robot), action_dim(self.robot)
        return RunResult(
            summary=summary,
            loop=loop,
            records=list(ex.records),
            time_s=np.asarray(lg["t"], np.float64),
            steps=np.asarray(lg["step"], np.int64),
            states=np.asarray(lg["state"], np.float32).reshape(-1, s),
            commands=np.asarray(lg["command"], np.float32).reshape(-1, a),
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
