"""The model deployment: one replica = one `PolicyRuntime` (one GPU with `num_gpus: 1`). Requests from every
ingress replica are gathered by `@serve.batch` and run as one `run_batch` call on the replica's model thread (one
thread, so the engine is never entered twice at once and the event loop stays free for health checks).

Health: `check_health` (Ray calls it every few seconds) fails once `unhealthy_after` batches in a row failed
inside the runtime (one failure per batch, however many requests it held), or once a batch has run longer than
`infer_timeout_s` (a hung device: every robot of it has given up); Ray then replaces the replica. A bad request
is its robot's error and says nothing about health.
"""

from __future__ import annotations

import asyncio
import logging
import time
from concurrent.futures import ThreadPoolExecutor

from ray import serve

from robot_io.protocol import Infer, Metadata
from vlash.fleet.batch import RequestFailed, replies
from vlash.fleet.config import FleetConfig
from vlash.runtime.loading import LoadedRuntime, warm_up
from vlash.runtime.metadata import policy_metadata
from vlash.runtime.policy_runtime import ChunkResult
from vlash.server.batching import batch_limit

log = logging.getLogger("ray.serve")  # Serve's logger: lines land in the replica's log, tagged with its id


@serve.deployment(name="ModelReplica")
class ModelReplica:
    def __init__(self, config: FleetConfig) -> None:
        self.config = config
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="vlash-model")  # every model call runs here
        loaded: LoadedRuntime = self._thread.submit(config.load).result()
        self.runtime = loaded.runtime
        warm_up_s = self._thread.submit(warm_up, self.runtime, config.warm_up_runs).result()
        self._metadata = policy_metadata(self.runtime, loaded.model_id, config.engine, loaded.precision)
        self.max_batch = batch_limit(self.runtime, config.max_batch)
        self._batch.set_max_batch_size(self.max_batch)
        self._batch.set_batch_wait_timeout_s(config.batch_wait_ms / 1e3)
        self.failures_in_a_row = 0  # batches that failed inside the runtime since the last success
        self.broken: str | None = None  # why check_health fails; set once, the replica is then replaced
        self._batch_started: float | None = None  # monotonic start of the running batch
        log.info(
            "vlash fleet replica: %s (%.1fM params, %s) device=%s load %.1f s warm-up %.1f s",
            loaded.model_id,
            loaded.params / 1e6,
            loaded.precision,
            self.runtime.engine.device,
            loaded.load_s,
            warm_up_s,
        )

    def metadata(self) -> Metadata:
        """What robots learn on connect (the same on every replica of a deployment)."""
        return self._metadata

    def ping(self) -> bool:
        return self.broken is None

    async def infer(self, request: Infer) -> ChunkResult | RequestFailed:
        """One robot's request, batched with the others that arrive within batch_wait_ms."""
        return await self._batch(request)

    @serve.batch(max_batch_size=8, batch_wait_timeout_s=0.005)  # both set from the config in __init__
    async def _batch(self, requests: list[Infer]) -> list[ChunkResult | RequestFailed]:
        self._batch_started = time.monotonic()
        try:
            out = await asyncio.get_running_loop().run_in_executor(self._thread, replies, self.runtime, requests)
        finally:
            self._batch_started = None
        self._count(out)
        return out

    def _count(self, out: list[ChunkResult | RequestFailed]) -> None:
        """One batch's replies: a success resets the count of failures; a batch without one that failed in the
        runtime is one failure, however many of its requests did; bad requests alone say nothing."""
        failed = [reply for reply in out if isinstance(reply, RequestFailed)]
        internal = [reply for reply in failed if reply.internal]
        if len(failed) < len(out):
            self.failures_in_a_row = 0
        elif internal:
            self.failures_in_a_row += 1
            if self.failures_in_a_row >= self.config.unhealthy_after and self.broken is None:
                n, message = self.failures_in_a_row, internal[0].message
                self.broken = f"{n} batches in a row failed in the runtime: {message}"

    def check_health(self) -> None:
        """Raises (Ray then restarts this replica) when the runtime is broken."""
        started = self._batch_started
        if self.broken is None and started is not None and time.monotonic() - started > self.config.infer_timeout_s:
            self.broken = f"a batch has run for more than infer_timeout_s {self.config.infer_timeout_s} s"
        if self.broken is not None:
            raise RuntimeError(f"vlash runtime broken: {self.broken}")
