"""Size bounds a receiver enforces, and the server-side check of a request against the policy's metadata."""

from __future__ import annotations

from dataclasses import dataclass, fields

from robot_io.protocol.messages import ErrorCode, Infer, MessageError, Metadata


@dataclass(frozen=True)
class Limits:
    """Upper bounds on what decode accepts; anything larger is refused before it is allocated."""

    max_frames: int = 32  # frames per message, header included
    max_header_bytes: int = 64 * 1024  # size of the msgpack header frame
    max_image_side: int = 4096  # pixels, height and width
    max_images: int = 16  # cameras per request
    max_state_dim: int = 1024
    max_action_dim: int = 1024
    max_chunk_length: int = 4096  # actions per chunk; also bounds prefix/guidance rows and step counts
    max_prompt_chars: int = 4096  # prompt and other free text
    max_frame_bytes: int = 64 * 1024 * 1024  # size of one array frame
    # all frames of one message together; a receiver reads a longer message part by part, keeping none of it
    max_message_bytes: int = 256 * 1024 * 1024

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"Limits.{f.name} must be a positive int, got {value!r}")
        if self.max_frames < 2 + self.max_images:
            raise ValueError(f"Limits.max_frames={self.max_frames} is below 2 + max_images={self.max_images}")
        if self.max_message_bytes < self.max_header_bytes:
            raise ValueError(f"Limits.max_message_bytes={self.max_message_bytes} is below max_header_bytes")

    @property
    def largest_frame_bytes(self) -> int:
        """The largest single frame a receiver can accept (the ZMQ_MAXMSGSIZE a receiving socket sets)."""
        return max(self.max_header_bytes, min(self.max_frame_bytes, self.max_message_bytes))


def validate_infer(infer: Infer, metadata: Metadata) -> None:
    """Check a decoded request against the policy it is for; raise MessageError with the code to reply.

    decode() has already checked dtypes, ranks, bounds (image sides <= Limits.max_image_side) and
    finiteness; this adds what only the server knows: camera names, state and action dims, chunk length.
    A request may leave out policy cameras the robot does not have (the policy sees them masked, as openpi and
    LeRobot mask absent cameras), but must carry at least one.
    Images may have any size: METADATA's camera size is the model's input size, a recommendation; the server
    resizes (aspect kept, zero padding) as the policy was trained. Only an image too thin to keep one pixel per
    side after that resize is refused.
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
            _check(value.shape[0] <= h, f"{name}: {value.shape[0]} rows exceed chunk_length {h}")
    _check(infer.delay_steps <= h, f"delay_steps={infer.delay_steps} exceeds chunk_length {h}")
    if infer.execution_horizon is not None:
        _check(infer.execution_horizon <= h, f"execution_horizon={infer.execution_horizon} exceeds chunk_length {h}")


def _check(ok: bool, message: str) -> None:
    if not ok:
        raise MessageError(ErrorCode.BAD_VALUE, message)
