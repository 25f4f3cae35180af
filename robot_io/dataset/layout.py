"""LeRobot's dataset format v3.0, as LeRobot 0.6.1 writes and reads it: the file layout (its datasets/utils.py),
the features of a recorded run (utils/feature_utils.py hw_to_dataset_features, utils/constants.py
DEFAULT_FEATURES) and meta/info.json (datasets/utils.py DatasetInfo). Plain data: no pyarrow here.

A vlash run's frame, one per control tick:
    observation.state            float32 [S]      the robot's state, names from robot.state_names
    observation.images.CAMERA    image [H, W, 3]  each robot camera (PNG bytes in the parquet, as LeRobot stores images)
    action                       float32 [A]      the command actually sent (after clamping; the hold when held)
    vlash.step                   int64            the control step (gaps: skipped deadlines or dropped frames)
    vlash.chunk_id, vlash.chunk_index   int64     the chunk that commanded it and its index (-1: none, held)
    vlash.held                   int64            1: the watchdog's hold was sent, not a policy action
    vlash.mode                   string           the mode the chunk was planned in ("sync" for a first chunk), or ""
and LeRobot's own: timestamp (frame_index / fps), frame_index, episode_index, index, task_index.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

CODEBASE_VERSION = "v3.0"  # LeRobot 0.6.1's dataset_metadata.CODEBASE_VERSION
CHUNKS_SIZE = 1000  # files per chunk-NNN folder (utils.DEFAULT_CHUNK_SIZE)
DATA_FILE_SIZE_MB = 100  # a data file takes episodes until it is this large (utils.DEFAULT_DATA_FILE_SIZE_IN_MB)
VIDEO_FILE_SIZE_MB = 200  # info.json carries it even without videos (utils.DEFAULT_VIDEO_FILE_SIZE_IN_MB)

INFO_PATH = "meta/info.json"
STATS_PATH = "meta/stats.json"
TASKS_PATH = "meta/tasks.parquet"
DATA_PATH = "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
EPISODES_PATH = "meta/episodes/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
VLASH_DIR = "meta/vlash"  # vlash's own: one JSON Lines file per run (chunks, episodes, summary); LeRobot ignores it

STATE, ACTION, IMAGES = "observation.state", "action", "observation.images."
DEFAULT_FEATURES = {  # filled in by the writer, never by the caller
    "timestamp": {"dtype": "float32", "shape": [1], "names": None},
    "frame_index": {"dtype": "int64", "shape": [1], "names": None},
    "episode_index": {"dtype": "int64", "shape": [1], "names": None},
    "index": {"dtype": "int64", "shape": [1], "names": None},
    "task_index": {"dtype": "int64", "shape": [1], "names": None},
}
VLASH_FEATURES = {
    "vlash.step": {"dtype": "int64", "shape": [1], "names": None},
    "vlash.chunk_id": {"dtype": "int64", "shape": [1], "names": None},
    "vlash.chunk_index": {"dtype": "int64", "shape": [1], "names": None},
    "vlash.held": {"dtype": "int64", "shape": [1], "names": None},  # not bool: LeRobot's stats take numbers
    "vlash.mode": {"dtype": "string", "shape": [1], "names": None},
}


class DatasetFormatError(ValueError):
    """A dataset's meta/info.json does not describe what this run would record (fps, features)."""


def run_features(
    state_names: Sequence[str], action_names: Sequence[str], cameras: Mapping[str, Sequence[int]]
) -> dict[str, dict[str, Any]]:
    """The features a run records, without DEFAULT_FEATURES (what LeRobotDataset.create takes): `cameras` maps
    each robot camera to its frame shape (H, W, 3)."""
    features: dict[str, dict[str, Any]] = {
        STATE: {"dtype": "float32", "shape": [len(state_names)], "names": list(state_names)},
        ACTION: {"dtype": "float32", "shape": [len(action_names)], "names": list(action_names)},
    }
    for camera, shape in cameras.items():
        if "/" in camera:  # LeRobot refuses '/' in feature names (utils/feature_utils._validate_feature_names)
            raise DatasetFormatError(f"camera name {camera!r}: a dataset feature name cannot contain '/'")
        names = ["height", "width", "channels"]  # (h, w, c): lerobot-train makes it (c, h, w) by these names
        features[IMAGES + camera] = {"dtype": "image", "shape": [int(s) for s in shape], "names": names,
                                     "info": {"is_depth_map": False}}  # fmt: skip
    return {**features, **VLASH_FEATURES}


def all_features(features: Mapping[str, dict]) -> dict[str, dict]:
    """`features` and DEFAULT_FEATURES after them, as info.json lists them (dataset_metadata.create)."""
    return {**features, **DEFAULT_FEATURES}


def numbered_path(template: str, number: int) -> str:
    """The path of the `number`-th file (0-based) of a kind: file-NNN inside chunk-NNN, CHUNKS_SIZE files a chunk
    (utils.update_chunk_file_indices counts the same way)."""
    return template.format(chunk_index=number // CHUNKS_SIZE, file_index=number % CHUNKS_SIZE)


def info_json(fps: int, features: Mapping[str, dict], robot_type: str | None, episodes: int, frames: int,
              tasks: int) -> dict[str, Any]:  # fmt: skip
    """meta/info.json: exactly DatasetInfo's fields (LeRobot warns about any other key on every load)."""
    return {
        "codebase_version": CODEBASE_VERSION,
        "fps": int(fps),
        "features": all_features(features),
        "total_episodes": episodes,
        "total_frames": frames,
        "total_tasks": tasks,
        "chunks_size": CHUNKS_SIZE,
        "data_files_size_in_mb": DATA_FILE_SIZE_MB,
        "video_files_size_in_mb": VIDEO_FILE_SIZE_MB,
        "data_path": DATA_PATH,
        "video_path": None,  # no video features: cameras are stored as images
        "robot_type": robot_type,
        "splits": {"train": f"0:{episodes}"} if episodes else {},
    }


def check_same_recording(info: Mapping[str, Any], fps: int, features: Mapping[str, dict]) -> None:
    """A run appended to a dataset must record what it holds: the same fps and features (names, shapes, dtypes);
    DatasetFormatError says what differs."""
    if info.get("codebase_version") != CODEBASE_VERSION:
        raise DatasetFormatError(f"it is format {info.get('codebase_version')}, this writer writes {CODEBASE_VERSION}")
    if info.get("fps") != fps:
        raise DatasetFormatError(f"it was recorded at {info.get('fps')} Hz, this run runs at {fps} Hz")
    theirs, ours = dict(info.get("features", {})), all_features(features)
    for name in sorted(set(theirs) | set(ours)):
        if name not in ours:
            raise DatasetFormatError(f"it has feature {name!r}, this run records none")
        if name not in theirs:
            raise DatasetFormatError(f"it has no feature {name!r}, which this run records")
        a, b = theirs[name], ours[name]
        for key in ("dtype", "shape", "names"):
            if a.get(key) != b.get(key):
                raise DatasetFormatError(f"feature {name!r}: its {key} is {a.get(key)}, this run's {b.get(key)}")
