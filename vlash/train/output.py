"""Writing a trained policy: vlash's policy directory plus train_log.json, swapped in whole or not at all.

The directory is staged next to the target (`save_policy`, with train_log.json, through vlash.atomic's
staged_directory), then renamed over the target; a failure or Ctrl-C at any point leaves the previous directory (or
none) and removes the staging copy. `policy_saver` is what the trainer calls: at checkpoints and at the end into
--out, and on Ctrl-C into OUT.interrupted (vlash.train.interrupt).
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from vlash.policies.formats.vlash_dir import save_policy
from vlash.policies.pi05.config import Pi05Config
from vlash.policies.pi05.model import Pi05Model
from vlash.policies.processing.normalization import Normalizer
from vlash.policies.processing.task_space import PlanarArmTaskSpace, PlanarArmVelocityTaskSpace
from vlash.policies.processing.transforms import StateActionTransform
from vlash.train.config import TrainConfig

TRAIN_LOG = "train_log.json"


def with_config(model: Pi05Model, config: Pi05Config) -> Pi05Model:
    """The same weights (shared, not copied) under another config of identical parameter shapes."""
    with torch.device("meta"):
        out = Pi05Model(config)
    out.load_state_dict(model.state_dict(), strict=True, assign=True)
    return out.eval()


def git_commit() -> dict[str, Any] | None:
    """{"commit": sha, "dirty": bool} of the checkout vlash runs from, or None outside a git checkout."""
    here = Path(__file__).resolve().parent
    try:
        sha = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True, timeout=5, check=True
        ).stdout.strip()
        status = subprocess.run(
            ["git", "status", "--porcelain"], cwd=here, capture_output=True, text=True, timeout=5, check=True
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return {"commit": sha, "dirty": bool(status.strip())}


def plain(value: Any) -> Any:
    """`value` as YAML/JSON-safe plain types (numpy scalars -> Python numbers, str subclasses -> str)."""
    return json.loads(json.dumps(value, default=lambda o: o.item() if hasattr(o, "item") else str(o)))


def write_policy(
    out: str | os.PathLike[str],
    model: Pi05Model,
    normalizer: Normalizer,
    tokenizer_file: str | os.PathLike[str],
    dims: tuple[int, int],
    metadata: dict[str, Any],
    train_log: dict[str, Any],
    relative_mask: tuple[bool, ...] | None = None,
    task_space: StateActionTransform | None = None,
) -> Path:
    """Write (or atomically replace) the policy directory `out`; returns it. `dims`: (action dims, state dims: the
    entries a request's state has, the joints and any extras after them)."""
    target = Path(out)
    save_policy(
        target,
        model,
        normalizer,
        tokenizer_file,
        *dims,
        plain(metadata),
        extra_files={TRAIN_LOG: json.dumps(plain(train_log))},
        relative_mask=relative_mask,
        transform=task_space,
    )
    return target


def tail_mean(values: list[float], count: int) -> float:
    return float(np.mean(values[-count:])) if values else float("nan")


def policy_saver(
    config: TrainConfig,
    policy: Pi05Config,
    normalizer: Normalizer,
    tokenizer_file: Path,
    dims: tuple[int, int],
    meta: dict[str, Any],
    task_space: PlanarArmTaskSpace | PlanarArmVelocityTaskSpace | None = None,
) -> Callable[..., Path]:
    """save(step, curves, trained, extra=None, out=None): write the policy directory (preset shapes; `out`, default
    config.out) with `trained`'s weights, and its train log; `dims`: (action dims, state dims)."""

    def save(
        step: int,
        curves: dict[str, list[float]],
        trained: Pi05Model,
        extra: dict[str, Any] | None = None,
        out: Path | None = None,
    ) -> Path:
        final = {"step": step, "complete": step == config.final_step, **(extra or {})}
        final["loss"] = tail_mean(curves["loss"], config.log_every)
        metadata = {**meta, **final, **config.extra}
        weights = with_config(trained, policy)
        relative = (True,) * dims[0] if config.relative_actions else None
        train_log = {**curves, "step": step}
        target = config.out if out is None else out
        return write_policy(
            target, weights, normalizer, tokenizer_file, dims, metadata, train_log, relative, task_space
        )

    return save
