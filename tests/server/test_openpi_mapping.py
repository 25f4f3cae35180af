"""openpi observations -> policy inputs (vlash.server.openpi_mapping): the built-in profiles, `auto`, YAML maps,
and errors that name the keys. No server here; tests/server/test_openpi_endpoint.py serves them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from robot_io.protocol import CameraSpec, Metadata
from vlash.errors import ConfigError
from vlash.server.config import OpenpiConfig
from vlash.server.openpi_mapping import PROFILES, ObservationError, flatten, load_map, resolve, to_image

CONFIGS = Path(__file__).parents[2] / "configs" / "openpi"
CAMERAS = ("base_0_rgb", "left_wrist_0_rgb", "right_wrist_0_rgb")
RNG = np.random.default_rng(0)


def _metadata(state_dim: int, cameras=CAMERAS) -> Metadata:
    specs = [CameraSpec(name, 224, 224) for name in cameras]
    return Metadata("m", specs, state_dim, 7, 10, 15.0, "fp32", "torch", 10, "constant", False)


def _hwc(seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (8, 6, 3), dtype=np.uint8)


def _droid(**changes) -> dict:
    obs = {
        "observation/exterior_image_1_left": _hwc(1),
        "observation/wrist_image_left": _hwc(2),
        "observation/joint_position": np.arange(7, dtype=np.float64),
        "observation/gripper_position": np.array([0.5]),
        "prompt": "pick up the cube",
    }
    obs.update(changes)
    return {k: v for k, v in obs.items() if v is not None}


def _apply(observation: dict, state_dim: int, profile: str = "auto", cameras=CAMERAS, default_prompt=None):
    flat, meta = flatten(observation), _metadata(state_dim, cameras)
    obs_map = PROFILES[profile] or resolve(flat, meta)
    return obs_map.apply(flat, meta, default_prompt)


def test_droid_maps_both_cameras_concatenates_the_state_and_masks_the_right_wrist():
    obs = _droid(**{"observation/gripper_position": np.float32(0.5)})  # a 0-d gripper value, as openpi promotes it
    mapped = _apply(obs, 8, "droid")
    assert sorted(mapped.images) == ["base_0_rgb", "left_wrist_0_rgb"]  # right_wrist_0_rgb left out: masked
    np.testing.assert_array_equal(mapped.images["base_0_rgb"], obs["observation/exterior_image_1_left"])
    np.testing.assert_array_equal(mapped.images["left_wrist_0_rgb"], obs["observation/wrist_image_left"])
    assert mapped.state.dtype == np.float32 and mapped.state.tolist() == [0, 1, 2, 3, 4, 5, 6, 0.5]
    assert (mapped.prompt, mapped.seed, mapped.profile) == ("pick up the cube", None, "droid")


def test_libero_images_may_be_chw_or_float_and_come_out_uint8_hwc():
    hwc = _hwc(3)
    obs = {
        "observation/image": np.ascontiguousarray(hwc.transpose(2, 0, 1)),  # CHW, detected by its leading 3
        "observation/wrist_image": hwc.astype(np.float32) / 255.0,  # float in [0, 1]
        "observation/state": np.zeros(8, np.float32),
        "prompt": b"open the drawer",  # bytes, as openpi also accepts
    }
    mapped = _apply(obs, 8)
    assert mapped.profile == "libero" and mapped.prompt == "open the drawer"
    for image in mapped.images.values():
        assert image.dtype == np.uint8 and image.flags.c_contiguous
        np.testing.assert_array_equal(image, hwc)


def test_aloha_images_are_always_chw_and_cam_low_is_accepted_unused():
    hwc = np.random.default_rng(4).integers(0, 256, (3, 5, 3), dtype=np.uint8)  # first axis 3: auto would not help
    chw = np.ascontiguousarray(hwc.transpose(2, 0, 1))
    obs = {"state": np.ones(14), "images": {"cam_high": chw, "cam_low": chw, "cam_right_wrist": chw}}
    mapped = _apply(obs, 14, default_prompt="Transfer cube")
    assert mapped.profile == "aloha" and mapped.prompt == "Transfer cube"
    assert sorted(mapped.images) == ["base_0_rgb", "right_wrist_0_rgb"]
    np.testing.assert_array_equal(mapped.images["base_0_rgb"], hwc)


def test_auto_takes_the_vlash_native_layout_with_a_seed():
    obs = {"images": {"base_0_rgb": _hwc()}, "state": [0.1, 0.2], "prompt": "go", "seed": np.int64(7)}
    mapped = _apply(obs, 2)
    assert mapped.profile == "vlash" and mapped.seed == 7 and list(mapped.images) == ["base_0_rgb"]


@pytest.mark.parametrize(
    ("observation", "match"),
    [
        (_droid(extra_key=1), r"unknown observation key\(s\) \['extra_key'\]"),
        ({"observation/joint_position": np.zeros(7), "observation/image": _hwc()}, "fit none of the maps"),
        ({"state": np.zeros(2), "prompt": "go"}, r"fit several maps \['vlash', 'aloha'\]"),
    ],
    ids=["unknown-key", "mixed-profiles", "ambiguous"],
)
def test_auto_refuses_keys_it_cannot_place_and_names_them(observation, match):
    with pytest.raises(ObservationError, match=match):
        _apply(observation, 2)


@pytest.mark.parametrize(
    ("observation", "profile", "match"),
    [
        (_droid(), "libero", r"libero map: unknown observation key\(s\) \['observation/exterior_image_1_left'"),
        (_droid(**{"observation/joint_position": np.zeros(6)}), "droid", r"give 7 values, the policy takes 8"),
        (_droid(**{"observation/gripper_position": None}), "droid", r"missing state key\(s\)"),
        (_droid(prompt=None), "droid", "no prompt"),
        (_droid(prompt=3), "droid", "'prompt': expected a string"),
        (_droid(seed=-1), "droid", "'seed'"),
        (_droid(**{"observation/joint_position": np.zeros((7, 1))}), "droid", "1-D numeric"),
        (_droid(**{"observation/wrist_image_left": np.zeros((8, 6, 4), np.uint8)}), "droid", "3 channels"),
        (_droid(**{"observation/wrist_image_left": np.zeros((8, 6, 3), np.int16)}), "droid", "uint8 or float"),
        (_droid(**{"observation/wrist_image_left": np.full((8, 6, 3), np.nan)}), "droid", "NaN"),
        (_droid(**{"observation/wrist_image_left": "jpeg"}), "droid", r"expected an image"),
        (_droid(**{"observation/joint_position": [[1.0], [1.0, 2.0]]}), "droid", "got a ragged list"),
    ],
    ids=[
        "wrong-profile",
        "state-length",
        "state-key",
        "no-prompt",
        "prompt-type",
        "seed",
        "state-rank",
        "channels",
        "image-dtype",
        "nan",
        "not-an-array",
        "ragged-list",
    ],  # fmt: skip
)
def test_a_profile_refuses_what_does_not_fit_with_a_message_naming_it(observation, profile, match):
    with pytest.raises(ObservationError, match=match):
        _apply(observation, 8, profile)


def test_nested_and_flat_spellings_of_one_key_are_ambiguous():
    with pytest.raises(ObservationError, match="ambiguous observation key 'images/cam_high'"):
        flatten({"images/cam_high": _hwc(), "images": {"cam_high": _hwc()}})
    with pytest.raises(ObservationError, match="must be a map"):
        flatten([1, 2])


def test_flatten_walks_any_nesting_without_recursion():
    """A map ~995 deep once reached RecursionError here (the codec now refuses 9 levels; flatten needs no bound)."""
    deep: dict = {"leaf": 1}
    for _ in range(5000):
        deep = {"k": deep}
    assert flatten(deep) == {"k/" * 5000 + "leaf": 1}


def test_errors_list_ten_keys_at_most_each_cut_short():
    """2**20 unknown keys once made an 11.5 MB error text."""
    many = {f"key{i:04d}": 0 for i in range(2000)}
    with pytest.raises(
        ObservationError, match=r"unknown observation key\(s\) \['key0000', .*'key0009'\] and 1990 more"
    ):
        _apply({**_droid(), **many}, 8, "droid")
    with pytest.raises(ObservationError, match=r"and 1990 more fit none of the maps") as refused:
        _apply(many, 8)
    assert len(str(refused.value)) < 400
    with pytest.raises(ObservationError, match=r"\['xxxxxxxxxx[x]*'\.\.\.\]") as refused:
        _apply({**_droid(), "x" * 100_000: 0}, 8, "droid")
    assert len(str(refused.value)) < 600


def test_a_camera_the_policy_lacks_is_skipped_by_profiles():
    mapped = _apply(_droid(), 8, "droid", cameras=("base_0_rgb",))
    assert list(mapped.images) == ["base_0_rgb"]


def test_the_shipped_example_map_loads_and_applies(tmp_path):
    obs_map = load_map(CONFIGS / "example.yaml")
    assert obs_map.name == "my-arm" and obs_map.chw is None and not obs_map.skip_unknown_cameras
    obs = {
        "observation/top_image": _hwc(1),
        "observation/joint_position": np.zeros(6),
        "observation/gripper_position": 1.0,
        "observation/timestamp": 12.5,
    }
    mapped = obs_map.apply(flatten(obs), _metadata(7))
    assert list(mapped.images) == ["base_0_rgb"] and mapped.prompt == "pick up the red cube"
    with pytest.raises(ObservationError, match=r"-> 'left_wrist_0_rgb', the policy has \['base_0_rgb'\]"):
        obs_map.apply(flatten({**obs, "observation/wrist_image": _hwc()}), _metadata(7, ("base_0_rgb",)))


def test_a_map_file_can_extend_a_profile(tmp_path):
    obs_map = load_map(CONFIGS / "aloha-sim.yaml")
    assert obs_map.name == "aloha-sim" and obs_map.chw is True and obs_map.default_prompt == "Transfer cube"
    assert obs_map.cameras == PROFILES["aloha"].cameras


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("cameras: {a: base_0_rgb}\nstate: [s]\nfps: 10\n", r"unknown openpi map keys \['fps'\]"),
        ("cameras: {a: base_0_rgb}\n", r"missing \['state'\]"),
        ("cameras: {a: base_0_rgb}\nstate: [a]\n", r"keys \['a'\] are used twice"),
        ("extends: franka\n", "extends must be one of"),
        ("cameras: {a: base_0_rgb}\nstate: [s]\nchw: sometimes\n", "chw must be"),
        ("- a\n", "must be a mapping"),
    ],
)
def test_bad_map_files_fail_at_setup(tmp_path, text, match):
    path = tmp_path / "map.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=match):
        load_map(path)


def test_openpi_config_validates_its_fields(tmp_path):
    assert OpenpiConfig().is_local and OpenpiConfig(host="::1").is_local and not OpenpiConfig(host="0.0.0.0").is_local
    for bad, match in [
        ({"profile": "franka"}, "profile must be one of"),
        ({"port": 70000}, "port"),
        ({"map_file": tmp_path / "none.yaml"}, "does not exist"),
        ({"map_file": CONFIGS / "example.yaml", "profile": "droid"}, "not both"),
        ({"infer_timeout_s": 0}, "infer_timeout_s"),
    ]:
        with pytest.raises(ConfigError, match=match):
            OpenpiConfig(**bad)


def test_to_image_respects_an_explicit_hwc_layout():
    image = np.zeros((3, 4, 3), np.uint8)  # 3 rows of 4 pixels: auto would take it for CHW
    assert to_image(image, False, "k").shape == (3, 4, 3)
    assert to_image(image, None, "k").shape == (4, 3, 3)
