"""openpi frames <-> runtime requests for the fleet's ingress, with the checks the policy server makes.

vlash's own openpi endpoint (vlash.server.openpi_endpoint) hands an observation to the policy server as an INFER;
the fleet's ingress calls a model replica with a `ChunkRequest` instead, so the same checks run here: the codec
and the observation map (vlash.server.openpi_codec / openpi_mapping), the protocol's bounds on every field
(`encode` validates as the server's decode does), and the policy's shapes (`check_infer`). A bad frame fails in
the ingress, before it reaches a GPU. No Ray here.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from robot_io.protocol import Infer, Metadata, encode
from vlash.runtime.policy_runtime import ChunkRequest, ChunkResult
from vlash.server.openpi_codec import unpackb
from vlash.server.openpi_mapping import ObservationError, ObservationMap, flatten, resolve
from vlash.server.requests import check_infer


def chunk_request(
    frame: Any,
    metadata: Metadata,
    observation_map: ObservationMap | None,
    default_prompt: str | None,
    request_id: int,
) -> ChunkRequest:
    """The request one openpi observation frame asks for; CodecError, ObservationError or MessageError (a
    ProtocolError) naming what is wrong. `observation_map` None: chosen per observation (`auto`)."""
    if not isinstance(frame, bytes):
        raise ObservationError("expected a binary msgpack frame, got a text frame")
    observation = flatten(unpackb(frame))
    mapped = (observation_map or resolve(observation, metadata)).apply(observation, metadata, default_prompt)
    infer = Infer(request_id, request_id, time.time_ns(), mapped.prompt, mapped.images, mapped.state, seed=mapped.seed)
    encode(infer)  # the protocol's bounds (prompt length, image sides, finite state): MessageError
    check_infer(infer, metadata)  # the policy's cameras, state dims, sampler constraints: MessageError
    return ChunkRequest.from_infer(infer)


def openpi_reply(result: ChunkResult, infer_ms: float, prev_total_ms: float | None) -> dict[str, Any]:
    """openpi's reply: the chunk's final rows, the policy's timing, the server's (as vlash's openpi endpoint)."""
    timing = dict(result.timing_ms)
    server_timing = {"infer_ms": infer_ms}
    if prev_total_ms is not None:
        server_timing["prev_total_ms"] = prev_total_ms
    return {
        "actions": np.asarray(result.actions[: result.final_rows], np.float32),
        "policy_timing": {"infer_ms": timing.get("total_ms", 0.0), **timing},
        "server_timing": server_timing,
    }
