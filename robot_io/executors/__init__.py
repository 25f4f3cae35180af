"""Chunk executors: when to request a chunk, what to send, and which action to command each control tick.

executor = make_executor(client, ExecutorConfig(mode="vlash"), period_s=1 / 30)
executor.start()                       # handshake (or start(metadata))
action = executor.tick(step, obs)      # float32 [J] or None (hold)
"""

from __future__ import annotations

from robot_io.control.clock import Clock
from robot_io.executors.base import ChunkExecutor, PolicyLink
from robot_io.executors.chunk import ChunkRecord, PendingRequest, RunningChunk
from robot_io.executors.config import ACTION_KINDS, EXECUTION_MODES, STATE_SOURCES, ExecutorConfig
from robot_io.executors.delay import DelayEstimator
from robot_io.executors.strategies import (
    EXECUTORS,
    EnsembleExecutor,
    FasterExecutor,
    NaiveExecutor,
    PrefixExecutor,
    RtcExecutor,
    SyncExecutor,
    VlashExecutor,
)


def make_executor(client: PolicyLink, config: ExecutorConfig, period_s: float, clock: Clock | None = None):
    """The executor class of `config.mode`."""
    return EXECUTORS[config.mode](client, config, period_s, clock)


__all__ = [
    "ACTION_KINDS",
    "EXECUTION_MODES",
    "EXECUTORS",
    "STATE_SOURCES",
    "ChunkExecutor",
    "ChunkRecord",
    "DelayEstimator",
    "EnsembleExecutor",
    "ExecutorConfig",
    "FasterExecutor",
    "NaiveExecutor",
    "PendingRequest",
    "PolicyLink",
    "PrefixExecutor",
    "RtcExecutor",
    "RunningChunk",
    "SyncExecutor",
    "VlashExecutor",
    "make_executor",
]
