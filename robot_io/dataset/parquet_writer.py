"""LeRobot's dataset format v3.0 written without LeRobot, with pyarrow (parquet) and Pillow (PNG): the `[dataset]`
extra. LeRobot itself needs Python >= 3.12 and torch; a robot computer may have neither.

What it writes mirrors LeRobot 0.6.1's DatasetWriter and LeRobotDatasetMetadata (datasets/dataset_writer.py,
dataset_metadata.py, io_utils.py), so that LeRobotDataset(repo_id, root=DIR) loads it:
    data/chunk-000/file-NNN.parquet    the frames, one column per feature; a file takes whole episodes until it
                                       is DATA_FILE_SIZE_MB large; the "huggingface" schema metadata names the
                                       features (an image is {bytes: PNG, path}, as `datasets`' Image stores it)
    meta/episodes/chunk-000/file-NNN.parquet   one row per episode: tasks, length, its data file and frame range,
                                       its stats (stats/FEATURE/STAT)
    meta/tasks.parquet                 task (the pandas index, as pandas writes it) -> task_index
    meta/stats.json, meta/info.json    the aggregated stats; the features, fps and totals
Appending (robot_io.dataset.directory): the existing files are read, never rewritten in place; the run's frames and
episodes go to the next file numbers, and tasks, stats and info are written anew (they include the old ones).
Cameras are PNG at zlib level 1 (lossless; LeRobot's writer uses level 6, ~2x slower to encode), ENCODERS frames
encoded side by side (Pillow lets go of the GIL while zlib works).
"""

from __future__ import annotations

import io
import json
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from robot_io.dataset import stats as feature_stats
from robot_io.dataset.layout import (
    CHUNKS_SIZE,
    DATA_FILE_SIZE_MB,
    DATA_PATH,
    EPISODES_PATH,
    INFO_PATH,
    STATS_PATH,
    TASKS_PATH,
    DatasetFormatError,
    all_features,
    check_same_recording,
    info_json,
    numbered_path,
)

PNG_LEVEL = 1
ENCODERS = 2  # threads encoding PNGs; at most 2 * ENCODERS frames wait for them
ROW_GROUP_FRAMES = 64  # encoded frames held before they are written (~30 MB of 640 x 480 PNGs a camera)


class ParquetDatasetWriter:
    """Writes a run's episodes into `root` (DIR.partial), appending to the dataset in `existing` when given; the
    caller gives each frame's features (images as uint8 [H, W, 3]) and its task (module doc)."""

    name = "vlash's own (pyarrow)"

    def __init__(self, root: Path, fps: int, features: dict[str, dict], robot_type: str | None,
                 existing: Path | None = None) -> None:  # fmt: skip
        import pyarrow as pa  # extra: dataset
        import pyarrow.parquet as pq  # extra: dataset
        from PIL import Image  # extra: dataset

        self._pa, self._pq, self._image = pa, pq, Image
        self.root, self.fps, self.features, self.robot_type = root, fps, features, robot_type
        self.schema = _arrow_schema(pa, all_features(features))
        self.tasks: dict[str, int] = {}
        self.stats: dict[str, dict[str, np.ndarray]] | None = None
        self.episodes, self.frames, self.data_files, self.episode_files = 0, 0, 0, 0
        if existing is not None:
            self._read_existing(existing)
        self._episode_rows: list[dict[str, Any]] = []
        self._data: Any = None  # the open pq.ParquetWriter
        self._data_bytes = 0
        self._encoders = ThreadPoolExecutor(ENCODERS, thread_name_prefix="png")
        self._encoding: deque[Future] = deque()
        self._new_episode()

    def _read_existing(self, target: Path) -> None:
        info = json.loads((target / INFO_PATH).read_text(encoding="utf-8"))
        check_same_recording(info, self.fps, self.features)
        self.episodes, self.frames = info["total_episodes"], info["total_frames"]
        table = self._pq.read_table(target / TASKS_PATH)
        self.tasks = dict(zip(table["task"].to_pylist(), table["task_index"].to_pylist(), strict=True))
        self.stats = feature_stats.from_json(json.loads((target / STATS_PATH).read_text(encoding="utf-8")))
        self.data_files = len(list((target / "data").glob("*/*.parquet")))
        self.episode_files = len(list((target / "meta" / "episodes").glob("*/*.parquet")))

    def _new_episode(self) -> None:
        self._rows: dict[str, list] = {name: [] for name in self.schema.names}
        self._numbers: dict[str, list[np.ndarray]] = {}
        cameras = [name for name, ft in self.features.items() if ft["dtype"] == "image"]
        self._images = {name: feature_stats.ImageStats() for name in cameras}
        self._length, self._tasks_seen = 0, []

    def add_frame(self, frame: dict[str, Any], task: str) -> None:
        """One frame of the current episode: every feature of `features` (images uint8 [H, W, 3])."""
        task_index = self.tasks.setdefault(task, len(self.tasks))
        if task not in self._tasks_seen:
            self._tasks_seen.append(task)
        own = dict(timestamp=np.float32(self._length / self.fps), frame_index=self._length,
                   episode_index=self.episodes, index=self.frames + self._length, task_index=task_index)  # fmt: skip
        for name, ft in self.features.items():
            value = frame[name]
            if isinstance(value, np.ndarray) and list(value.shape) != ft["shape"]:  # feature_utils.validate_frame
                raise DatasetFormatError(f"a frame's {name} is {list(value.shape)}, the dataset's {ft['shape']}")
            if ft["dtype"] == "image":
                self._images[name].add(value)
                self._encoding.append(self._encoders.submit(self._png, value))
                self._rows[name].append(self._encoding[-1])  # the PNG's bytes once encoded (_write_rows)
            else:
                self._rows[name].append(value.tolist() if isinstance(value, np.ndarray) else value)
                if ft["dtype"] != "string":
                    self._numbers.setdefault(name, []).append(np.asarray(value, np.float64))
        for name, value in own.items():
            self._rows[name].append(value)
            self._numbers.setdefault(name, []).append(np.asarray(value, np.float64))
        self._length += 1
        while len(self._encoding) > 2 * ENCODERS * len(self._images):
            self._encoding.popleft().result()
        if len(self._rows["index"]) >= ROW_GROUP_FRAMES:
            self._write_rows()

    def _png(self, image: np.ndarray) -> bytes:
        buffer = io.BytesIO()
        self._image.fromarray(image).save(buffer, format="PNG", compress_level=PNG_LEVEL)
        return buffer.getvalue()

    def _write_rows(self) -> None:
        if not self._rows["index"]:
            return
        for name in self._images:
            self._rows[name] = [{"bytes": future.result(), "path": None} for future in self._rows[name]]
            self._data_bytes += sum(len(cell["bytes"]) for cell in self._rows[name])
        self._encoding.clear()
        if self._data is None:
            path = self.root / numbered_path(DATA_PATH, self.data_files)
            path.parent.mkdir(parents=True, exist_ok=True)
            self._data = self._pq.ParquetWriter(path, self.schema, compression="snappy")
        self._data.write_table(self._pa.Table.from_pydict(self._rows, schema=self.schema))
        self._rows = {name: [] for name in self.schema.names}

    def save_episode(self) -> int | None:
        """End the current episode (written, its stats and metadata row kept for finalize); its index, or None when
        it has no frame."""
        if self._length == 0:
            return None
        self._write_rows()
        stats = {name: feature_stats.vector_stats(np.stack(values)) for name, values in self._numbers.items()}
        stats.update({name: image.stats() for name, image in self._images.items()})
        self.stats = feature_stats.aggregate([self.stats, stats] if self.stats else [stats])
        number = self.data_files
        row = {"episode_index": self.episodes, "tasks": list(self._tasks_seen), "length": self._length,
               "data/chunk_index": number // CHUNKS_SIZE, "data/file_index": number % CHUNKS_SIZE,
               "dataset_from_index": self.frames, "dataset_to_index": self.frames + self._length}  # fmt: skip
        row.update({f"stats/{f}/{k}": np.asarray(v).tolist() for f, s in stats.items() for k, v in s.items()})
        self._episode_rows.append(row)
        index = self.episodes
        self.episodes, self.frames = self.episodes + 1, self.frames + self._length
        if self._data_bytes >= DATA_FILE_SIZE_MB * 2**20:  # the next episode starts the next file
            self._close_data()
        self._new_episode()
        return index

    def _close_data(self) -> None:
        if self._data is not None:
            self._data.close()
            self._data, self._data_bytes, self.data_files = None, 0, self.data_files + 1

    def finalize(self) -> None:
        """Close the data file and write the metadata: episodes, tasks, stats, info (info.json last)."""
        self._close_data()
        self._encoders.shutdown()
        pa, pq = self._pa, self._pq
        if self._episode_rows:
            number = self.episode_files
            for row in self._episode_rows:
                row["meta/episodes/chunk_index"], row["meta/episodes/file_index"] = divmod(number, CHUNKS_SIZE)
            columns = {k: [row[k] for row in self._episode_rows] for k in self._episode_rows[0]}
            path = self.root / numbered_path(EPISODES_PATH, number)
            path.parent.mkdir(parents=True, exist_ok=True)
            pq.write_table(pa.Table.from_pydict(columns), path, compression="snappy")
        names = sorted(self.tasks, key=self.tasks.get)
        tasks = pa.table({"task_index": pa.array([self.tasks[n] for n in names], pa.int64()),
                          "task": pa.array(names, pa.string())})  # fmt: skip
        pq.write_table(tasks.replace_schema_metadata({"pandas": json.dumps(_PANDAS_TASKS)}), self.root / TASKS_PATH)
        _write_json(self.root / STATS_PATH, feature_stats.to_json(self.stats or {}))
        info = info_json(self.fps, self.features, self.robot_type, self.episodes, self.frames, len(self.tasks))
        _write_json(self.root / INFO_PATH, info)

    def close(self) -> None:
        """Release the data file without finalizing (the run failed; DIR.partial is discarded)."""
        self._encoders.shutdown(cancel_futures=True)
        if self._data is not None:
            self._data.close()
            self._data = None


def _write_json(path: Path, value: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value, indent=4) + "\n", encoding="utf-8")


def _arrow_schema(pa: Any, features: dict[str, dict]) -> Any:
    """The data files' schema: what `datasets` writes for LeRobot's features (feature_utils.
    get_hf_features_from_features), with the "huggingface" metadata `datasets` reads the feature types from."""
    scalar = {"float32": pa.float32(), "float64": pa.float64(), "int64": pa.int64(), "string": pa.string()}
    fields, hf = [], {}
    for name, ft in features.items():
        if ft["dtype"] == "image":
            fields.append(pa.field(name, pa.struct([("bytes", pa.binary()), ("path", pa.string())])))
            hf[name] = {"_type": "Image"}
        elif list(ft["shape"]) == [1]:
            fields.append(pa.field(name, scalar[ft["dtype"]]))
            hf[name] = {"dtype": ft["dtype"], "_type": "Value"}
        else:
            fields.append(pa.field(name, pa.list_(scalar[ft["dtype"]], ft["shape"][0])))
            hf[name] = {"feature": {"dtype": ft["dtype"], "_type": "Value"}, "length": ft["shape"][0], "_type": "List"}
    return pa.schema(fields, metadata={"huggingface": json.dumps({"info": {"features": hf}})})


def _pandas_column(name: str | None, pandas_type: str, numpy_type: str, metadata: dict | None = None) -> dict:
    return dict(name=name, field_name=name, pandas_type=pandas_type, numpy_type=numpy_type, metadata=metadata)


# What pandas writes for a frame indexed by "task" (LeRobot's write_tasks: DataFrame.to_parquet), so that
# pandas.read_parquet (its load_tasks) gives the task strings as the index again
_PANDAS_TASKS = {
    "index_columns": ["task"],
    "column_indexes": [_pandas_column(None, "unicode", "object", {"encoding": "UTF-8"})],
    "columns": [_pandas_column("task_index", "int64", "int64"), _pandas_column("task", "unicode", "object")],
    "creator": {"library": "pyarrow", "version": "21.0.0"},
    "pandas_version": "2.2.3",
}
