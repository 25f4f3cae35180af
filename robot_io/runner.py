"""Run a robot under a remote (or fake) policy: ControlLoop + ChunkExecutor + Safety + Robot, then a summary.

Setup (after the handshake): the robot must fit the policy's Metadata: state_dim and action_dim equal, every
policy camera fed by a robot camera or left out on purpose (robot_io.camera_map); a mismatch
is refused with both sides named. Per tick: observation -> executor.tick (action or None) -> safety.filter
(clamp; fallback in action space, see robot_io.safety) -> robot.send_action. Between ticks the loop's slack goes
to executor.receive, so reply arrival times are exact. For robots that do not hold position by themselves a
StallWatchdog thread commands the hold when the loop thread stalls; every send goes through one lock.

Memory stays bounded however long the run (robot_io.run_trace): RunResult holds the most recent
RunConfig.trace_ticks ticks (commanded action, state, chunk id and index, hold flag, episode resets) and
ExecutorConfig.record_window chunk records (request/reply/switch steps, latency) for plots such as `vlash demo`'s;
the summary's percentiles cover the last RunConfig.stats_window chunks, its counts the whole run. Every tick and
every chunk record goes to the TraceSinks given to the runner (`vlash run --trace FILE`), written as the run goes.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from robot_io.control import Clock, ControlLoop, LoopSummary, MonotonicClock, RecentWindow, Tick
from robot_io.executors import ChunkRecord, PolicyLink, make_executor
from robot_io.protocol import Metadata
from robot_io.protocol.errors import RobotIOError
from robot_io.robots.base import Robot, action_dim, holds_position, state_dim
from robot_io.run_setup import RunConfig, fit_policy, safety_for
from robot_io.run_summary import RunSummary
from robot_io.run_trace import TickWindow, TraceSink
from robot_io.safety import Safety, StallWatchdog

log = logging.getLogger(__name__)


@dataclass
class RunResult:
    """The summary, and the most recent ticks (RunConfig.trace_ticks) and chunk records (ExecutorConfig.record_window):
    T ticks, the last T of the run (all of a run shorter than the window)."""

    summary: RunSummary
    loop: LoopSummary
    records: list[ChunkRecord]  # one per request, the most recent
    time_s: np.ndarray  # [T] tick start since the first tick
    steps: np.ndarray  # [T] control step index
    states: np.ndarray  # [T, S] observed state
    commands: np.ndarray  # [T, A] action really sent (NaN: nothing sent that tick)
    held: np.ndarray  # [T] bool: the watchdog fallback was sent
    chunk_ids: np.ndarray  # [T] running chunk (request id), -1 none
    chunk_index: np.ndarray  # [T] chunk index commanded, -1 none
    tick_ms: np.ndarray  # [T] each tick's own work: observe, executor, safety, send (loop.tick_p50/p99 aggregate it)
    resets: np.ndarray  # [T] bool: a new episode began at this tick (executor and safety reset; not the first tick)
    episodes: list[Any] = field(default_factory=list)  # the robot's recent episode outcomes (SimRobot: the last 1000)
    stopped: bool = False  # the caller's stop event ended the run before its duration
    left: str = ""  # after a stop: what the robot is left doing ("holds the last command sent", "has its torque off")


class Runner:
    """Drives one robot with one policy link; `run()` connects the policy, loops for the duration, summarizes.
    `traces`: sinks that receive every tick and chunk record as the run goes (robot_io.run_trace). `stop`: an event
    (set from a signal handler or another thread) that ends the loop after its current tick; the runner then commands
    the hold once and summarizes as usual."""

    def __init__(
        self,
        robot: Robot,
        client: PolicyLink,
        config: RunConfig,
        clock: Clock | None = None,
        status: Callable[[dict[str, Any]], None] | None = None,
        traces: Sequence[TraceSink] = (),
        stop: threading.Event | None = None,
    ) -> None:
        self.robot, self.client, self.config, self.status = robot, client, config, status
        self.stop = stop or threading.Event()
        self.clock = clock or MonotonicClock()
        self.loop = ControlLoop(config.rate_hz, self.clock)
        self.executor = make_executor(client, config.executor, self.loop.period_s, self.clock)
        self.executor.on_record = self._on_record
        self.safety = Safety(safety_for(robot, config), action_dim(robot))
        self.watchdog: StallWatchdog | None = None
        if not holds_position(robot):
            self.watchdog = StallWatchdog(self._stall_hold, config.stall_timeout, self.clock)
        self.observation_errors = 0
        self.traces = list(traces)
        ticked = [t for t in self.traces if t.wants_ticks]
        self._image_traces = [t for t in ticked if getattr(t, "wants_images", False)]  # camera frames + prompt too
        self._tick_traces = [t for t in ticked if t not in self._image_traces]
        self.ticks: TickWindow | None = None  # sized at run() (a robot knows its dimensions once connected)
        self._ready_ms = RecentWindow(config.stats_window)  # per chunk, the most recent (RunSummary)
        self._latency_ms = RecentWindow(config.stats_window)
        self._send_lock = threading.Lock()  # the loop's and the stall watchdog's sends never interleave
        self._hold_hook = getattr(robot, "hold_action", None)
        self._state_index: np.ndarray | None = None
        self._last_state: np.ndarray | None = None
        self._measured: np.ndarray | None = None  # the hold action from the latest observation (robot_io.safety)
        self._t0 = 0
        self._next_status = 0

    def run(self, metadata: Metadata | None = None) -> RunResult:
        """Handshake (unless the caller did: `metadata`), check the robot against the policy, run the loop for
        config.duration_s, and return the result (the robot must be connected)."""
        meta = self.executor.start(metadata)
        self.executor.camera_map, self._state_index = fit_policy(self.robot, meta, self.config)
        self.executor.state_index = self._state_index
        self.ticks = TickWindow(self.config.trace_ticks, state_dim(self.robot), action_dim(self.robot))
        self._t0 = self.clock.now_ns()
        if self.watchdog is not None:
            self.watchdog.start()
        try:
            if self.stop.is_set():  # asked to stop before the loop began (during the handshake)
                loop_summary = self.loop.summary()
            else:
                loop_summary = self.loop.run(self._tick, self.config.duration_s, idle=self.executor.receive)
        finally:
            if self.watchdog is not None:
                self.watchdog.stop()
        left = self._hold_at_stop() if self.stop.is_set() else ""
        self.executor.finish()  # the records still open go to _on_record
        result = self._result(loop_summary)
        result.stopped, result.left = self.stop.is_set(), left
        for trace in self.traces:
            trace.summary(result.summary.as_dict())
        return result

    def _tick(self, tick: Tick) -> bool:
        obs = self._observe()
        reset = obs is not None and bool(obs.get("episode_start")) and tick.index > 0
        if reset:
            self.executor.reset()
            self.safety.reset()
        action = self.executor.tick(tick.index, obs, tick.start_ns)
        expected = action is None and self.executor.waiting
        with self._send_lock:
            sent, held = self.safety.filter(action, self._measured, expected=expected)
            really = None if sent is None else self.robot.send_action({"action": sent})["action"]
        tick_ms = (self.clock.now_ns() - tick.start_ns) / 1e6
        cur = None if held else self.executor.current
        row = dict(t=(tick.start_ns - self._t0) / 1e9, step=tick.index, state=self._last_state, command=really,
                   held=held, chunk=-1 if cur is None else cur.chunk_id,
                   index=-1 if cur is None else cur.index_at(tick.index), tick_ms=tick_ms, reset=reset,
                   mode="" if cur is None else self.executor.running_mode)  # fmt: skip
        self.ticks.append(**row)
        for trace in self._tick_traces:
            trace.tick(row)
        if self._image_traces:  # they get the observation's frames and prompt too
            seen = row if obs is None else {**row, "images": obs.get("images"), "prompt": str(obs.get("prompt", ""))}
            for trace in self._image_traces:
                trace.tick(seen)
        if self.status is not None and tick.start_ns >= self._next_status:
            self._next_status = tick.start_ns + round(self.config.status_every_s * 1e9)
            self.status(self.live_status(tick.index))
        if self.watchdog is not None:
            self.watchdog.tick_done()
        return not self.stop.is_set()

    def _on_record(self, record: ChunkRecord) -> None:
        """A chunk record is final (the executor calls this once per record): statistics, then the traces."""
        if record.ready_ms is not None:
            self._ready_ms.append(record.ready_ms)
        if record.latency_ms is not None:
            self._latency_ms.append(record.latency_ms)
        for trace in self.traces:
            trace.chunk(record)

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

    def _hold_at_stop(self) -> str:
        """The hold, commanded once when the run is stopped (the running chunk does not go on in the robot's servos);
        returns what it leaves the robot doing."""
        with self._send_lock:
            action, left = self.safety.hold_choice(self._measured)
            if action is not None:
                self.robot.send_action({"action": action})
        return left

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
        return dict(
            step=step,
            chunks=ex.counts.chunks,
            delay_steps=ex.delay_steps(),
            latency_ms=ex.last_latency_ms,
            missed=ex.counts.missed_deadlines,
            holds=self.safety.fallbacks,
            overruns=self.loop.overruns,
            episodes=getattr(self.robot, "episode_count", 0),
            successes=getattr(self.robot, "successes", 0),
        )

    def _result(self, loop: LoopSummary) -> RunResult:
        ex, counts = self.executor, self.executor.counts
        summary = RunSummary(
            mode=self.config.executor.mode,
            rate_hz=self.config.rate_hz,
            duration_s=loop.duration_s,
            ticks=loop.ticks,
            requests=counts.requests,
            chunks=counts.chunks,
            ttfa_p50_ms=self._ready_ms.percentile(50),
            latency_p50_ms=self._latency_ms.percentile(50),
            latency_p99_ms=self._latency_ms.percentile(99),
            delay_steps=ex.delay_steps(),
            missed_deadlines=counts.missed_deadlines,
            waiting_steps=counts.waiting_steps,
            watchdog_holds=self.safety.fallbacks,
            unexpected_holds=self.safety.unexpected,
            unsent_ticks=self.safety.unsent,
            stall_holds=0 if self.watchdog is None else self.watchdog.holds,
            clamped=self.safety.clamped,
            overruns=loop.overruns,
            missed_ticks=loop.missed_ticks,
            jitter_p50_ms=loop.jitter_p50_ms,
            jitter_p99_ms=loop.jitter_p99_ms,
            errors=counts.errors,
            dropped=counts.dropped,
            timeouts=counts.timeouts,
            too_late=counts.too_late,
            stale_replies=counts.stale_replies,
            link_losses=ex.link.losses,
            link_lost_steps=counts.link_lost_steps,
            observation_errors=self.observation_errors,
            episodes=getattr(self.robot, "episode_count", 0),  # robots that run episodes (the simulator) count them
            successes=getattr(self.robot, "successes", 0),
        )
        ticks = self.ticks.arrays()
        return RunResult(
            summary=summary,
            loop=loop,
            records=list(ex.records),
            time_s=ticks["t"],
            steps=ticks["step"],
            states=ticks["state"],
            commands=ticks["command"],
            held=ticks["held"],
            chunk_ids=ticks["chunk"],
            chunk_index=ticks["index"],
            tick_ms=ticks["tick_ms"],
            resets=ticks["reset"],
            episodes=list(getattr(self.robot, "episodes", [])),  # the recent outcomes (bounded)
        )


def run_robot(
    robot: Robot,
    client: PolicyLink,
    config: RunConfig,
    clock: Clock | None = None,
    status: Callable[[dict[str, Any]], None] | None = None,
    traces: Sequence[TraceSink] = (),
    stop: threading.Event | None = None,
    metadata: Metadata | None = None,
) -> RunResult:
    """Connect the robot, run it under `client` for config.duration_s (or until `stop` is set), disconnect (also after
    a failed connect); returns the RunResult (a stopped robot's `left`: its `after_disconnect` when it has one).
    `metadata`: the server's, when the caller already shook hands."""
    try:
        robot.connect()
        result = Runner(robot, client, config, clock, status, traces, stop).run(metadata)
    finally:
        robot.disconnect()
    if result.stopped and getattr(robot, "after_disconnect", None):  # e.g. torque off: it no longer holds
        result.left = robot.after_disconnect
    return result


__all__ = ["RunConfig", "RunResult", "RunSummary", "Runner", "fit_policy", "run_robot", "safety_for"]
