"""The five execution modes in real time, with the semantics of vlash/eval/modes.py (discrete time).

A request at step k carries the observation of step k; d is the online delay estimate; s the execution
horizon; q the quantization. Every mode's first request (nothing running) is sync: hold, run from index 0.

    sync    request when the running chunk has run s steps; hold until the reply; run it from index 0
    naive   request at start + s - d with the observed (stale) state; switch at k + d running index d*q
            (chunk index 0 is the request time: the actions that went stale during the delay are skipped)
    vlash   same timing; send future_state = the state at the switch, rolled forward from the committed actions
            (absolute: the last command before the switch; delta: state + the executed increments); switch at
            k + d running index 0 (the chunk was planned for the switch time). When the state has more entries
            than the action (`state_index` locates the action's joints in it), only those entries are rolled
            forward; the others (velocities, forces, ...) keep their observed values
    rtc     same timing as naive; send the committed prefix (the d*q chunk indices executed during the delay,
            returned bit-exact) and delay_steps d (training-time RTC, ALGORITHMS.md §4b; "prefix" in
            vlash/eval/modes.py); switch at k + d running index d*q
    faster  rtc + horizon-aware sampling with streamed partial Actions: d is the time until the first new action
            is final (not the whole chunk), so requests launch later; the switch happens as soon as the index it
            needs is final, without waiting for the rest of the chunk

A reply that arrives after its planned switch takes over on arrival at the time-aligned index (async modes).
"""

from __future__ import annotations

import numpy as np

from robot_io.executors.base import ChunkExecutor
from robot_io.executors.chunk import PendingRequest


class SyncExecutor(ChunkExecutor):
    mode = "sync"

    def _due(self, step: int) -> bool:
        cur = self.current
        return cur is None or step >= cur.start_step + self.config.execution_horizon

    def _plan(self, step: int, state: np.ndarray, d: int) -> dict | None:
        return self._first_plan(step)


class NaiveExecutor(ChunkExecutor):
    mode = "naive"

    def _plan(self, step: int, state: np.ndarray, d: int) -> dict | None:
        q = self.config.quantization
        return dict(infer=dict(delay_steps=d), switch_step=step + d, first_index=d * q, align=True, delay=d,
                    mode=self.mode)  # fmt: skip


class VlashExecutor(ChunkExecutor):
    mode = "vlash"

    def _plan(self, step: int, state: np.ndarray, d: int) -> dict | None:
        idx = self.state_index  # the action's joints within a longer state: roll those, keep the other entries
        future = self.current.future_state(step, step + d, state if idx is None else state[idx])
        if future is None:
            return None
        if idx is not None:
            rolled = np.asarray(state, np.float32).copy()
            rolled[idx] = future
            future = rolled
        return dict(infer=dict(future_state=future, delay_steps=d), switch_step=step + d, first_index=0, align=True,
                    delay=d, mode=self.mode)  # fmt: skip


class RtcExecutor(ChunkExecutor):
    mode = "rtc"
    schedule = "constant"

    def _plan(self, step: int, state: np.ndarray, d: int) -> dict | None:
        q = self.config.quantization
        prefix = self.current.window(step, d * q)
        if prefix is None:
            return None
        infer = dict(prefix=prefix, delay_steps=d, schedule=self.schedule)
        return dict(infer=infer, switch_step=step + d, first_index=d * q, align=True, delay=d, mode=self.mode)


class FasterExecutor(RtcExecutor):
    mode = "faster"
    schedule = "horizon-aware"

    def _first_plan(self, step: int) -> dict:
        plan = super()._first_plan(step)
        plan["infer"] = dict(schedule=self.schedule)
        return plan

    def _usable(self, req: PendingRequest, index: int) -> bool:
        stop = index + (self.config.quantization if self.config.action_kind == "delta" else 1)
        return bool(req.final[index:stop].all())

    def _measures_ready(self) -> bool:
        return True


EXECUTORS: dict[str, type[ChunkExecutor]] = {
    cls.mode: cls for cls in (SyncExecutor, NaiveExecutor, VlashExecutor, RtcExecutor, FasterExecutor)
}
