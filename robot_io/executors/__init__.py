"""Chunk executors: when to request a chunk, what to send, and which action to command each control tick.

executor = make_executor(client, ExecutorConfig(mode="vlash"), period_s=1 / 30)
executor.start()                       # handshake (or start(metadata))
action = executor.tick(step, obs)      # float32 [J] or None (hold)
"""

from __future__ import annotations

from robot_io.control.clock import Clock
from robot_io.executors.base import ChunkExecutor
from robot_io.executors.chunk import TRACE_FIELDS, ChunkRecord
from robot_io.executors.config import ACTION_KINDS, EXECUTION_MODES, STATE_SOURCES, ExecutorConfig
from robot_io.executors.delay import DelayEstimator
from robot_io.executors.link import PolicyLink
from robot_io.executors.state import Counts, Plan
from robot_io.executors.strategies import EXECUTORS


def make_executor(client: PolicyLink, config: ExecutorConfig, period_s: float, clock: Clock | None = None):
    """The executor class of `config.mode`."""
    return EXECUTORS[config.mode](client, config, period_s, clock)


__all__ = ["ACTION_KINDS", "EXECUTION_MODES", "EXECUTORS", "STATE_SOURCES", "TRACE_FIELDS", "ChunkExecutor",
           "ChunkRecord", "Counts", "DelayEstimator", "ExecutorConfig", "Plan", "PolicyLink",
           "make_executor"]  # fmt: skip
