"""Wire messages <-> runtime requests: the policy's Metadata, and INFER checked for what `validate_infer` cannot
know (sampler constraints) before `ChunkRequest.from_infer` turns it into a runtime request."""

from __future__ import annotations

from robot_io.protocol import CameraSpec, ErrorCode, Infer, MessageError, Metadata, validate_infer
from vlash.runtime.policy_runtime import PolicyRuntime

DEFAULT_CONTROL_RATE_HZ = 50.0


def policy_metadata(
    runtime: PolicyRuntime, model_id: str, engine: str, precision: str, control_rate_hz: float | None = None
) -> Metadata:
    """What a client learns on HELLO. Cameras are advertised at the model's input size: a recommendation, the
    processor resizes any size as the policy was trained (docs/PROTOCOL.md, "Images")."""
    cfg = runtime.config
    size = cfg.vision.image_size
    meta_rate = runtime.policy.metadata.get("control_rate_hz")
    rate = control_rate_hz or (float(meta_rate) if isinstance(meta_rate, int | float) else DEFAULT_CONTROL_RATE_HZ)
    return Metadata(
        model_id=model_id,
        cameras=[CameraSpec(name, size, size) for name in cfg.camera_names],
        state_dim=runtime.state_dims,
        action_dim=runtime.action_dims,
        chunk_length=runtime.horizon,
        control_rate_hz=rate,
        precision=precision,
        engine=engine,
        num_steps=runtime.num_steps,
        schedule=runtime.schedule,
        relative_actions=runtime.processor.relative,
    )


def check_infer(infer: Infer, metadata: Metadata) -> None:
    """Raise MessageError (code to reply) unless the runtime can serve `infer`."""
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
