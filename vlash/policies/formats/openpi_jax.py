"""Convert an openpi JAX checkpoint (orbax params + assets) into a vlash policy directory.

    <checkpoint>/params/          orbax PyTree checkpoint holding {"params": openpi's nnx parameter tree}
    <checkpoint>/assets/<id>/norm_stats.json

Reading orbax needs the `openpi` extra (`pip install 'vlash[openpi]'`: orbax-checkpoint, which brings jax);
nothing else in vlash imports it. The parameter tree is flattened to openpi's "/"-joined paths and mapped by
`vlash.policies.formats.openpi_jax_params.convert_openpi_params`, the mapping the openpi parity test proves against
openpi's own JAX pi0.5. Trees saved during training carry a trailing "value" level, dropped as openpi drops it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch

from vlash.errors import CheckpointError, EngineUnavailable
from vlash.policies.formats.base import CheckpointOptions, LoadedPolicy, arithmetic
from vlash.policies.formats.layouts import checkpoint_dirs
from vlash.policies.formats.openpi import norm_stats_file, openpi_model_config, openpi_processor, openpi_tokenizer
from vlash.policies.formats.openpi_jax_params import convert_openpi_params
from vlash.policies.formats.vlash_dir import save_loaded_policy
from vlash.policies.pi05.model import Pi05Model
from vlash.policies.pi05.weights import aligned_state

log = logging.getLogger(__name__)
Progress = Callable[[str], None]


def _flatten(tree: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in tree.items():
        path = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(_flatten(value, path + "/"))
        else:
            out[path] = value
    return out


def read_openpi_params(params_dir: Path) -> dict[str, np.ndarray]:
    """openpi's parameters, flattened to "/"-joined paths ("PaliGemma/llm/layers/attn/q_einsum/w", ...)."""
    try:
        import jax  # extra: openpi
        import orbax.checkpoint as ocp  # extra: openpi
    except ImportError as exc:
        raise EngineUnavailable(
            f"reading openpi JAX checkpoints needs orbax: pip install 'vlash[openpi]' ({exc})"
        ) from exc
    try:
        with ocp.PyTreeCheckpointer() as checkpointer:
            metadata = checkpointer.metadata(params_dir)
            metadata = getattr(metadata, "item_metadata", metadata)  # orbax >= 0.11.22 wraps the tree
            if "params" not in metadata:
                raise CheckpointError(f"{params_dir}: the checkpoint holds {list(metadata)}, not 'params'")
            item = {"params": metadata["params"]}
            args = jax.tree.map(lambda _: ocp.ArrayRestoreArgs(restore_type=np.ndarray), item)
            tree = checkpointer.restore(params_dir, ocp.args.PyTreeRestore(item=item, restore_args=args))["params"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise CheckpointError(f"cannot read openpi params at {params_dir}: {exc!r}") from exc
    flat = _flatten(tree)
    if flat and all(k.endswith("/value") for k in flat):  # nnx.State saved during training
        flat = {k.removesuffix("/value"): v for k, v in flat.items()}
    return {k: np.asarray(v) for k, v in flat.items()}


def convert_openpi_jax(
    checkpoint: str | Path,
    out: str | Path,
    options: CheckpointOptions,
    action_horizon: int | None = None,
    progress: Progress | None = None,
) -> LoadedPolicy:
    """Read the checkpoint, build the vlash policy and write it to `out` (atomically); returns the policy."""
    report = progress or (lambda message: None)
    root, params_dir = checkpoint_dirs(checkpoint)
    doc = {} if action_horizon is None else {"action_horizon": action_horizon}
    config = options.sized(openpi_model_config(doc))
    stats_file = norm_stats_file(root, options.asset_id)
    processor = openpi_processor(config, stats_file, openpi_tokenizer(root, options), options)
    report(f"reading {params_dir}")
    params = read_openpi_params(params_dir)
    report(f"converting {len(params)} parameter arrays")
    state = convert_openpi_params(params, config)
    with torch.device("meta"):
        model = Pi05Model(config)
    try:
        model.load_state_dict(aligned_state(state), strict=True, assign=True)
    except RuntimeError as exc:
        raise CheckpointError(f"{params_dir} does not fit the model config {config.name!r}: {exc}") from exc
    asset_id = str(stats_file.parent.relative_to(root / "assets"))
    metadata = {"source": "openpi-jax", "checkpoint": str(Path(checkpoint).resolve()), "asset_id": asset_id}
    metadata["arithmetic"] = arithmetic(processor)  # openpi's JAX: fp32 time embedding, uint8 resize
    policy = LoadedPolicy(model.eval(), processor, metadata)
    report(f"writing {out}")
    save_loaded_policy(out, policy)
    return policy
