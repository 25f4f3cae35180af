"""The two sides tools/bench_vs_lerobot.py times on one LeRobot pi0.5 checkpoint: LeRobot 0.6.1's own pipeline
(PI05Policy.from_pretrained and its saved processors) and vlash's (`load_runtime(checkpoint=...)`, the path
`vlash serve --checkpoint` takes). Each gives a model-only chunk (normalized actions from prepared inputs) and a
pipeline chunk (robot-unit actions from a raw observation), both with the noise given."""

from __future__ import annotations

import contextlib
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from bench_vs_lerobot_build import TOKENIZER

from vlash.policies.formats.base import CheckpointOptions
from vlash.policies.pi05.config import config_from_dict
from vlash.policies.processing.processor import Observation
from vlash.runtime.loading import load_runtime
from vlash.runtime.request import make_infer
from vlash.sampling import FlowSampler, SamplerConfig

LEROBOT_DTYPES = {"fp32": "float32", "bf16": "bfloat16"}


@dataclass(frozen=True)
class RawObservation:
    """One robot observation as both sides receive it: uint8 HWC images by camera name, state, task, noise seed."""

    images: dict[str, np.ndarray]
    state: np.ndarray
    task: str
    seed: int


def random_observation(cameras: int, state_dims: int, seed: int) -> RawObservation:
    rng = np.random.default_rng(seed)
    images = {f"cam{i}": rng.integers(0, 256, (224, 224, 3), dtype=np.uint8) for i in range(cameras)}
    state = rng.uniform(-60, 60, state_dims).astype(np.float32)
    return RawObservation(images, state, "pick up the red cube and place it in the bowl", seed)


def seed_noise(seed: int, horizon: int, action_dim: int) -> torch.Tensor:
    """The noise vlash's runtime draws for a request with this seed (PolicyRuntime._noise)."""
    return torch.randn(1, horizon, action_dim, generator=torch.Generator().manual_seed(seed))


class LeRobotSide:
    """LeRobot's inference pipeline: prepare_observation_for_inference, preprocessor, predict_action_chunk,
    postprocessor, with the noise injected as tests/fixtures/lerobot_pi05_tiny does (policy.model.sample_noise)."""

    def __init__(self, checkpoint: Path, dtype: str) -> None:
        from lerobot.configs.policies import PreTrainedConfig
        from lerobot.policies.pi05.modeling_pi05 import PI05Policy
        from lerobot.processor import PolicyProcessorPipeline
        from lerobot.processor.converters import policy_action_to_transition, transition_to_policy_action

        config = PreTrainedConfig.from_pretrained(str(checkpoint))
        config.dtype = LEROBOT_DTYPES[dtype]
        with contextlib.redirect_stdout(sys.stderr):  # LeRobot prints its loading progress; stdout is the table's
            self.policy = PI05Policy.from_pretrained(str(checkpoint), config=config).eval()
        self.pre = PolicyProcessorPipeline.from_pretrained(str(checkpoint), "policy_preprocessor.json")
        self.post = PolicyProcessorPipeline.from_pretrained(
            str(checkpoint),
            "policy_postprocessor.json",
            to_transition=policy_action_to_transition,
            to_output=transition_to_policy_action,
        )

    def _inject(self, noise: torch.Tensor) -> None:
        self.policy.model.sample_noise = lambda shape, device: noise.clone()

    def batch(self, obs: RawObservation) -> dict:
        """The preprocessed batch predict_action_chunk takes (tokens, normalized state, float images)."""
        from lerobot.policies.utils import prepare_observation_for_inference

        raw = {f"observation.images.{cam}": image.copy() for cam, image in obs.images.items()}
        raw["observation.state"] = obs.state.copy()
        batch = prepare_observation_for_inference(raw, torch.device("cpu"), obs.task, "so101_follower")
        return self.pre(batch)

    @torch.no_grad()
    def model_chunk(self, batch: dict, noise: torch.Tensor) -> np.ndarray:
        """Normalized actions [1, H, action dims]: predict_action_chunk on a prepared batch."""
        self._inject(noise)
        return self.policy.predict_action_chunk(batch).float().numpy()

    @torch.no_grad()
    def pipeline_chunk(self, obs: RawObservation, noise: torch.Tensor) -> np.ndarray:
        """Robot-unit actions [H, action dims] from a raw observation."""
        self._inject(noise)
        return self.post(self.policy.predict_action_chunk(self.batch(obs))).float().numpy()[0]


class VlashSide:
    """vlash's runtime on the same checkpoint: the torch engine (eager) at `dtype`."""

    def __init__(self, checkpoint: Path, sizes: dict, dtype: str) -> None:
        options = CheckpointOptions(tokenizer=TOKENIZER / "tokenizer.json", model_config=config_from_dict(sizes))
        self.runtime = load_runtime(checkpoint=checkpoint, device="cpu", dtype=dtype, options=options).runtime
        self.engine, self.processor = self.runtime.engine, self.runtime.processor
        self.sampler = FlowSampler(SamplerConfig(num_steps=self.runtime.num_steps, schedule="constant"))
        self.dtype = dtype

    def inputs(self, obs: RawObservation):
        """The model's inputs (Pi05Inputs: images in [-1, 1], tokens, masks), as the runtime prepares them."""
        return self.processor.preprocess([Observation(obs.images, obs.state, obs.task)], device=self.engine.device)

    @torch.no_grad()
    def model_chunk(self, inputs, noise: torch.Tensor) -> np.ndarray:
        """Normalized actions [1, H, action dims]: prefill + the Euler steps on prepared inputs, the time given once per
        row (`shared_time`, as the serving path and LeRobot's denoise step give it with the constant schedule)."""
        cache = self.engine.prefill(inputs)
        step = lambda x, tau: self.engine.denoise_step(x, tau, cache)  # noqa: E731
        result = self.sampler.sample(step, noise, synchronize=self.engine.synchronize, shared_time=True)
        return result.actions[..., : self.processor.action_dims].float().numpy()

    def pipeline_chunk(self, obs: RawObservation) -> np.ndarray:
        """Robot-unit actions [H, action dims] from a raw observation (PolicyRuntime.run, noise from the seed)."""
        return np.asarray(self.runtime.run(make_infer(obs.images, obs.state, obs.task, seed=obs.seed)).actions)
