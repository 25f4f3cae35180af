"""openpi's frames, as both openpi servers read and send them: vlash's endpoint in front of the policy server
(vlash.server.openpi_endpoint) and the fleet's ingress (vlash.fleet.ingress). The protocol is described in
vlash.server.openpi_endpoint's docstring; the sockets (websockets' threaded server, FastAPI) stay with each server.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import msgspec
import numpy as np
from websockets.frames import CloseCode

from robot_io.protocol import Infer, Metadata, RemoteError
from robot_io.protocol.errors import DeadlineExceeded, ProtocolError
from vlash.server.openpi_codec import CodecError, unpackb
from vlash.server.openpi_mapping import ObservationError, ObservationMap, flatten, resolve

# what a request can fail with, reported to the robot as the error reply (anything else is logged as a bug too)
REQUEST_ERRORS = (CodecError, ObservationError, ProtocolError, DeadlineExceeded)
# the error reply: a text frame with the message (openpi's client raises RuntimeError with it), then this close
ERROR_CLOSE_CODE = CloseCode.INTERNAL_ERROR
ERROR_CLOSE_REASON = "request failed; the message is in the previous frame"


def metadata_frame(metadata: Metadata, observation_map: str) -> dict[str, Any]:
    """What an openpi client gets from `get_server_metadata()`: the policy's Metadata as plain msgpack types."""
    frame = msgspec.to_builtins(metadata)  # cameras become [{"name", "height", "width"}]
    frame["vlash_protocol_version"] = frame.pop("version")
    frame.update(server="vlash", observation_map=observation_map)
    return frame


def observation_infer(
    frame: Any,
    metadata: Metadata,
    observation_map: ObservationMap | None,
    default_prompt: str | None,
    request_id: int,
) -> Infer:
    """The INFER one openpi observation frame asks for (not validated yet); CodecError or ObservationError naming
    what is wrong. `observation_map` None: chosen per observation (`auto`)."""
    if not isinstance(frame, bytes):
        raise ObservationError("expected a binary msgpack frame, got a text frame")
    observation = flatten(unpackb(frame))
    mapped = (observation_map or resolve(observation, metadata)).apply(observation, metadata, default_prompt)
    return Infer(request_id, request_id, time.time_ns(), mapped.prompt, mapped.images, mapped.state, seed=mapped.seed)


def reply_frame(
    actions: np.ndarray, timing_ms: Mapping[str, float], infer_ms: float, prev_total_ms: float | None
) -> dict[str, Any]:
    """openpi's reply: the chunk, the policy's timing ("infer_ms": its total, then vlash's breakdown) and the
    server's ("infer_ms": this request's receipt -> reply; "prev_total_ms": the previous request's recv -> send,
    from the second request on)."""
    server_timing = {"infer_ms": infer_ms}
    if prev_total_ms is not None:
        server_timing["prev_total_ms"] = prev_total_ms
    return {
        "actions": np.asarray(actions, np.float32),
        "policy_timing": {"infer_ms": timing_ms.get("total_ms", 0.0), **timing_ms},
        "server_timing": server_timing,
    }


def error_text(exc: BaseException) -> str:
    """The error reply's text for a request that failed with `exc`: its message for a refused request
    (REQUEST_ERRORS), else its type and message (a bug, which the caller logs). A refusal of admission
    (vlash.runtime.admission) reads "CODE: text" on both openpi servers: the policy server's ERROR (RemoteError)
    here, the MessageError itself in the fleet's ingress."""
    if isinstance(exc, RemoteError):
        return f"{exc.code.value}: {exc.error.message}"
    return str(exc) if isinstance(exc, REQUEST_ERRORS) else f"{type(exc).__name__}: {exc}"
