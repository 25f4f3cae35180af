"""openpi frames -> runtime requests for the fleet's ingress, through the policy server's own admission.

vlash's own openpi endpoint (vlash.server.openpi_endpoint) hands an observation to the policy server as an INFER;
the fleet's ingress calls a model replica with the admitted INFER instead, made here by the same two steps: the frame ->
INFER mapping both share (vlash.server.openpi_frames), then the admission every entry point runs
(vlash.runtime.admission.admit: the protocol's bounds on every field, as the ZeroMQ server's decode checks them, and the
policy's cameras, state dims and sampler constraints). A bad frame fails in the ingress, before it reaches a GPU, with
the refusal the ZeroMQ server sends. No Ray here.
"""

from __future__ import annotations

from typing import Any

from robot_io.protocol import Infer, Limits, Metadata
from vlash.runtime.admission import admit
from vlash.server.openpi_codec import PROTOCOL_LIMITS
from vlash.server.openpi_frames import observation_infer
from vlash.server.openpi_mapping import ObservationMap


def chunk_request(
    frame: Any,
    metadata: Metadata,
    observation_map: ObservationMap | None,
    default_prompt: str | None,
    request_id: int,
    limits: Limits = PROTOCOL_LIMITS,
) -> Infer:
    """The request one openpi observation frame asks for; CodecError, ObservationError or MessageError (a
    ProtocolError) naming what is wrong. `observation_map` None: chosen per observation (`auto`). `limits`: the
    protocol's bounds (the ZeroMQ server's defaults)."""
    infer = observation_infer(frame, metadata, observation_map, default_prompt, request_id)
    return admit(infer, metadata, limits)
