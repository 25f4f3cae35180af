"""Load an openpi PyTorch checkpoint (what openpi's `examples/convert_jax_model_to_pytorch.py` writes).

    model.safetensors                    "paligemma_with_expert...." keys, usually bf16; the VLM embedding may be
                                         stored only as its tied lm_head (vlash.policies.pi05.weights handles both)
    config.json                          optional, for reference: action_dim, action_horizon, variants, precision
    assets/<asset_id>/norm_stats.json    quantile stats of "state" and "actions" (the robot's real dims)

openpi's converter copies assets/ from the wrong folder (openpi issue #638): copy `<jax checkpoint>/assets`
next to model.safetensors by hand if it is missing. What openpi keeps in its named train config and not in the
checkpoint comes from `CheckpointOptions`: the asset id when there are several, whether the prompt carries the
state (False for `pi05_libero`), and DeltaActions dims (`pi05_aloha`: the joints, not the grippers).
openpi's robot-specific transforms beyond that (ALOHA's `adapt_to_pi` joint flips, DROID's output slice) are the
client's business: vlash serves the model's real action dims.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from vlash.errors import CheckpointError
from vlash.policies.formats.base import CheckpointOptions, LoadedPolicy, arithmetic
from vlash.policies.formats.layouts import NO_TOKENIZER, read_json_object
from vlash.policies.formats.stats_io import OPENPI_NORM_STATS_JSON, load_openpi_norm_stats
from vlash.policies.pi05.config import Pi05Config, load_preset
from vlash.policies.pi05.weights import load_model
from vlash.policies.processing.normalization import Normalizer
from vlash.policies.processing.processor import Pi05Processor
from vlash.policies.processing.tokenizer import Pi05PromptEncoder, PromptTokenizer, TokenizerError

PI05_CAMERAS = ("base_0_rgb", "left_wrist_0_rgb", "right_wrist_0_rgb")  # openpi's image keys, in token order
STATE_KEY, ACTION_KEY = "observation.state", "action"  # names load_openpi_norm_stats gives "state" / "actions"


def asset_ids(root: Path) -> list[str]:
    """Ids of the norm stats under `root/assets` ("droid", "physical-intelligence/libero", ...)."""
    assets = root / "assets"
    return sorted(str(p.parent.relative_to(assets)) for p in assets.rglob(OPENPI_NORM_STATS_JSON))


def norm_stats_file(root: Path, asset_id: str | None) -> Path:
    """The norm_stats.json to use: `asset_id`'s, or the only one there is."""
    ids = asset_ids(root)
    if asset_id is not None:
        if asset_id not in ids:
            raise CheckpointError(f"{root / 'assets'} has no {asset_id}/{OPENPI_NORM_STATS_JSON}; it has {ids}")
        return root / "assets" / asset_id / OPENPI_NORM_STATS_JSON
    if len(ids) != 1:
        found = f"several ({', '.join(ids)}): choose one with --asset-id" if ids else "none"
        raise CheckpointError(
            f"{root / 'assets'}: expected one <asset_id>/{OPENPI_NORM_STATS_JSON}, found {found} (openpi's converter "
            "may have skipped assets/: copy them from the JAX checkpoint)"
        )
    return root / "assets" / ids[0] / OPENPI_NORM_STATS_JSON


def openpi_normalizer(path: Path) -> tuple[Normalizer, int, int]:
    """(quantile normalizer, state dims, action dims) of an openpi norm_stats.json."""
    normalizer = load_openpi_norm_stats(path)
    dims = {}
    for key, name in ((STATE_KEY, "state"), (ACTION_KEY, "actions")):
        if key not in normalizer:
            raise CheckpointError(f"{path}: norm_stats has no {name!r} entry")
        stats = normalizer.feature(key).stats
        if "q01" not in stats or "q99" not in stats:
            raise CheckpointError(f"{path}: norm_stats.{name} needs q01 and q99 (pi0.5 normalizes by quantiles)")
        dims[name] = int(stats["q01"].shape[0])
    return normalizer, dims["state"], dims["actions"]


def _reference_config(root: Path) -> dict[str, Any]:
    source = root / "config.json"
    if not source.is_file():
        return {}
    doc = read_json_object(source)
    variants = (doc.get("paligemma_variant", "gemma_2b"), doc.get("action_expert_variant", "gemma_300m"))
    if variants != ("gemma_2b", "gemma_300m"):
        raise CheckpointError(f"{source}: variants {variants}; a full-size pi0.5 is gemma_2b + gemma_300m")
    return doc


def openpi_model_config(doc: dict[str, Any]) -> Pi05Config:
    """pi0.5's full-size config with the checkpoint's chunk length (openpi's Pi0Config(pi05=True) defaults)."""
    return load_preset("pi05").with_overrides(
        name="pi05-openpi",
        camera_names=list(PI05_CAMERAS),
        action_horizon=int(doc.get("action_horizon", 50)),
        action_dim=int(doc.get("action_dim", 32)),
        max_token_len=200,
    )


def openpi_tokenizer(root: Path, options: CheckpointOptions) -> PromptTokenizer:
    if options.tokenizer is not None:
        return PromptTokenizer.from_dir(options.tokenizer)
    try:
        return PromptTokenizer.from_dir(root)
    except TokenizerError:
        raise TokenizerError(NO_TOKENIZER["openpi"].format(path=root)) from None


def openpi_processor(
    config: Pi05Config, stats_file: Path, tokenizer: PromptTokenizer, options: CheckpointOptions
) -> Pi05Processor:
    """openpi's pi0.5 inputs: quantile stats, the state in the prompt unless told otherwise, antialiased resize."""
    normalizer, state_dims, action_dims = openpi_normalizer(stats_file)
    if action_dims > config.action_dim:
        raise CheckpointError(f"{stats_file}: {action_dims} action dims, more than the model's {config.action_dim}")
    state_in_prompt = True if options.state_in_prompt is None else options.state_in_prompt
    encoder = Pi05PromptEncoder(
        tokenizer, max_len=config.max_token_len, state_dims=state_dims, state_in_prompt=state_in_prompt
    )
    mask = options.relative_mask
    if mask is not None and len(mask) != action_dims:
        raise CheckpointError(f"relative mask has {len(mask)} entries, {stats_file} has {action_dims} action dims")
    return Pi05Processor(config, normalizer, encoder, action_dims=action_dims, relative_mask=mask)


def load_openpi_policy(
    root: Path, dtype: str | torch.dtype, device: str | torch.device, options: CheckpointOptions
) -> LoadedPolicy:
    doc = _reference_config(root)
    config = options.sized(openpi_model_config(doc))
    stats_file = norm_stats_file(root, options.asset_id)
    processor = openpi_processor(config, stats_file, openpi_tokenizer(root, options), options)
    model = load_model(config, root / "model.safetensors", dtype=dtype, device=device)
    asset_id = str(stats_file.parent.relative_to(root / "assets"))
    metadata = {"source": "openpi-pytorch", "asset_id": asset_id, "arithmetic": arithmetic(processor)}
    return LoadedPolicy(model, processor, metadata | {"openpi_config": doc})
