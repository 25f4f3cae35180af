"""Size bounds a receiver enforces (what a policy itself accepts is checked at admission: vlash.runtime.admission)."""

from __future__ import annotations

from dataclasses import dataclass, fields


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
