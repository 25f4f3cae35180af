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

from robot_io.protocol import ErrorCode, Infer, Limits, MessageError, Metadata, check


def admit(infer: Infer, metadata: Metadata, limits: Limits, decoded: bool = False) -> Infer:
    """`infer` admitted: the request the runtime runs (what `check` returns for it), or MessageError naming the first
    thing refused. `decoded`: `infer` is what `robot_io.protocol.decode` built with these `limits` (its bounds
    already checked, not checked again); False for an INFER made in this process."""
    if not decoded:
        infer = check(infer, limits)
    check_infer(infer, metadata)
    return infer


def check_infer(infer: Infer, metadata: Metadata) -> None:
    """Raise MessageError (code to reply) unless the runtime can serve `infer`: what only the policy knows, its protocol
    bounds (dtypes, ranks, sizes, finiteness, ...) already checked by `decode` or `check`.

    A request may leave out policy cameras the robot does not have (the policy sees them masked, as openpi and LeRobot
    mask absent cameras), but must carry at least one. Images may have any size: METADATA's camera size is the model's
    input size, a recommendation; the server resizes (aspect kept, zero padding) as the policy was trained. Only an
    image too thin to keep one pixel per side after that resize is refused.
    """
    expected = {c.name: c for c in metadata.cameras}
    unknown = sorted(set(infer.images) - set(expected))
    if unknown:
        raise MessageError(ErrorCode.UNKNOWN_CAMERA, f"unknown camera(s) {unknown}; the policy has {sorted(expected)}")
    if not infer.images:  # a camera the robot does not have may be left out (masked); all of them may not
        raise MessageError(ErrorCode.UNKNOWN_CAMERA, f"no camera image; the policy has {sorted(expected)}")
    for name, image in infer.images.items():
        cam, (height, width) = expected[name], image.shape[:2]
        ratio = max(width / cam.width, height / cam.height, 1e-9)  # resize-with-pad's scale
        _check(
            int(height / ratio) >= 1 and int(width / ratio) >= 1,
            f"image {name!r}: {height}x{width} is too thin to resize into {cam.height}x{cam.width}",
        )
    _check(
        infer.state.shape[0] == metadata.state_dim,
        f"state: expected {metadata.state_dim} dims, got {infer.state.shape[0]}",
    )
    h, a = metadata.chunk_length, metadata.action_dim
    for name in ("prefix", "guidance"):
        value = getattr(infer, name)
        if value is not None:
            _check(value.shape[1] == a, f"{name}: expected {a} action dims, got {value.shape[1]}")
    d = 0 if infer.prefix is None else len(infer.prefix)
    _check(d < h, f"prefix: {d} rows, must be fewer than chunk_length {h}")
    _check(infer.delay_steps <= h, f"delay_steps={infer.delay_steps} exceeds chunk_length {h}")
    s = infer.execution_horizon
    _check(s is None or 1 <= s <= h, f"execution_horizon={s} must be in [1, chunk_length {h}]")
    if infer.guidance is not None:
        rows, schedule = len(infer.guidance), infer.schedule or metadata.schedule
        _check(1 <= rows <= h, f"guidance: {rows} rows, must be 1 to chunk_length {h}")
        _check(schedule == "constant", f"guidance (guided RTC) needs schedule 'constant', got {schedule!r}")
        delay = d if d else infer.delay_steps
        s = s if s is not None else max(1, h - rows)
        _check(delay + s <= h, f"delay {delay} + execution_horizon {s} exceeds chunk_length {h}")


def _check(ok: bool, message: str) -> None:
    if not ok:
        raise MessageError(ErrorCode.BAD_VALUE, message)
