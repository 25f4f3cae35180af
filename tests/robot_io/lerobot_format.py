"""A recorded dataset checked the way LeRobot 0.6.1's loader reads it, without LeRobot (it needs Python >= 3.12 and
torch; tests run on 3.11). Each check names the loader code it mirrors (src/lerobot/...). With HF `datasets`
importable, `load_with_hf_datasets` also loads the data files as LeRobot does (not in CI: `datasets` pins
huggingface-hub < 2, which the dev environment's is not).
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from PIL import Image

# datasets/utils.py DatasetInfo: its fields (from_dict warns about any other key on every load)
INFO_FIELDS = {"codebase_version", "fps", "features", "total_episodes", "total_frames", "total_tasks", "chunks_size",
               "data_files_size_in_mb", "video_files_size_in_mb", "data_path", "video_path", "robot_type", "splits",
               "tools"}  # fmt: skip
DEFAULT_FEATURES = {  # utils/constants.py
    "timestamp": ("float32", [1]), "frame_index": ("int64", [1]), "episode_index": ("int64", [1]),
    "index": ("int64", [1]), "task_index": ("int64", [1]),
}  # fmt: skip
EPISODE_COLUMNS = {"episode_index", "tasks", "length", "data/chunk_index", "data/file_index", "dataset_from_index",
                   "dataset_to_index", "meta/episodes/chunk_index", "meta/episodes/file_index"}  # fmt: skip
STATS = {"min", "max", "mean", "std", "count", "q01", "q10", "q50", "q90", "q99"}


def arrow_type(ft: dict) -> pa.DataType:
    """The arrow type `datasets` gives a LeRobot feature (datasets/feature_utils.py get_hf_features_from_features)."""
    scalar = {"float32": pa.float32(), "int64": pa.int64(), "string": pa.string()}
    if ft["dtype"] == "image":
        return pa.struct([("bytes", pa.binary()), ("path", pa.string())])  # datasets.Image()
    if ft["shape"] == [1]:
        return scalar[ft["dtype"]]  # datasets.Value
    return pa.list_(scalar[ft["dtype"]], ft["shape"][0])  # datasets.Sequence(length=n)


def check_info(root: Path) -> dict:
    """datasets/io_utils.py load_info -> DatasetInfo.from_dict / __post_init__; dataset_metadata.py
    _load_metadata -> check_version_compatibility."""
    info = json.loads((root / "meta/info.json").read_text())
    assert set(info) <= INFO_FIELDS and INFO_FIELDS - set(info) <= {"tools"}, set(info) ^ INFO_FIELDS
    assert info["codebase_version"] == "v3.0" and isinstance(info["fps"], int) and info["fps"] > 0
    assert info["video_path"] is None and info["splits"] == {"train": f"0:{info['total_episodes']}"}
    features = info["features"]
    for name, (dtype, shape) in DEFAULT_FEATURES.items():
        assert features[name] == {"dtype": dtype, "shape": shape, "names": None}
    for name, ft in features.items():
        assert "/" not in name and isinstance(ft["shape"], list)  # utils/feature_utils.py _validate_feature_names
        if ft["dtype"] == "image":  # utils/feature_utils.py dataset_to_policy_features: (h, w, c) -> (c, h, w)
            assert len(ft["shape"]) == 3 and ft["names"][2] == "channels"
        elif name in ("observation.state", "action"):
            assert ft["dtype"] == "float32" and len(ft["names"]) == ft["shape"][0]
    return info


def check_tasks(root: Path, info: dict) -> list[str]:
    """datasets/io_utils.py load_tasks: pandas.read_parquet, the task strings as the index (DatasetReader.get_item
    names a frame's task by tasks.iloc[task_index].name)."""
    table = pq.read_table(root / "meta/tasks.parquet")
    pandas = json.loads(table.schema.metadata[b"pandas"])
    assert pandas["index_columns"] == ["task"] and table.schema.field("task").type == pa.string()
    assert table["task_index"].to_pylist() == list(range(info["total_tasks"]))
    return table["task"].to_pylist()


def check_episodes(root: Path, info: dict) -> list[dict]:
    """datasets/io_utils.py load_episodes -> load_nested_dataset(meta/episodes): every */*.parquet, in order."""
    paths = sorted((root / "meta/episodes").glob("*/*.parquet"))
    episodes = pa.concat_tables([pq.read_table(p) for p in paths], promote_options="default").to_pylist()
    assert [e["episode_index"] for e in episodes] == list(range(info["total_episodes"]))
    start = 0
    for e in episodes:
        assert set(e) >= EPISODE_COLUMNS and e["length"] > 0 and e["tasks"]
        assert (e["dataset_from_index"], e["dataset_to_index"]) == (start, start + e["length"])
        data = info["data_path"].format(chunk_index=e["data/chunk_index"], file_index=e["data/file_index"])
        assert (root / data).is_file()  # dataset_metadata.py get_data_file_path
        start += e["length"]
    assert start == info["total_frames"]
    return episodes


def check_stats(root: Path, info: dict) -> dict:
    """datasets/io_utils.py load_stats; datasets/compute_stats.py _assert_type_and_shape: every numeric feature,
    count (1,), an image's per channel (3, 1, 1)."""
    stats = json.loads((root / "meta/stats.json").read_text())
    for name, ft in info["features"].items():
        if ft["dtype"] == "string":
            assert name not in stats
            continue
        assert set(stats[name]) == STATS, name
        shape = (3, 1, 1) if ft["dtype"] == "image" else tuple(ft["shape"])
        for key, value in stats[name].items():
            assert np.array(value).shape == ((1,) if key == "count" else shape), (name, key)
        assert stats[name]["count"] == [info["total_frames"]]  # vlash counts every frame (LeRobot samples images)
    return stats


def check_data(root: Path, info: dict, episodes: list[dict], tasks: list[str]) -> dict[str, list]:
    """datasets/dataset_reader.py _load_hf_dataset -> load_nested_dataset(data, features): every data file has the
    features' arrow types; frames in index order, each episode's frame_index from 0, timestamp frame_index / fps;
    io_utils.py hf_transform_to_torch decodes each image with PIL."""
    features = info["features"]
    tables = [pq.read_table(p) for p in sorted((root / "data").glob("*/*.parquet"))]
    for table in tables:
        assert {f.name: f.type for f in table.schema} == {n: arrow_type(ft) for n, ft in features.items()}
        hf = json.loads(table.schema.metadata[b"huggingface"])["info"]["features"]
        assert set(hf) == set(features)
    columns = pa.concat_tables(tables).to_pydict()
    n = info["total_frames"]
    assert columns["index"] == list(range(n))
    for e in episodes:
        rows = range(e["dataset_from_index"], e["dataset_to_index"])
        assert [columns["episode_index"][i] for i in rows] == [e["episode_index"]] * len(rows)
        assert [columns["frame_index"][i] for i in rows] == list(range(len(rows)))
        assert {tasks[columns["task_index"][i]] for i in rows} == set(e["tasks"])
    np.testing.assert_allclose(columns["timestamp"], np.float32(np.array(columns["frame_index"]) / info["fps"]))
    for name, ft in features.items():
        if ft["dtype"] == "image":
            for cell in columns[name][:: max(1, n // 5)]:
                image = np.asarray(Image.open(io.BytesIO(cell["bytes"])).convert("RGB"))
                assert list(image.shape) == ft["shape"]
    return columns


def check_dataset(root: Path) -> tuple[dict, list[dict], dict[str, list], list[str]]:
    """Every check above; (info, episodes, data columns, tasks)."""
    info = check_info(root)
    tasks = check_tasks(root, info)
    episodes = check_episodes(root, info)
    check_stats(root, info)
    return info, episodes, check_data(root, info, episodes, tasks), tasks


def load_with_hf_datasets(root: Path) -> None:
    """What LeRobotDataset does with HF `datasets` (datasets/io_utils.py load_nested_dataset, load_tasks via pandas,
    load_episodes): Dataset.from_parquet with the features LeRobot builds, a row decoded."""
    import datasets
    import pandas as pd

    info = json.loads((root / "meta/info.json").read_text())
    hf = {}
    for name, ft in info["features"].items():
        if ft["dtype"] == "image":
            hf[name] = datasets.Image()
        elif ft["shape"] == [1]:
            hf[name] = datasets.Value(ft["dtype"])
        else:
            hf[name] = datasets.Sequence(length=ft["shape"][0], feature=datasets.Value(ft["dtype"]))
    paths = [str(p) for p in sorted((root / "data").glob("*/*.parquet"))]
    data = datasets.Dataset.from_parquet(paths, features=datasets.Features(hf))
    assert len(data) == info["total_frames"]
    row = data[len(data) - 1]
    tasks = pd.read_parquet(root / "meta/tasks.parquet")
    assert isinstance(tasks.iloc[row["task_index"]].name, str)
    for name, ft in info["features"].items():
        if ft["dtype"] == "image":
            assert list(np.asarray(row[name]).shape) == ft["shape"]  # a PIL image
    episodes = datasets.Dataset.from_parquet([str(p) for p in sorted((root / "meta/episodes").glob("*/*.parquet"))])
    assert len(episodes) == info["total_episodes"]
    inferred = datasets.Dataset.from_parquet(paths)  # no features given: from the "huggingface" schema metadata
    assert inferred.features == datasets.Features(hf)
