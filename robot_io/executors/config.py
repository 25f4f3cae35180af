"""ExecutorConfig: the execution mode and its parameters (docs/METHODS.md "Execution modes")."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal, get_args

from robot_io.protocol.errors import ShapeError

# The values of the str fields below (a Literal each, so that `vlash run --help` can list them too)
ExecutionMode = Literal["sync", "naive", "vlash", "prefix", "rtc", "faster", "ensemble"]
EXECUTION_MODES: tuple[str, ...] = get_args(ExecutionMode)
# how the robot applies an action: "absolute" targets (joint positions), "delta" increments of the state per chunk
# index, or "velocity" rates per second (the state advances by velocity * period per index)
ActionKind = Literal["absolute", "delta", "velocity"]
ACTION_KINDS: tuple[str, ...] = get_args(ActionKind)
StateSource = Literal["observed", "commanded"]
STATE_SOURCES: tuple[str, ...] = get_args(StateSource)
# what the executor does once the link counts as lost (no reply for link_timeout_s while one is owed):
# "finish-chunk" keeps executing the running chunk until it runs out (right when the server is only slow),
# "hold" stops it at once, so the watchdog holds within one period (robots that must not move unsupervised)
LinkLossPolicy = Literal["finish-chunk", "hold"]
LINK_LOSS_POLICIES: tuple[str, ...] = get_args(LinkLossPolicy)


@dataclass(frozen=True)
class ExecutorConfig:
    """How chunks are requested and handed over. Steps are control steps; s and d as in ALGORITHMS.md §2-4."""

    mode: ExecutionMode = "vlash"  # chunk execution mode (docs/METHODS.md, "Execution modes")
    execution_horizon: int = 10  # s: control steps of a chunk that run before the next one takes over
    action_stride: int = 1  # q: run every q-th chunk action, the index advancing q per step (VLASH: "quantization")
    initial_delay: int = 3  # d0: delay in control steps used until request latencies are measured
    delay_window: int = 20  # request latencies kept for the online delay estimate
    delay_percentile: float = 95.0  # d = ceil(this percentile of recent latencies / period)
    adapt_delay: bool = True  # measure d from request latencies (off: d stays initial_delay: reproducible runs, tests)
    action_kind: ActionKind = "absolute"  # how the robot applies an action (ACTION_KINDS)
    # the state sent by modes that do not roll it forward (sync, naive, prefix, rtc, ensemble): "observed" (the
    # measured state), or "commanded": the last absolute command (what `vlash` sends at d = 0), so that an
    # evaluation can separate the effect of the state's source from that of the future-state offset
    state_source: StateSource = "observed"
    ensemble_every: int = 2  # ensemble: control steps between requests (at most one request in flight)
    ensemble_decay: float = 0.01  # ensemble: ACT's m in w_i = exp(-m * i), i = 0 the oldest chunk
    request_timeout_s: float = 2.0  # a request without its reply after this is abandoned and re-sent
    retry_after_s: float = 0.5  # after a server error or a link failure, wait this long before requesting again
    prompt: str = ""  # task instruction; empty: the observation's "prompt" (simulated tasks), else ""
    seed: int | None = None  # base noise seed sent with requests (request i uses seed + i); None: server's
    link_timeout_s: float = 2.0  # a reply owed this long without any message from the server: the link is lost
    # once the link is lost: finish the running chunk, then hold, or hold at once
    on_link_loss: LinkLossPolicy = "finish-chunk"
    record_window: int = 1000  # chunk records kept in `records` (the most recent); every one goes to on_record

    def __post_init__(self) -> None:
        if self.mode not in EXECUTION_MODES:
            raise ValueError(f"ExecutorConfig.mode must be one of {EXECUTION_MODES}, got {self.mode!r}")
        if self.action_kind not in ACTION_KINDS:
            raise ValueError(f"ExecutorConfig.action_kind must be one of {ACTION_KINDS}, got {self.action_kind!r}")
        if self.state_source not in STATE_SOURCES:
            raise ValueError(f"ExecutorConfig.state_source must be one of {STATE_SOURCES}, got {self.state_source!r}")
        if self.state_source == "commanded" and self.action_kind != "absolute":
            raise ValueError("ExecutorConfig.state_source 'commanded' needs absolute actions (a command is a state)")
        if not (math.isfinite(self.ensemble_decay) and self.ensemble_decay >= 0):
            raise ValueError(f"ExecutorConfig.ensemble_decay must be >= 0, got {self.ensemble_decay}")
        if self.on_link_loss not in LINK_LOSS_POLICIES:
            raise ValueError(
                f"ExecutorConfig.on_link_loss must be one of {LINK_LOSS_POLICIES}, got {self.on_link_loss!r}"
            )
        for name in ("execution_horizon", "action_stride", "delay_window", "record_window", "ensemble_every"):
            value = getattr(self, name)
            if not (isinstance(value, int) and value >= 1):
                raise ValueError(f"ExecutorConfig.{name} must be an int >= 1, got {value!r}")
        if not (isinstance(self.initial_delay, int) and self.initial_delay >= 1):
            raise ValueError(
                f"ExecutorConfig.initial_delay must be an int >= 1 (a reply is never usable in the step of its "
                f"request), got {self.initial_delay!r}"
            )
        if self.mode not in ("sync", "ensemble", "faster") and self.initial_delay > self.execution_horizon:
            raise ValueError(
                f"ExecutorConfig: initial_delay {self.initial_delay} > execution_horizon {self.execution_horizon} "
                "(the next chunk would arrive after the current one ran out)"
            )
        if not 0.0 < self.delay_percentile <= 100.0:
            raise ValueError(f"ExecutorConfig.delay_percentile must be in (0, 100], got {self.delay_percentile}")
        for name in ("request_timeout_s", "retry_after_s", "link_timeout_s"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"ExecutorConfig.{name} must be > 0, got {value}")

    @property
    def relative(self) -> bool:
        """Actions are increments or rates (a step commands the sum of its q indices; holding is zero)."""
        return self.action_kind != "absolute"

    def max_delay(self, chunk_length: int) -> int:
        """Largest d the chunk supports: (s + d) * q <= H, and d <= s for the modes that wait for the whole chunk
        (the next one would arrive after the running one ran out); faster waits only for its first rows and asks
        for s + d rows, so it re-plans as often as its wait allows; ensemble: d * q < H."""
        if self.mode == "ensemble":
            return (chunk_length - 1) // self.action_stride
        fit = chunk_length // self.action_stride - self.execution_horizon
        return fit if self.mode in ("sync", "faster") else min(self.execution_horizon, fit)

    def check_chunk_length(self, chunk_length: int) -> None:
        """Raise ShapeError (a ValueError) when (s + 1) * q indices (the least any mode needs) exceed the chunk: found
        at the handshake, so typed like the other robot/policy mismatches (one line from `vlash run`)."""
        need = (self.execution_horizon + 1) * self.action_stride
        if need > chunk_length:
            raise ShapeError(
                f"(s + 1) * q = ({self.execution_horizon} + 1) * {self.action_stride} = {need} chunk indices needed, "
                f"the policy's chunk has {chunk_length}; lower --execution-horizon or --action-stride"
            )
