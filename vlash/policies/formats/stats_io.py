"""Normalization stats files: vlash's own stats.safetensors, LeRobot normalizer state files, openpi norm_stats.json."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors import SafetensorError, safe_open
from safetensors.numpy import save as _safetensors_bytes

from vlash.atomic import atomic_write
from vlash.policies.processing.normalization import EpsRule, FeatureNorm, Normalizer, NormMode, StatsError

log = logging.getLogger(__name__)

STATS_FILENAME = "stats.safetensors"
VLASH_STATS_FORMAT = "vlash.stats/1"
OPENPI_NORM_STATS_JSON = "norm_stats.json"
# openpi names its features "state"/"actions"; vlash uses the LeRobot names.
OPENPI_TO_LEROBOT_KEYS: dict[str, str] = {"state": "observation.state", "actions": "action"}


def _read_safetensors(path: Path) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """Return (float32 arrays, metadata) or StatsError naming the file."""
    if not path.is_file():
        raise StatsError(f"stats file not found: {path}")
    try:
        with safe_open(str(path), framework="pt") as f:
            tensors = {k: f.get_tensor(k).to(torch.float32).numpy() for k in f.keys()}  # noqa: SIM118
            return tensors, dict(f.metadata() or {})
    except (SafetensorError, OSError, RuntimeError, ValueError) as e:
        raise StatsError(f"cannot read stats file {path}: {e}") from e


def _read_json(path: Path) -> Any:
    if not path.is_file():
        raise StatsError(f"file not found: {path}")
    try:
        return json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise StatsError(f"{path} is not valid JSON: {e}") from e


def _unflatten(flat: Mapping[str, np.ndarray], sep: str) -> dict[str, dict[str, np.ndarray]]:
    """``{"a.b.mean": v}`` -> ``{"a.b": {"mean": v}}`` (split on the last ``sep``)."""
    out: dict[str, dict[str, np.ndarray]] = {}
    for name, value in flat.items():
        key, sep_found, stat = name.rpartition(sep)
        if not sep_found:
            raise StatsError(f"tensor name {name!r} is not '<feature>{sep}<stat>'")
        out.setdefault(key, {})[stat] = value
    return out


def _feature_in(path: Path, **kwargs: Any) -> FeatureNorm:
    """Build a FeatureNorm, naming ``path`` in any error."""
    try:
        return FeatureNorm(**kwargs)
    except StatsError as e:
        raise StatsError(f"{path}: {e}") from None


# ----------------------------------------------------------------------------------------- vlash format


def _stats_path(path: str | os.PathLike[str]) -> Path:
    p = Path(path)
    return p if p.suffix == ".safetensors" else p / STATS_FILENAME


def save_stats(path: str | os.PathLike[str], normalizer: Normalizer) -> Path:
    """Atomically write ``normalizer`` as safetensors ("key/stat" tensors + modes in the metadata).

    ``path`` is a ``.safetensors`` file or a directory (then ``stats.safetensors`` inside). Returns the file.
    """
    target = _stats_path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tensors, meta = {}, {}
    for key in normalizer.keys:
        feat = normalizer.feature(key)
        meta[key] = {"mode": feat.mode.value, "eps": feat.eps, "eps_rule": feat.eps_rule.value}
        for stat, value in feat.stats.items():
            tensors[f"{key}/{stat}"] = np.ascontiguousarray(value, dtype=np.float32)
    blob = _safetensors_bytes(tensors, metadata={"format": VLASH_STATS_FORMAT, "features": json.dumps(meta)})
    atomic_write(target, lambda f: f.write(blob))
    return target


def load_stats(path: str | os.PathLike[str]) -> Normalizer:
    """Read a file written by ``save_stats`` (a file or a directory holding ``stats.safetensors``)."""
    target = _stats_path(path)
    tensors, meta = _read_safetensors(target)
    if meta.get("format") != VLASH_STATS_FORMAT:
        raise StatsError(f"{target}: metadata format is {meta.get('format')!r}, expected {VLASH_STATS_FORMAT!r}")
    try:
        features = json.loads(meta["features"])
    except (KeyError, json.JSONDecodeError) as e:
        raise StatsError(f"{target}: metadata 'features' is missing or not JSON: {e}") from None
    stats = _unflatten(tensors, "/")
    unknown = sorted(set(stats) - set(features))
    if unknown:
        raise StatsError(f"{target}: tensors for features {unknown} have no entry in the metadata")
    feats = []
    for key, spec in features.items():
        if not isinstance(spec, dict) or "mode" not in spec:
            raise StatsError(f"{target}: metadata entry for feature {key!r} has no 'mode': {spec!r}")
        extra = {k: spec[k] for k in ("eps", "eps_rule") if k in spec}
        feats.append(_feature_in(target, key=key, mode=spec["mode"], stats=stats.get(key, {}), **extra))
    return Normalizer(feats)


# ----------------------------------------------------------------------------------------- LeRobot


def read_flat_stats(path: Path) -> dict[str, dict[str, np.ndarray]]:
    """A LeRobot normalizer state file: ``"<feature>.<stat>"`` tensors -> ``{feature: {stat: float32 array}}``
    (the pipeline JSONs that name these files are read by vlash.policies.formats.lerobot_pipeline)."""
    return _unflatten(_read_safetensors(path)[0], ".")


# ----------------------------------------------------------------------------------------- openpi


def load_openpi_norm_stats(
    path: str | os.PathLike[str],
    *,
    mode: NormMode = NormMode.QUANTILES,
    key_map: Mapping[str, str] | None = OPENPI_TO_LEROBOT_KEYS,
) -> Normalizer:
    """Normalizer from openpi's ``norm_stats.json`` (a file, or a directory holding one).

    ``mode`` is QUANTILES for pi0.5/pi0-FAST (openpi's ``use_quantile_norm``) and MEAN_STD for pi0.
    ``key_map`` renames openpi keys (default ``state`` -> ``observation.state``, ``actions`` -> ``action``);
    pass None to keep openpi's names. Uses openpi's eps rule (1e-6 always added).
    """
    p = Path(path)
    file = p / OPENPI_NORM_STATS_JSON if p.is_dir() else p
    data = _read_json(file)
    if not isinstance(data, dict) or not isinstance(data.get("norm_stats"), dict):
        raise StatsError(f"{file}: expected an object with a 'norm_stats' object")
    feats = []
    for name, stats in data["norm_stats"].items():
        if not isinstance(stats, dict):
            raise StatsError(f"{file}: norm_stats[{name!r}] is not an object")
        arrays = {s: v for s, v in stats.items() if v is not None}
        key = (key_map or {}).get(name, name)
        feats.append(_feature_in(file, key=key, mode=mode, stats=arrays, eps=1e-6, eps_rule=EpsRule.OPENPI))
    return Normalizer(feats)
