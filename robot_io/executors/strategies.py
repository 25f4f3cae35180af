"""The execution modes: when to request, what to send, how the new chunk takes over (docs/METHODS.md).

A request at step k carries the observation of step k; d is the online delay estimate; s the execution
horizon; q the action stride. Every mode's first request (nothing running) is sync: hold, run from index 0.
`delay_steps` on the wire is d * q: the chunk indices that run before the new chunk takes over.

    sync      request when the running chunk has run s steps; hold until the reply; run it from index 0
    naive     request at start + s - d with the observed (stale) state; switch at k + d running index d*q
              (chunk index 0 is the request time: the actions that went stale during the delay are skipped)
    vlash     same timing; send future_state = the state at the switch, rolled forward from the committed actions
              (absolute: the last command before the switch; relative: state + the executed increments); switch at
              k + d running index 0 (the chunk was planned for the switch time). When the state has more entries
              than the action (`state_index` locates the action's joints in it), only those entries are rolled
              forward; the others (velocities, forces, ...) keep their observed values
    prefix    same timing as naive; send the committed prefix (the d*q chunk indices executed during the delay,
              returned bit-exact; training-time RTC, METHODS.md "prefix"); switch at k + d running index d*q
    rtc       same timing as naive; send the running chunk's leftover as the guidance target of guided
              inference-time RTC (METHODS.md "rtc"; constant schedule); switch at k + d running index d*q
    faster    prefix + horizon-aware sampling with streamed partial Actions: d is the time until the first new action
              is final (not the whole chunk), so requests launch later; the switch happens as soon as the index it
              needs is final, without waiting for the rest of the chunk. The server stops sampling once the prefix
              and the next (s + d) q indices are final (its final message carries only those rows)
    ensemble  a request every `ensemble_every` steps (one in flight at a time); every live chunk, aligned with
              time, is averaged with ACT's temporal-ensembling weights

A reply that arrives after its planned switch takes over on arrival at the time-aligned index (async modes).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from robot_io.executors.base import ChunkExecutor
from robot_io.executors.chunk import ChunkRecord
from robot_io.executors.state import Plan


class SyncExecutor(ChunkExecutor):
    mode = "sync"

    def _due(self, step: int) -> bool:
        cur = self.current
        return cur is None or step >= cur.switch_step + self.config.execution_horizon

    def _plan(self, step: int, state: np.ndarray, d: int) -> Plan | None:
        return self._first_plan(step)


class NaiveExecutor(ChunkExecutor):
    mode = "naive"

    def _plan(self, step: int, state: np.ndarray, d: int) -> Plan | None:
        return self._aligned(step, d)

    def _aligned(self, step: int, d: int, **infer) -> Plan:
        """Switch at step + d running index d*q (chunk index 0 is the request time)."""
        dq = d * self.config.action_stride
        return Plan(self.mode, step + d, first_index=dq, align=True, delay=d, delay_steps=dq, **infer)


class VlashExecutor(ChunkExecutor):
    mode = "vlash"

    def _sent_state(self, observed: np.ndarray) -> np.ndarray:
        """Always the observed state: the future state is rolled forward from it (state_source does not apply)."""
        return observed

    def _plan(self, step: int, state: np.ndarray, d: int) -> Plan | None:
        idx = self.state_index  # the action's joints within a longer state: roll those, keep the other entries
        future = self.current.future_state(step, step + d, state if idx is None else state[idx])
        if future is None:
            return None
        if idx is not None:
            rolled = np.asarray(state, np.float32).copy()
            rolled[idx] = future
            future = rolled
        dq = d * self.config.action_stride
        return Plan(self.mode, step + d, first_index=0, align=True, delay=d, delay_steps=dq, future_state=future)


class PrefixExecutor(NaiveExecutor):
    mode = "prefix"
    schedule = "constant"

    def _plan(self, step: int, state: np.ndarray, d: int) -> Plan | None:
        prefix = self.current.window(step, d * self.config.action_stride)
        if prefix is None:
            return None
        return self._aligned(step, d, prefix=prefix, schedule=self.schedule)


class RtcExecutor(NaiveExecutor):
    mode = "rtc"

    def _plan(self, step: int, state: np.ndarray, d: int) -> Plan | None:
        cur = self.current
        start = cur.index_at(step)
        if start >= cur.length:
            return self._aligned(step, d)
        leftover = cur.window(step, cur.length - start)
        if leftover is None:
            return None  # the leftover has not all arrived yet
        return self._aligned(step, d, guidance=leftover, schedule="constant")


class FasterExecutor(PrefixExecutor):
    mode = "faster"
    schedule = "horizon-aware"

    def _first_plan(self, step: int) -> Plan:
        return replace(super()._first_plan(step), schedule=self.schedule)

    def _usable(self, chunk: ChunkRecord, index: int) -> bool:
        stop = index + (self.config.action_stride if self.config.relative else 1)
        return bool(chunk.final[index:stop].all())

    def _rows_to_run(self, d: int) -> int:
        """s + d: the server stops sampling after these rows, so ask for d more than a switch on time runs. They cover
        a next chunk that is late by up to d steps, and a launch deferred while this chunk's rows still stream."""
        return self.config.execution_horizon + d

    def _measures_ready(self) -> bool:
        return True


class EnsembleExecutor(NaiveExecutor):
    mode = "ensemble"

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._live: list[ChunkRecord] = []  # chunks that still have actions for the coming steps, oldest first
        self._last_request = -(2**62)

    def reset(self) -> None:
        super().reset()
        self._live.clear()
        self._last_request = -(2**62)

    def _due(self, step: int) -> bool:
        return step >= self._last_request + self.config.ensemble_every

    def _first_plan(self, step: int) -> Plan:
        self._last_request = step
        return super()._first_plan(step)

    def _plan(self, step: int, state: np.ndarray, d: int) -> Plan | None:
        self._last_request = step
        return self._aligned(step, d)

    def _activate(self, step: int) -> None:
        before = self.current
        super()._activate(step)
        if self.current is not before and self.current is not None:
            self._live.append(self.current)

    def _blend(self, step: int, action: np.ndarray) -> np.ndarray:
        """Every live chunk's action for `step` (the newest's is `action`), averaged with ACT's weights."""
        self._live = [c for c in self._live if c.index_at(step) < c.length]  # the running chunk is the last
        older = (c.command(step) for c in self._live[:-1])
        actions = [*(a for a in older if a is not None), action]
        weights = np.exp(-self.config.ensemble_decay * np.arange(len(actions)))
        return np.einsum("i,ij->j", weights / weights.sum(), np.stack(actions)).astype(np.float32)


EXECUTORS: dict[str, type[ChunkExecutor]] = {
    cls.mode: cls
    for cls in (
        SyncExecutor,
        NaiveExecutor,
        VlashExecutor,
        PrefixExecutor,
        RtcExecutor,
        FasterExecutor,
        EnsembleExecutor,
    )  # fmt: skip
}
