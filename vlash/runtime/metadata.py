"""What a client learns of the policy: its Metadata (HELLO's reply, openpi's metadata frame). Requests are checked
against it by the one admission of every entry point (vlash.runtime.admission)."""

from __future__ import annotations

from typing import Any

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
        trained_with=trained_with(runtime.policy.metadata),
    )


def trained_with(policy_metadata: dict[str, Any]) -> list[str] | None:
    """The latency augmentations a checkpoint's metadata says it was trained with (`vlash train` records them under
    "augment": future-state offsets; committed prefixes on a share `mix_prob` of the samples, horizon-aware times
    on a share `has_prob` of those); None when it does not say (a LeRobot or openpi checkpoint)."""
    augment = policy_metadata.get("augment")
    if not isinstance(augment, dict):
        return None
    prefixes = bool(augment.get("prefix_mix")) and float(augment.get("mix_prob") or 0) > 0
    found = {
        "future-state": bool(augment.get("future_state")),
        "prefix": prefixes,
        "horizon-aware": prefixes and float(augment.get("has_prob") or 0) > 0,
    }
    return [name for name, trained in found.items() if trained]
