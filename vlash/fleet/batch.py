"""A batch of requests through the runtime, one reply per request: a `ChunkResult`, or a `RequestFailed` that goes
to that request's robot only (never the batch's). No Ray here; `vlash.fleet.model` runs it on its model thread."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from robot_io.protocol import ErrorCode, Infer
from vlash.runtime.policy_runtime import ChunkResult, PolicyRuntime
from vlash.server.failures import BadOutput, check_finite, request_error

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RequestFailed:
    """One request's failure, as its robot is told (a value, so no exception has to cross Ray)."""

    message: str  # what the robot sees (openpi: the error text frame)
    internal: bool  # True: the runtime failed (a bug, a device fault, NaN output); False: the request was bad


def replies(runtime: PolicyRuntime, requests: Sequence[Infer]) -> list[ChunkResult | RequestFailed]:
    """One reply per request, as the policy server answers them (vlash.server.failures): a request that does not fit
    the policy (ValueError, ShapeError) and a runtime failure become that request's RequestFailed; so does a chunk
    that is not finite (a diverged model). An exception of `run_batch` as a whole fails every request of the batch."""
    try:
        results = runtime.run_batch(list(requests))  # one request's exception is its own entry
        if len(results) != len(requests):
            raise RuntimeError(f"run_batch returned {len(results)} results for {len(requests)} requests")
    except Exception as exc:  # noqa: BLE001 - every robot of the batch gets the error, the replica serves on
        log.exception("a batch of %d requests failed", len(requests))
        results = [exc] * len(requests)
    return [_reply(result) for result in results]


def _reply(result: ChunkResult | BaseException) -> ChunkResult | RequestFailed:
    if not isinstance(result, BaseException):
        try:
            check_finite(result.actions[: result.final_rows])
            return result
        except BadOutput as exc:
            result = exc
    code, message = request_error(result)
    if code is ErrorCode.INTERNAL:
        log.error("request failed: %s", message)
    return RequestFailed(message, internal=code is ErrorCode.INTERNAL)
