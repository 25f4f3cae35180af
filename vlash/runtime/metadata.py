"""What a client learns of the policy: its Metadata (HELLO's reply, openpi's metadata frame). Requests are checked
against it by the one admission of every entry point (vlash.runtime.admission)."""

from __future__ import annotations

from robot_io.protocol import CameraSpec, Metadata
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
