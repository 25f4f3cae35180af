"""Calibration and held-out observations rendered by the simulator (never random data).

Frames come from scripted-expert episodes of vlash.sim, with each task's own instruction as the prompt
and the arm state the robot would send, so activation ranges match what the policy sees in service.
Calibration and held-out sets use disjoint episode seeds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from vlash.errors import ConfigError
from vlash.policies.pi05.model import Pi05Inputs
from vlash.policies.processing.processor import Observation, Pi05Processor

HELD_OUT_SEED_BASE = 100_000  # held-out episodes use seeds from here; calibration ones start at 0
DEFAULT_TASKS = ("reach", "track", "whack", "intercept")


@dataclass
class FrameSpec:
    """Which simulated frames to render."""

    tasks: tuple[str, ...] = DEFAULT_TASKS  # vlash.sim tasks, cycled over episodes
    episodes: int = 4  # episodes to sample from, >= 1
    frames_per_episode: int = 4  # frames taken per episode (evenly spaced over its first steps), >= 1
    stride: int = 12  # control steps between taken frames, >= 1
    image_size: int = 96  # simulator render size (the processor resizes to the policy's input)
    held_out: bool = False  # True: seeds from HELD_OUT_SEED_BASE (disjoint from calibration)
    seeds: list[int] = field(default_factory=list, init=False)  # filled by `render_observations`
    rendered: int = field(default=0, init=False)  # frames actually rendered (episodes may end early)

    def __post_init__(self) -> None:
        self.tasks = tuple(self.tasks)
        if not self.tasks:
            raise ConfigError("FrameSpec.tasks must name at least one vlash.sim task")
        for name in ("episodes", "frames_per_episode", "stride", "image_size"):
            if int(getattr(self, name)) < 1:
                raise ConfigError(f"FrameSpec.{name} must be >= 1, got {getattr(self, name)!r}")

    def describe(self) -> dict[str, Any]:
        return {
            "source": "vlash.sim",
            "tasks": list(self.tasks),
            "seeds": list(self.seeds),
            "frames": self.rendered,
            "stride": self.stride,
            "image_size": self.image_size,
        }


def render_observations(spec: FrameSpec) -> list[tuple[np.ndarray, np.ndarray, str]]:
    """(image uint8 [S, S, 3], state float32 [J], instruction) per frame, from scripted-expert episodes."""
    from vlash.sim import make_env  # extra: sim

    frames: list[tuple[np.ndarray, np.ndarray, str]] = []
    spec.seeds = []
    envs: dict[str, Any] = {}
    base = HELD_OUT_SEED_BASE if spec.held_out else 0
    for episode in range(spec.episodes):
        task = spec.tasks[episode % len(spec.tasks)]
        env = envs.setdefault(task, make_env(task, seed=0, image_size=spec.image_size))
        seed = base + episode
        spec.seeds.append(seed)
        obs, _ = env.reset(seed=seed)
        for k in range(spec.frames_per_episode * spec.stride):
            if k % spec.stride == 0:
                frames.append((obs["image"].copy(), np.asarray(obs["state"], np.float32).copy(), env.instruction))
            obs, _, terminated, truncated, _ = env.step(env.expert_action())
            if terminated or truncated:
                break
    spec.rendered = len(frames)
    return frames


def sim_inputs(processor: Pi05Processor, spec: FrameSpec, device: str = "cpu") -> list[tuple[Pi05Inputs, np.ndarray]]:
    """Model-ready batches (batch 1) of simulated frames, each with the state it carried. The image goes to
    the policy's first camera, as the evaluation harness sends it."""
    camera = processor.config.camera_names[0]
    out = []
    for image, state, prompt in render_observations(spec):
        obs = Observation(images={camera: image}, state=state[: _state_dims(processor)], prompt=prompt)
        out.append((processor.preprocess([obs], device=device), state))
    return out


def _state_dims(processor: Pi05Processor) -> int:
    dims = processor.prompt_encoder.state_dims
    if dims is not None:
        return dims
    feature = processor.normalizer.feature(processor.state_key).dim
    return feature if feature is not None else processor.action_dims


def policy_tasks(metadata: dict[str, Any], default: Sequence[str] = DEFAULT_TASKS) -> tuple[str, ...]:
    """The sim tasks a trained policy was trained on (from its metadata), else `default`."""
    tasks = (metadata.get("config") or {}).get("tasks") if isinstance(metadata, dict) else None
    return tuple(tasks) if tasks else tuple(default)
