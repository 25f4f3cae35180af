"""Episodes <-> one compressed .npz file (format "vlash.episodes/3"), written atomically, validated on load.

Layout: frames of all episodes concatenated (`images` uint8 [N, S, S, 3], `states` float32 [N, D], `actions`
float32 [N, J], `plans` float32 [N, K, J], K = 0 when the episodes have no per-frame plans), their expert tails
concatenated (`tails` float32 [M, J]), plus per-episode arrays (`lengths` and `tail_lengths` int64 [E]
(0: no tail), `seeds` int64 [E], `success` bool [E], `tasks` and `instructions` unicode [E]), and optionally
`sim`: the simulator settings the episodes were recorded with (vlash.sim.SimSettings.to_dict() as a JSON
string; absent: the defaults), `execution`: how the expert was executed (chunked_demos.ChunkedExecution.to_dict()
as a JSON string; absent: replanning every step) and `state_names` (unicode [D], the entries of a state,
Episode.state_names; absent: a state of the J joints). No pickled objects: loading uses allow_pickle=False.
Format 2 (no `plans`) loads as episodes without plans; format 1 (no tails) is refused: record again.
"""

from __future__ import annotations

import json
import os
import zipfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from vlash.atomic import atomic_write
from vlash.train.episodes import Episode
from vlash.train.errors import DatasetError

FORMAT = "vlash.episodes/3"
FORMAT_WITHOUT_PLANS = "vlash.episodes/2"
ARRAYS = (
    "format",
    "images",
    "states",
    "actions",
    "tails",
    "lengths",
    "tail_lengths",
    "seeds",
    "success",
    "tasks",
    "instructions",
)
PLANS = "plans"  # format 3 only
SIM = "sim"  # optional: the recording's simulator settings (absent: the defaults)
EXECUTION = "execution"  # optional: how the expert was executed (absent: it replanned every step)
STATE_NAMES = "state_names"  # optional: the state's entries (absent: the joints alone)


def save_episodes(
    path: str | os.PathLike[str],
    episodes: Sequence[Episode],
    sim: Mapping[str, Any] | None = None,
    execution: Mapping[str, Any] | None = None,
) -> Path:
    """Write `episodes` to `path` (.npz), with the simulator settings they were recorded with (`sim`,
    SimSettings.to_dict(); None: not recorded, read back as the defaults) and how the expert was executed
    (`execution`, ChunkedExecution.to_dict(); None: it replanned every step); an existing file is replaced only
    once the new one is whole."""
    if not episodes:
        raise DatasetError("no episodes to save")
    sizes = {e.images.shape[1:] for e in episodes}
    joints = {e.num_joints for e in episodes}
    if len(sizes) != 1 or len(joints) != 1:
        raise DatasetError(f"episodes differ in image shape {sizes} or joint count {joints}; cannot concatenate")
    layouts = {e.state_names for e in episodes}
    if len(layouts) != 1:
        raise DatasetError(f"episodes differ in state_names {sorted(layouts)}; cannot concatenate")
    plan_steps = {0 if e.plans is None else e.plans.shape[1] for e in episodes}
    if len(plan_steps) != 1:
        raise DatasetError(f"episodes differ in plan steps {sorted(plan_steps)} (0: no plans); cannot concatenate")
    (num_joints,) = joints
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    arrays = {
        "format": np.array(FORMAT),
        "images": np.concatenate([e.images for e in episodes]),
        "states": np.concatenate([e.states for e in episodes]),
        "actions": np.concatenate([e.actions for e in episodes]),
        PLANS: np.concatenate(
            [np.zeros((len(e), 0, num_joints), np.float32) if e.plans is None else e.plans for e in episodes]
        ),
        "tails": np.concatenate([_tail(e) for e in episodes]),
        "lengths": np.array([len(e) for e in episodes], dtype=np.int64),
        "tail_lengths": np.array([len(_tail(e)) for e in episodes], dtype=np.int64),
        "seeds": np.array([e.seed for e in episodes], dtype=np.int64),
        "success": np.array([e.success for e in episodes], dtype=bool),
        "tasks": np.array([e.task for e in episodes], dtype=np.str_),
        "instructions": np.array([e.instruction for e in episodes], dtype=np.str_),
    }
    if sim is not None:
        arrays[SIM] = np.array(json.dumps(dict(sim), sort_keys=True))
    if execution is not None:
        arrays[EXECUTION] = np.array(json.dumps(dict(execution), sort_keys=True))
    if episodes[0].state_names:
        arrays[STATE_NAMES] = np.array(episodes[0].state_names, dtype=np.str_)
    atomic_write(target, lambda f: np.savez_compressed(f, **arrays))
    return target


def _tail(episode: Episode) -> np.ndarray:
    return np.zeros((0, episode.num_joints), np.float32) if episode.tail is None else episode.tail


def _read(path: Path) -> dict[str, np.ndarray]:
    if not path.is_file():
        raise DatasetError(f"dataset not found: {path}")
    try:
        with np.load(path, allow_pickle=False) as data:
            missing = [k for k in ARRAYS if k not in data.files]
            if missing:
                raise DatasetError(f"{path}: missing arrays {missing} (has {sorted(data.files)})")
            arrays = {k: data[k] for k in ARRAYS}
            if str(arrays["format"]) == FORMAT:
                if PLANS not in data.files:
                    raise DatasetError(f"{path}: missing arrays ['{PLANS}'] (has {sorted(data.files)})")
                arrays[PLANS] = data[PLANS]
            if STATE_NAMES in data.files:
                arrays[STATE_NAMES] = data[STATE_NAMES]
            return arrays
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as exc:
        raise DatasetError(f"cannot read dataset {path}: {exc}") from exc


def _check(path: Path, a: dict[str, np.ndarray]) -> None:
    if str(a["format"]) not in (FORMAT, FORMAT_WITHOUT_PLANS):
        raise DatasetError(
            f"{path}: format is {str(a['format'])!r}, expected {FORMAT!r} or {FORMAT_WITHOUT_PLANS!r}; "
            "delete the file to record it again"
        )
    expected = {
        "images": (np.uint8, 4),
        "states": (np.float32, 2),
        "actions": (np.float32, 2),
        "tails": (np.float32, 2),
        "lengths": (np.int64, 1),
        "tail_lengths": (np.int64, 1),
        "seeds": (np.int64, 1),
        "success": (np.bool_, 1),
    }
    for name, (dtype, ndim) in expected.items():
        if a[name].dtype != dtype or a[name].ndim != ndim:
            raise DatasetError(
                f"{path}: {name} must be {np.dtype(dtype)} with {ndim} axes, got {a[name].dtype} {a[name].shape}"
            )
    for name in ("tasks", "instructions", STATE_NAMES):
        if name in a and (a[name].dtype.kind != "U" or a[name].ndim != 1):
            raise DatasetError(f"{path}: {name} must be a 1-D unicode array, got {a[name].dtype} {a[name].shape}")
    episodes = len(a["lengths"])
    if any(len(a[k]) != episodes for k in ("tail_lengths", "seeds", "success", "tasks", "instructions")):
        raise DatasetError(f"{path}: per-episode arrays differ in length (expected {episodes})")
    frames = int(a["lengths"].sum())
    if episodes == 0 or np.any(a["lengths"] < 1):
        raise DatasetError(f"{path}: needs at least one episode and every episode >= 1 frame")
    if any(len(a[k]) != frames for k in ("images", "states", "actions")):
        raise DatasetError(
            f"{path}: lengths sum to {frames} frames but images/states/actions have "
            f"{len(a['images'])}/{len(a['states'])}/{len(a['actions'])}"
        )
    if PLANS in a:
        plans = a[PLANS]
        if plans.dtype != np.float32 or plans.ndim != 3 or len(plans) != frames:
            raise DatasetError(f"{path}: plans must be float32 [{frames}, K, J], got {plans.dtype} {plans.shape}")
    if np.any(a["tail_lengths"] < 0) or int(a["tail_lengths"].sum()) != len(a["tails"]):
        raise DatasetError(
            f"{path}: tail_lengths sum to {int(a['tail_lengths'].sum())} but tails has {len(a['tails'])}"
        )


def recorded_sim_settings(path: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The simulator settings a dataset file was recorded with (SimSettings.to_dict()), None when it does not say
    (written without them: the simulator's defaults)."""
    return _recorded(path, SIM, "simulator settings")


def recorded_execution(path: str | os.PathLike[str]) -> dict[str, Any] | None:
    """How a dataset file's expert was executed (ChunkedExecution.to_dict()), None when it does not say (written
    without it: the expert replanned every step)."""
    return _recorded(path, EXECUTION, "expert execution")


def _recorded(path: str | os.PathLike[str], key: str, what: str) -> dict[str, Any] | None:
    """The JSON object stored under `key`, None when the file has none."""
    path = Path(path)
    try:
        with np.load(path, allow_pickle=False) as data:
            if key not in data.files:
                return None
            doc = json.loads(str(data[key]))
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as exc:
        raise DatasetError(f"cannot read the {what} of dataset {path}: {exc}") from exc
    if not isinstance(doc, dict):
        raise DatasetError(f"{path}: {key} must hold a JSON object of {what}, got {type(doc).__name__}")
    return doc


def load_episodes(path: str | os.PathLike[str]) -> list[Episode]:
    """Read a file written by `save_episodes`; DatasetError naming the file and the problem otherwise."""
    path = Path(path)
    a = _read(path)
    _check(path, a)
    bounds = np.concatenate([[0], np.cumsum(a["lengths"])])
    tail_bounds = np.concatenate([[0], np.cumsum(a["tail_lengths"])])
    plans = a.get(PLANS)
    has_plans = plans is not None and plans.shape[1] > 0
    names = tuple(str(n) for n in a.get(STATE_NAMES, ()))
    episodes = []
    for i in range(len(a["lengths"])):
        lo, hi = int(bounds[i]), int(bounds[i + 1])
        tail_lo, tail_hi = int(tail_bounds[i]), int(tail_bounds[i + 1])
        try:
            episodes.append(
                Episode(
                    task=str(a["tasks"][i]),
                    instruction=str(a["instructions"][i]),
                    images=a["images"][lo:hi],
                    states=a["states"][lo:hi],
                    actions=a["actions"][lo:hi],
                    seed=int(a["seeds"][i]),
                    success=bool(a["success"][i]),
                    tail=a["tails"][tail_lo:tail_hi] if tail_hi > tail_lo else None,
                    plans=plans[lo:hi] if has_plans else None,
                    state_names=names,
                )
            )
        except DatasetError as exc:
            raise DatasetError(f"{path}: {exc}") from None
    return episodes
