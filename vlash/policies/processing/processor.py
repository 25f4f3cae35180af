"""Robot observation <-> pi0.5 tensors: resize-with-pad images, normalize state into the prompt,
unnormalize actions. One object per policy, built from the checkpoint directory.

Action space: the robot always sends and receives absolute actions. A policy may predict some dims
relative to the state it was given (openpi's DeltaActions: `a_k - s` for every action of the chunk,
`relative_mask` True for those dims); `to_model_actions` and `postprocess` convert with the state of the
request, so a relative policy's first action sits at the given state by construction. A policy may also
see and predict another space than the joints (`transform`, vlash.policies.processing.transforms; e.g. the planar arm's
end-effector positions): states and given actions are mapped into it before normalization, and its chunk back
to joints after it. Relative actions and `relative_mask` are in the model's space. A state longer than the action
(joint velocities, a target's position after the joints) keeps its entries past the transform's `robot_dims` as
they are: the transform maps the leading joint entries only.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from vlash.errors import ShapeError
from vlash.policies.pi05.config import Pi05Config
from vlash.policies.pi05.model import Pi05Inputs
from vlash.policies.processing.image import to_model_image
from vlash.policies.processing.normalization import Normalizer
from vlash.policies.processing.tokenizer import Pi05PromptEncoder
from vlash.policies.processing.transforms import StateActionTransform

log = logging.getLogger(__name__)


@dataclass
class Observation:
    """One robot observation as it leaves the robot."""

    images: Mapping[str, np.ndarray]  # camera name -> uint8 [H, W, 3]; a camera left out is masked
    state: np.ndarray  # float [D] state in robot units: the joints, then any other entries (D <= action_dim)
    prompt: str  # task instruction


@dataclass
class Pi05Processor:
    config: Pi05Config  # model shapes (cameras, image size, action dims)
    normalizer: Normalizer  # stats for state and action
    prompt_encoder: Pi05PromptEncoder  # tokenizer + pi0.5 prompt format
    action_dims: int  # real action entries of the robot (the model predicts config.action_dim, padded)
    state_key: str = "observation.state"  # normalizer key of the state
    action_key: str = "action"  # normalizer key of the actions
    antialias: bool = True  # openpi resizes with antialiasing; LeRobot fine-tunes were trained without
    image_pad_value: float = -1.0  # model-space value of resize-with-pad borders (-3 for LeRobot 0.4 fine-tunes)
    round_resized_images: bool = True  # a resized image rounded to uint8 (openpi) or kept in floats (LeRobot)
    relative_mask: tuple[bool, ...] | None = None  # per action dim: predicted relative to the state (None: absolute)
    transform: StateActionTransform | None = None  # the model's space differs from the joints (None: joints)
    _warned_cameras: set[str] = field(default_factory=set, repr=False)

    def __post_init__(self) -> None:
        if not 1 <= self.action_dims <= self.config.action_dim:
            raise ShapeError(f"action_dims must be in [1, {self.config.action_dim}], got {self.action_dims}")
        for key in (self.state_key, self.action_key):
            if key not in self.normalizer:
                raise ShapeError(f"normalizer has no stats for {key!r} (has {self.normalizer.keys})")
        if self.transform is not None and self.action_dims != self.transform.robot_dims:
            kind, dims = self.transform.kind, self.transform.robot_dims
            raise ShapeError(f"transform {kind!r} acts on {dims} action dims, the policy has {self.action_dims}")
        if self.relative_mask is not None:
            self.relative_mask = tuple(bool(m) for m in self.relative_mask)
            if len(self.relative_mask) != self.model_action_dims:
                count, dims = len(self.relative_mask), self.model_action_dims
                raise ShapeError(f"relative_mask has {count} entries, the model predicts {dims} action dims")

    @property
    def model_action_dims(self) -> int:
        """Real action entries of the model's chunk (the transform's space when there is one)."""
        return self.action_dims if self.transform is None else self.transform.model_dims

    @property
    def relative(self) -> bool:
        """True when some action dims are predicted relative to the state."""
        return self.relative_mask is not None and any(self.relative_mask)

    def _model_state(self, states: np.ndarray) -> np.ndarray:
        """Robot states [..., D] -> the states the model sees: with a transform, its space for the leading
        `robot_dims` entries (the joints) and the entries after them as they are."""
        states = np.asarray(states, dtype=np.float32)
        if self.transform is None:
            return states
        joints = self.transform.robot_dims
        return np.concatenate([self.transform.to_model(states[..., :joints]), states[..., joints:]], axis=-1)

    def _state_offset(self, states: np.ndarray | None, shape: tuple[int, ...]) -> np.ndarray | None:
        """[..., 1, model_action_dims] to add to relative actions (zeros on absolute dims); None for absolute
        policies. `states` are robot joint states."""
        if not self.relative:
            return None
        if states is None:
            raise ShapeError("this policy predicts actions relative to the state: pass the request's state")
        states = self._model_state(states)
        dims = self.model_action_dims
        if states.shape[-1] < dims or states.shape[:-1] != shape[:-2]:
            raise ShapeError(f"state shape {states.shape} does not match actions {shape} ({dims} dims)")
        mask = np.array(self.relative_mask, dtype=np.float32)
        return (states[..., :dims] * mask)[..., None, :]

    def to_model_actions(self, actions: np.ndarray, states: np.ndarray | None = None) -> np.ndarray:
        """Absolute robot-unit actions [..., n, action_dims] -> normalized model actions (same shape); `states`
        [..., D] are the states the request carried (needed by relative policies, and by transforms of velocities)."""
        actions = np.asarray(actions, dtype=np.float32)
        if self.transform is not None:
            start = None if states is None else np.asarray(states, np.float32)[..., : self.transform.robot_dims]
            actions = self.transform.actions_to_model(actions, start)
        offset = self._state_offset(states, actions.shape)
        if offset is not None:
            actions = actions - offset
        return self.normalizer.normalize(self.action_key, actions).astype(np.float32)

    def preprocess(self, observations: Sequence[Observation], device: str | torch.device = "cpu") -> Pi05Inputs:
        """A batch of observations -> model inputs on `device`."""
        if not observations:
            raise ShapeError("preprocess needs at least one observation")
        images, masks, ids, token_masks = [], [], [], []
        for obs in observations:
            cam_images, cam_masks = self._images(obs, device)
            images.append(cam_images)
            masks.append(cam_masks)
            state = self.normalizer.normalize(self.state_key, self._model_state(obs.state))
            tok, tok_mask = self.prompt_encoder.encode(obs.prompt, state)
            ids.append(tok)
            token_masks.append(tok_mask)
        return Pi05Inputs(
            images=torch.stack(images),
            image_masks=torch.tensor(masks, device=device),
            tokens=torch.from_numpy(np.stack(ids)).to(device),
            token_masks=torch.from_numpy(np.stack(token_masks)).to(device),
        )

    def _images(self, obs: Observation, device: str | torch.device) -> tuple[torch.Tensor, list[bool]]:
        names = self.config.camera_names
        unknown = set(obs.images) - set(names)
        if unknown:
            raise ShapeError(f"unknown cameras {sorted(unknown)}; the policy has {list(names)}")
        size = self.config.vision.image_size
        out = torch.full((len(names), 3, size, size), -1.0, device=device)
        mask = []
        for i, name in enumerate(names):
            if name in obs.images:
                out[i] = to_model_image(
                    obs.images[name],
                    size,
                    antialias=self.antialias,
                    device=device,
                    pad_value=self.image_pad_value,
                    round_to_uint8=self.round_resized_images,
                )[0]
            elif name not in self._warned_cameras:
                self._warned_cameras.add(name)
                log.warning("camera %r missing from the observation: masked out", name)
            mask.append(name in obs.images)
        return out, mask

    def postprocess(self, actions: torch.Tensor, states: np.ndarray | None = None, first: int = 0) -> np.ndarray:
        """Model actions fp32 [B, H, action_dim] (normalized, padded) -> absolute robot units [B, H - first,
        action_dims]: rows [first, H) of the chunk; `states` [B, D] are the states the observations carried (needed
        by relative policies). Rows before `first` are context only: each row is its own without a transform, and
        with one (velocities in another space) a row maps at the state the rows before it lead to."""
        if self.transform is None:
            actions = actions[..., first:, :]  # the rows before change nothing: not converted again
        real = actions[..., : self.model_action_dims].detach().float().cpu().numpy()
        out = self.normalizer.unnormalize(self.action_key, real)
        offset = self._state_offset(states, out.shape)
        out = out if offset is None else out + offset
        if self.transform is None:
            return out
        if states is None:
            raise ShapeError(f"this policy plans through transform {self.transform.kind!r}: pass the request's state")
        robot = self.transform.to_robot(out, np.asarray(states, dtype=np.float32)[..., : self.transform.robot_dims])
        return robot[..., first:, :]
