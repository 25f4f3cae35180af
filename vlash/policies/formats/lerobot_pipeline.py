"""Read a LeRobot pi0.5 checkpoint's processor pipelines (`policy_preprocessor.json`, `policy_postprocessor.json`).

LeRobot (>= 0.4) saves each pipeline as `{"name", "steps": [{"registry_name", "config", "state_file"?,
"artifacts"?}]}`; a step's state file is named by its index in the pipeline, which moved when 0.5.1 inserted a
relative-actions step, so the files are always found through each step's "state_file", never by name. What
each known step means to vlash:

    rename_observations_processor    the robot sends the policy's camera names (vlash run --camera maps them)
    to_batch_processor, device_processor           nothing to do
    relative_actions_processor (0.6+) / delta_actions_processor (0.5.1)
                                     actions relative to the raw state, per dim (exclude_joints by name)
    normalizer_processor             state / action stats (pre); unnormalizer_processor: action stats (post)
    pi05_prepare_state_tokenizer_processor_step    the state-in-prompt format (pi0.5's only one)
    tokenizer_processor              prompt length; since LeRobot 0.6.2 the tokenizer itself (artifacts)
    absolute_actions_processor       the inverse of the relative step: must agree with it

Any other step is refused with its name: it may change numbers vlash would not reproduce.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from vlash.errors import CheckpointError
from vlash.policies.formats.layouts import LEROBOT_PREPROCESSOR, read_json_object, tokenizer_artifact
from vlash.policies.formats.stats_io import read_flat_stats
from vlash.policies.processing.normalization import FeatureNorm, Normalizer, NormMode

log = logging.getLogger(__name__)
PREPROCESSOR_JSON = LEROBOT_PREPROCESSOR
POSTPROCESSOR_JSON = "policy_postprocessor.json"
RELATIVE_STEPS = ("relative_actions_processor", "delta_actions_processor")
IGNORED_STEPS = ("rename_observations_processor", "to_batch_processor", "device_processor")
PRE_STEPS = (
    *IGNORED_STEPS,
    *RELATIVE_STEPS,
    "normalizer_processor",
    "pi05_prepare_state_tokenizer_processor_step",
    "tokenizer_processor",
)
POST_STEPS = ("device_processor", "unnormalizer_processor", "absolute_actions_processor")


@dataclass(frozen=True)
class RelativeActions:
    """The relative-actions step: `action - state` on the dims its mask selects (raw units, before normalizing)."""

    exclude_joints: tuple[str, ...]  # name pieces kept absolute (case-insensitive substring of the action names)
    action_names: tuple[str, ...] | None  # the dataset's action names; None: every dim is relative

    def mask(self, action_dims: int) -> tuple[bool, ...]:
        """LeRobot's `_build_mask`: excluded where an action name contains an excluded piece."""
        if not self.exclude_joints or self.action_names is None:
            return (True,) * action_dims
        pieces = [p.lower() for p in self.exclude_joints]
        names = [n.lower() for n in self.action_names[:action_dims]]
        excluded = [any(p in name for p in pieces) for name in names]
        return tuple(not e for e in excluded) + (True,) * (action_dims - len(excluded))


@dataclass(frozen=True)
class LeRobotPipeline:
    """What vlash takes from the two pipelines."""

    normalizer: Normalizer  # observation stats from the preprocessor, action stats from the postprocessor
    relative: RelativeActions | None  # None: absolute actions
    tokenizer_dir: Path | None  # the checkpoint's own tokenizer (LeRobot >= 0.6.2 saves one), else None
    tokenizer_max_length: int | None  # the tokenizer step's max_length


def _read_pipeline(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        raise CheckpointError(
            f"{path} not found: a LeRobot pi0.5 checkpoint has {PREPROCESSOR_JSON} and {POSTPROCESSOR_JSON} "
            "next to config.json"
        )
    steps = read_json_object(path).get("steps")
    if not isinstance(steps, list) or not all(isinstance(s, dict) for s in steps):
        raise CheckpointError(f"{path}: expected an object with a 'steps' list of objects")
    return steps


def _step_name(step: dict[str, Any]) -> str:
    return str(step.get("registry_name") or step.get("class") or "<unnamed>")


def _check_known(path: Path, steps: list[dict[str, Any]], known: tuple[str, ...]) -> None:
    unknown = [f"steps[{i}] {_step_name(s)!r}" for i, s in enumerate(steps) if s.get("registry_name") not in known]
    if unknown:
        raise CheckpointError(
            f"{path}: vlash does not know the processor step(s) {', '.join(unknown)}; it reproduces only "
            f"{', '.join(known)}"
        )


def _one(path: Path, steps: list[dict[str, Any]], names: tuple[str, ...]) -> dict[str, Any] | None:
    found = [s for s in steps if s.get("registry_name") in names]
    if len(found) > 1:
        raise CheckpointError(f"{path}: more than one {' / '.join(names)} step")
    return found[0] if found else None


def _norm_features(directory: Path, path: Path, step: dict[str, Any] | None, name: str) -> list[FeatureNorm]:
    """FeatureNorms of a (un)normalizer step: its features, norm_map and state file."""
    if step is None:
        raise CheckpointError(f"{path}: no '{name}' step (the stats vlash needs)")
    conf = step.get("config") or {}
    if "state_file" not in step:
        raise CheckpointError(f"{path}: step '{name}' has no state_file (no stats were saved)")
    state_path = directory / str(step["state_file"])
    stats = read_flat_stats(state_path)
    norm_map, only = conf.get("norm_map", {}), conf.get("normalize_observation_keys")
    eps = float(conf.get("eps", 1e-8))
    feats = []
    for key, spec in conf.get("features", {}).items():
        ftype = spec.get("type")
        try:
            mode = NormMode(norm_map.get(ftype, "IDENTITY"))
        except ValueError:
            bad = norm_map.get(ftype)
            raise CheckpointError(f"{path}: step '{name}': unknown norm mode {bad!r} for {ftype}") from None
        if only is not None and ftype != "ACTION" and key not in only:
            mode = NormMode.IDENTITY
        if mode is not NormMode.IDENTITY and key not in stats:
            raise CheckpointError(
                f"{state_path}: feature {key!r} ({ftype}) uses {mode.value} but the file has no stats for it; "
                f"it has stats for {sorted(stats)}"
            )
        try:
            feats.append(FeatureNorm(key=key, mode=mode, stats=stats.get(key, {}), eps=eps))
        except ValueError as exc:
            raise CheckpointError(f"{state_path}: {exc}") from None
    return feats


def _relative(
    path: Path, pre: dict[str, Any] | None, post: dict[str, Any] | None, post_path: Path
) -> RelativeActions | None:
    enabled = bool(((pre or {}).get("config") or {}).get("enabled", False))
    inverse = bool(((post or {}).get("config") or {}).get("enabled", False))
    if enabled != inverse:
        raise CheckpointError(
            f"{path} and {post_path} disagree: the relative-actions step is {'on' if enabled else 'off'} but "
            f"absolute_actions_processor is {'on' if inverse else 'off'}"
        )
    if not enabled:
        return None
    conf = (pre or {}).get("config") or {}
    names = conf.get("action_names")
    return RelativeActions(tuple(conf.get("exclude_joints") or ()), None if names is None else tuple(names))


def read_lerobot_pipeline(directory: str | Path) -> LeRobotPipeline:
    """The normalizer, relative-actions setting and tokenizer of a LeRobot pi0.5 checkpoint directory."""
    directory = Path(directory)
    pre_path, post_path = directory / PREPROCESSOR_JSON, directory / POSTPROCESSOR_JSON
    pre, post = _read_pipeline(pre_path), _read_pipeline(post_path)
    _check_known(pre_path, pre, PRE_STEPS)
    _check_known(post_path, post, POST_STEPS)
    normalizer = _one(pre_path, pre, ("normalizer_processor",))
    features = {f.key: f for f in _norm_features(directory, pre_path, normalizer, "normalizer_processor")}
    unnorm = _one(post_path, post, ("unnormalizer_processor",))
    for feat in _norm_features(directory, post_path, unnorm, "unnormalizer_processor"):
        old = features.get(feat.key)
        if old is not None and old.mode is not NormMode.IDENTITY and not _same_stats(old, feat):
            log.warning("%s: pre- and postprocessor stats for %r differ; using the latter", directory, feat.key)
        features[feat.key] = feat  # LeRobot unnormalizes the action with the postprocessor's stats
    absolute = _one(post_path, post, ("absolute_actions_processor",))
    relative = _relative(pre_path, _one(pre_path, pre, RELATIVE_STEPS), absolute, post_path)
    step = _one(pre_path, pre, ("tokenizer_processor",))
    tokenizer_dir, max_length = tokenizer_artifact(directory, pre_path, step)
    return LeRobotPipeline(Normalizer(features.values()), relative, tokenizer_dir, max_length)


def relative_mask(pipeline: LeRobotPipeline, action_dims: int) -> tuple[bool, ...] | None:
    """Per-dim relative mask of the pipeline's relative step (None when actions are absolute)."""
    return None if pipeline.relative is None else pipeline.relative.mask(action_dims)


def _same_stats(a: FeatureNorm, b: FeatureNorm) -> bool:
    keys = set(a.stats) | set(b.stats)
    return a.mode is b.mode and all(np.array_equal(a.stats.get(k), b.stats.get(k)) for k in keys)
