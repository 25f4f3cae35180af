"""openpi frames -> runtime requests for the fleet's ingress, with the checks the policy server makes.

vlash's own openpi endpoint (vlash.server.openpi_endpoint) hands an observation to the policy server as an INFER;
the fleet's ingress calls a model replica with a `ChunkRequest` instead, so the same checks run here: the frame ->
INFER mapping both share (vlash.server.openpi_frames), the protocol's bounds on every field (`encode` validates as
the server's decode does), and the policy's shapes (`check_infer`). A bad frame fails in the ingress, before it
reaches a GPU. No Ray here.
"""

from __future__ import annotations

from typing import Any

from robot_io.protocol import Metadata, encode
from vlash.runtime.policy_runtime import ChunkRequest
from vlash.server.openpi_frames import observation_infer
from vlash.server.openpi_mapping import ObservationMap
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
    infer = observation_infer(frame, metadata, observation_map, default_prompt, request_id)
    encode(infer)  # the protocol's bounds (prompt length, image sides, finite state): MessageError
    check_infer(infer, metadata)  # the policy's cameras, state dims, sampler constraints: MessageError
    return ChunkRequest.from_infer(infer)
