"""When the model thread takes a batch: it waits for more requests only while no robot loses a control step by it.

The model thread is free and b requests are pending (b < max_batch). Running them now, the oldest (received at t0)
would finish at about now + L(b); waiting for one more and running b + 1 from `now` on, at now + L(b + 1). Against
running it alone at once (t0 + L(1)) the wait costs it now + L(b + 1) - (t0 + L(1)). The model thread keeps waiting
only while that cost is below one control period T (1 / the policy's control rate, METADATA's `control_rate_hz`),
now - t0 < batch_wait_s, and b < max_batch; a batch of max_batch is taken at once.

While more than one transport is active (ZeroMQ robots and openpi clients, vlash.server.shares), a batch takes one
transport's requests only, and at most `shared_size()` of them: the largest b whose L(b) - L(1) stays below T (at
least 1; an unmeasured b between two measured sizes is interpolated between them). A robot of the other transport
then waits for one batch that ends less than a control period later than one request alone would, however many
requests the other transport has waiting; on a device where a batch of b costs about what one request does, that is
still max_batch.

L(b) is the running median of the measured service times of batches of b (model time from the batch's start to
its last result, including the emulated latency of `inject_latency_ms`). A size not measured yet counts as L(1):
no cost estimate, so until then only batch_wait_s bounds the wait; without any measurement of L(1) the cost is 0
as well. Every batch taken measures its size, so the estimates fill in as the server runs.
"""

from __future__ import annotations

import statistics
import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from vlash.runtime.policy_runtime import PolicyRuntime

WINDOW = 16  # service times kept per batch size for the running median


def batch_limit(runtime: PolicyRuntime, max_batch: int) -> int:
    """Requests one batch runs together: `max_batch`, capped by an engine's fixed batch (PolicyRuntime.max_batch)."""
    engine_batch = runtime.max_batch
    return max_batch if engine_batch is None else min(max_batch, engine_batch)


class ServiceTimes:
    """L(b): the running median of the last WINDOW service times of batches of b (seconds)."""

    def __init__(self, window: int = WINDOW) -> None:
        self._window = window
        self._times: dict[int, deque[float]] = {}

    def record(self, size: int, seconds: float) -> None:
        self._times.setdefault(size, deque(maxlen=self._window)).append(seconds)

    def estimate(self, size: int) -> float | None:
        """The median service time of a batch of `size`; None before one was measured."""
        times = self._times.get(size)
        return statistics.median(times) if times else None

    def interpolated(self, size: int) -> float | None:
        """L(size), or for a size not measured yet the straight line between the nearest measured sizes below and
        above it (a batch costs at least what a smaller one does); None without a measured size on both sides."""
        if (measured := self.estimate(size)) is not None:
            return measured
        below = max((b for b in self._times if b < size), default=None)
        above = min((b for b in self._times if b > size), default=None)
        if below is None or above is None:
            return None
        low, high = self.estimate(below), self.estimate(above)
        return low + (high - low) * (size - below) / (above - below)

    def extra_s(self, size: int) -> float:
        """L(size) - L(1): how much later a batch of `size` ends than one request alone (see the module
        docstring for sizes not measured yet)."""
        alone = self.estimate(1)
        batched = self.estimate(size)
        if alone is None or batched is None:
            return 0.0
        return batched - alone


class BatchGatherer:
    """The gathering rule (a vlash.server.jobs.GatherRule): `wait_s(t0_s, pending)` says how long the model thread
    may still wait for more requests. Its clock is injected (time.monotonic, the clock of Job.received_ns)."""

    def __init__(
        self,
        max_batch: int,
        batch_wait_s: float,
        control_period_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_batch, self.batch_wait_s, self.control_period_s = max_batch, batch_wait_s, control_period_s
        self.times = ServiceTimes()
        self._clock = clock

    def wait_s(self, t0_s: float, pending: int) -> float:
        """Seconds the model thread may keep waiting for more requests (<= 0: take the batch now), with `pending`
        requests waiting, the oldest received at `t0_s`."""
        if pending >= self.max_batch:
            return 0.0
        now = self._clock()
        by_wait = t0_s + self.batch_wait_s - now  # now - t0 < batch_wait_s
        # now + L(b + 1) - (t0 + L(1)) < T: the oldest request ends less than one control step later
        by_deadline = t0_s + self.control_period_s - self.times.extra_s(pending + 1) - now
        return min(by_wait, by_deadline)

    __call__ = wait_s

    def shared_size(self) -> int:
        """The largest batch the model thread takes while several transports have requests ready: L(b) - L(1) < T
        (see the module docstring); a size not measured yet is interpolated between measured ones, and counts as
        L(1) without a measured size above it; at least 1."""
        alone = self.times.estimate(1)
        size = 1
        while size < self.max_batch:
            batched = self.times.interpolated(size + 1)
            if alone is not None and batched is not None and batched - alone >= self.control_period_s:
                break
            size += 1
        return size

    def measured(self, size: int, seconds: float) -> None:
        """A batch of `size` took `seconds` of model time."""
        self.times.record(size, seconds)
