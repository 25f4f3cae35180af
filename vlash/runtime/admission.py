"""The one admission of a request, whatever way it came in: ZeroMQ (decoded by the socket thread), the openpi websocket
(an INFER made in process by the endpoint, through `LocalClient`) and the Ray fleet's ingress (an INFER made from an
openpi frame, vlash.fleet.openpi_requests). Each calls `admit`; a check added here holds on every entry point.

`admit` runs, in order: the protocol's bounds on every field (prompt length, image sides, finite arrays, ...), as
`decode` runs them on a received message (`robot_io.protocol.check`, an encode and a decode, on an INFER made in
process; skipped only for one that `decode` built), then what only the policy knows (`check_infer`: cameras, state dims,
chunk length, sampler constraints), and passes the INFER on as the runtime's request (it is one: vlash.runtime.request).
A refusal is a MessageError whose code is the ERROR to reply with; its text is the same on every entry point.
"""

from __future__ import annotations

from robot_io.protocol import ErrorCode, Infer, Limits, MessageError, Metadata, check, validate_infer


def admit(infer: Infer, metadata: Metadata, limits: Limits, decoded: bool = False) -> Infer:
    """`infer` admitted: the request the runtime runs (what `check` returns for it), or MessageError naming the first
    thing refused. `decoded`: `infer` is what `robot_io.protocol.decode` built with these `limits` (its bounds
    already checked, not checked again); False for an INFER made in this process."""
    if not decoded:
        infer = check(infer, limits)
    check_infer(infer, metadata)
    return infer


def check_infer(infer: Infer, metadata: Metadata) -> None:
    """Raise MessageError (code to reply) unless the runtime can serve `infer` (its protocol bounds already checked)."""
    validate_infer(infer, metadata)
    h = metadata.chunk_length
    d = 0 if infer.prefix is None else len(infer.prefix)
    _check(d < h, f"prefix: {d} rows, must be fewer than chunk_length {h}")
    _check(infer.delay_steps >= 0, f"delay_steps must be >= 0, got {infer.delay_steps}")
    s = infer.execution_horizon
    _check(s is None or s >= 1, f"execution_horizon must be >= 1, got {s}")
    _check(infer.seed is None or 0 <= infer.seed < 2**63, f"seed must be in [0, 2**63), got {infer.seed}")
    schedule = infer.schedule or metadata.schedule
    if infer.guidance is not None:
        _check(len(infer.guidance) >= 1, "guidance: needs at least one row")
        _check(schedule == "constant", f"guidance (guided RTC) needs schedule 'constant', got {schedule!r}")
        delay = d if d else infer.delay_steps
        s = s if s is not None else max(1, h - len(infer.guidance))
        _check(delay + s <= h, f"delay {delay} + execution_horizon {s} exceeds chunk_length {h}")


def _check(ok: bool, message: str) -> None:
    if not ok:
        raise MessageError(ErrorCode.BAD_VALUE, message)
