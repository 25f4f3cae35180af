"""Tiny pi0.5 checkpoints in each real on-disk layout, with random weights, for the loading and serving tests.

- LeRobot 0.4.4, 0.5.1, 0.6.1 and 0.6.2 ("head"): config.json and both pipeline JSONs start from files LeRobot's
  own save code wrote (tests/fixtures/lerobot_layouts/, from its v0.4.4 / v0.5.1 / HEAD trees); this module only
  swaps in the test's features, sizes and relative-action setting and writes the state files those JSONs name,
  holding every stat LeRobot saves (min, max, mean, std, count, q01..q99 of every dataset feature). Weights are
  saved as each release saves them: 0.4.x ties the VLM embedding to lm_head and stores only lm_head (with the
  alias in the header), later releases store both; every release stores the expert's unused lm_head.
- openpi PyTorch: model.safetensors as openpi's converter writes it ("paligemma_with_expert." keys, tied
  embedding as lm_head), its reference config.json and assets/<id>/norm_stats.json.
- openpi JAX: an orbax params/ checkpoint of openpi's parameter tree plus assets/ (needs the openpi extra).
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import save_file

from tests.conftest import FIXTURES
from vlash.policies.pi05.model import Pi05Model
from vlash.policies.pi05.weights import export_state_dict

TEMPLATES = FIXTURES / "lerobot_layouts"
LEROBOT_VERSIONS = ("0.4.4", "0.5.1", "0.6.1", "head")
SO101_ACTIONS = ["shoulder_pan.pos", "shoulder_lift.pos", "elbow_flex.pos", "wrist_flex.pos", "wrist_roll.pos",
                 "gripper.pos"]  # fmt: skip
BOOKKEEPING = ("timestamp", "frame_index", "episode_index", "index", "task_index")  # stats LeRobot saves too
EMBED = "paligemma_with_expert.paligemma.model.language_model.embed_tokens.weight"
VLM_HEAD = "paligemma_with_expert.paligemma.lm_head.weight"
EXPERT_HEAD = "paligemma_with_expert.gemma_expert.lm_head.weight"


@dataclass(frozen=True)
class Stats:
    """Quantile stats of the state and the actions, in robot units (what the checkpoint normalizes with)."""

    state_q01: np.ndarray
    state_q99: np.ndarray
    action_q01: np.ndarray
    action_q99: np.ndarray

    @classmethod
    def random(cls, state_dims: int, action_dims: int, seed: int = 0) -> Stats:
        rng = np.random.default_rng(seed)
        lo_s, lo_a = rng.uniform(-2, 0, state_dims), rng.uniform(-2, 0, action_dims)
        return cls(*(x.astype(np.float32) for x in (lo_s, lo_s + rng.uniform(0.5, 3, state_dims), lo_a,
                                                     lo_a + rng.uniform(0.5, 3, action_dims))))  # fmt: skip


def _feature_stats(q01: np.ndarray, q99: np.ndarray) -> dict[str, np.ndarray]:
    mid, span = (q01 + q99) / 2, q99 - q01
    return {
        "min": q01 - 0.1 * span, "max": q99 + 0.1 * span, "mean": mid, "std": span / 4,
        "count": np.array([1000]), "q01": q01, "q10": q01 + 0.1 * span, "q50": mid, "q90": q99 - 0.1 * span,
        "q99": q99,
    }  # fmt: skip


def _stats_file(path: Path, stats: Stats, cameras: list[str], image_count_shape: tuple[int, ...]) -> None:
    features = {
        "observation.state": _feature_stats(stats.state_q01, stats.state_q99),
        "action": _feature_stats(stats.action_q01, stats.action_q99),
    }
    for cam in cameras:  # per-channel image stats, [3, 1, 1], already / 255
        image = {k: np.full((3, 1, 1), 0.5, np.float32) for k in ("min", "max", "mean", "std", "q01", "q50", "q99")}
        features[f"observation.images.{cam}"] = {**image, "count": np.ones(image_count_shape)}
    for name in BOOKKEEPING:
        features[name] = _feature_stats(np.zeros(1, np.float32), np.ones(1, np.float32))
    flat = {
        f"{key}.{stat}": torch.tensor(np.asarray(v, np.float32))
        for key, st in features.items()
        for stat, v in st.items()
    }
    save_file(flat, str(path))  # LeRobot stores float32 throughout, counts included


def _dump(path: Path, doc: dict, indent: int) -> None:
    path.write_text(json.dumps(doc, indent=indent))  # no trailing newline, as LeRobot writes them


def _template(version: str, name: str) -> dict:
    folder = {"0.4.4": "v0.4.4", "0.5.1": "v0.5.1_relative", "0.6.1": "head", "head": "head"}[version]
    return json.loads((TEMPLATES / folder / name).read_text())


def _lerobot_config(version: str, cameras: list[str], state_dims: int, action_dims: int, chunk: int,
                    token_len: int, relative: bool) -> dict:  # fmt: skip
    doc = _template(version, "config.json")
    doc["input_features"] = {f"observation.images.{c}": {"type": "VISUAL", "shape": [3, 96, 128]} for c in cameras}
    doc["input_features"]["observation.state"] = {"type": "STATE", "shape": [state_dims]}
    doc["output_features"] = {"action": {"type": "ACTION", "shape": [action_dims]}}
    doc.update(chunk_size=chunk, n_action_steps=chunk, tokenizer_max_length=token_len, num_inference_steps=4)
    if version == "0.6.1":  # HEAD's memory and training-time RTC keys came after 0.6.1
        for key in ("use_visual_memory", "use_proprioceptive_memory", "memory_frames", "memory_stride",
                    "memory_temporal_attention_every", "rtc_training_max_delay"):  # fmt: skip
            doc.pop(key)
    if "use_relative_actions" in doc:
        doc["use_relative_actions"] = relative
        doc["action_feature_names"] = SO101_ACTIONS[:action_dims] if action_dims == 6 else None
    return doc


def _pipelines(version: str, doc: dict, relative: bool) -> tuple[dict, dict]:
    pre, post = _template(version, "policy_preprocessor.json"), _template(version, "policy_postprocessor.json")
    features = {**doc["input_features"], **doc["output_features"]}
    for step in pre["steps"]:
        conf = step["config"]
        if step["registry_name"] == "normalizer_processor":
            conf["features"] = features
        elif step["registry_name"] in ("relative_actions_processor", "delta_actions_processor"):
            conf.update(enabled=relative, action_names=doc.get("action_feature_names"))
        elif step["registry_name"] == "tokenizer_processor":
            conf["max_length"] = doc["tokenizer_max_length"]
            if version == "0.6.1":  # the tokenizer artifact came with 0.6.2
                conf["tokenizer_name"] = "google/paligemma-3b-pt-224"
                step.pop("artifacts", None)
    for step in post["steps"]:
        if step["registry_name"] == "unnormalizer_processor":
            step["config"]["features"] = doc["output_features"]
        elif step["registry_name"] == "absolute_actions_processor":
            step["config"]["enabled"] = relative
    return pre, post


def _weights(model: Pi05Model, layout: str, tied: bool, dtype: torch.dtype = torch.float32) -> tuple[dict, dict]:
    """(tensors, header metadata) as LeRobot ("lerobot") or openpi's converter ("openpi-pytorch") saves them."""
    prefix = "model." if layout == "lerobot" else ""
    state = {k: v.to(dtype).clone() for k, v in export_state_dict(model, layout).items()}
    vocab, width = model.config.vocab_size, model.config.expert.width
    state[prefix + EXPERT_HEAD] = torch.randn(vocab, width, generator=torch.Generator().manual_seed(1)).to(dtype)
    embed = state[prefix + EMBED]
    state[prefix + VLM_HEAD] = embed.clone()
    if not tied:
        return state, {}
    del state[prefix + EMBED]  # safetensors' save_model keeps one name of tied tensors: the smallest
    return state, {prefix + EMBED: prefix + VLM_HEAD}


def write_lerobot(directory: Path, model: Pi05Model, version: str, stats: Stats, tokenizer_json: Path,
                  cameras: list[str], relative: bool = False, token_len: int = 160) -> Path:  # fmt: skip
    """A LeRobot `version` checkpoint of `model` (pi05, `cameras`, the dims of `stats`); `token_len`: the prompt
    length (the tiny test tokenizer spells numbers digit by digit: 32 state bins take ~110 tokens)."""
    directory.mkdir(parents=True, exist_ok=True)
    state_dims, action_dims = len(stats.state_q01), len(stats.action_q01)
    horizon = model.config.action_horizon
    doc = _lerobot_config(version, cameras, state_dims, action_dims, horizon, token_len, relative)
    pre, post = _pipelines(version, doc, relative)
    _dump(directory / "config.json", doc, indent=4)
    _dump(directory / "policy_preprocessor.json", pre, indent=2)
    _dump(directory / "policy_postprocessor.json", post, indent=2)
    newest = version in ("0.6.1", "head")
    for pipeline, counts in ((pre, (1, 1, 1) if newest else (1,)), (post, (1,))):
        for step in pipeline["steps"]:
            if "state_file" in step:
                _stats_file(directory / step["state_file"], stats, cameras, counts)
    tensors, metadata = _weights(model, "lerobot", tied=version == "0.4.4")
    if version == "head":
        metadata = {"format": "pt"}
    save_file(tensors, str(directory / "model.safetensors"), metadata=metadata or None)
    if version == "head":  # TokenizerProcessorStep.save_artifacts
        (directory / "tokenizer").mkdir()
        shutil.copyfile(tokenizer_json, directory / "tokenizer" / "tokenizer.json")
        shutil.copyfile(TEMPLATES / "head" / "tokenizer_config.json", directory / "tokenizer" / "tokenizer_config.json")
    return directory


def norm_stats_doc(stats: Stats) -> dict:
    """openpi's norm_stats.json content (mean / std present too, as openpi computes them)."""

    def entry(q01: np.ndarray, q99: np.ndarray) -> dict:
        return {"mean": ((q01 + q99) / 2).tolist(), "std": ((q99 - q01) / 4).tolist(), "q01": q01.tolist(),
                "q99": q99.tolist()}  # fmt: skip

    return {"norm_stats": {"state": entry(stats.state_q01, stats.state_q99),
                           "actions": entry(stats.action_q01, stats.action_q99)}}  # fmt: skip


def write_openpi_assets(root: Path, stats: Stats, asset_id: str) -> None:
    folder = root / "assets" / asset_id
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "norm_stats.json").write_text(json.dumps(norm_stats_doc(stats), indent=2))


def write_openpi_pytorch(directory: Path, model: Pi05Model, stats: Stats, asset_id: str = "droid",
                         dtype: torch.dtype = torch.float32) -> Path:  # fmt: skip
    """What openpi's convert_jax_model_to_pytorch.py writes (with assets/ copied next to it)."""
    directory.mkdir(parents=True, exist_ok=True)
    tensors, metadata = _weights(model, "openpi-pytorch", tied=True, dtype=dtype)
    save_file(tensors, str(directory / "model.safetensors"), metadata=metadata)
    precision = {torch.float32: "float32", torch.bfloat16: "bfloat16"}[dtype]
    reference = {
        "action_dim": model.config.action_dim,
        "action_horizon": model.config.action_horizon,
        "paligemma_variant": "gemma_2b",
        "action_expert_variant": "gemma_300m",
        "precision": precision,
    }
    (directory / "config.json").write_text(json.dumps(reference, indent=2))  # fmt: skip
    write_openpi_assets(directory, stats, asset_id)
    return directory


def nest(flat: dict[str, np.ndarray]) -> dict:
    """openpi's "/"-joined parameter paths -> the nested tree its checkpoints store."""
    tree: dict = {}
    for path, value in flat.items():
        node = tree
        *parents, leaf = path.split("/")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    return tree


def write_openpi_jax(root: Path, params: dict[str, np.ndarray], stats: Stats, asset_id: str = "droid") -> Path:
    """An openpi JAX checkpoint: orbax params/ holding {"params": tree} (as openpi saves) and assets/."""
    import orbax.checkpoint as ocp

    root.mkdir(parents=True, exist_ok=True)
    with ocp.PyTreeCheckpointer() as checkpointer:
        checkpointer.save((root / "params").resolve(), {"params": nest(params)})
    write_openpi_assets(root, stats, asset_id)
    return root
