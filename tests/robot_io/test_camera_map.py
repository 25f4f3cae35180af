"""The camera map: identical names map by name, different names need an explicit entry, a policy camera is left out
(masked) only when the map says so; ambiguous or incomplete maps are refused at setup with both camera lists."""

from __future__ import annotations

import numpy as np
import pytest

from robot_io.camera_map import parse_camera_map, resolve_camera_map
from robot_io.executors.images import match_cameras
from robot_io.protocol import CameraSpec
from robot_io.protocol.errors import ShapeError

PI05 = [CameraSpec(name, 224, 224) for name in ("base_0_rgb", "left_wrist_0_rgb", "right_wrist_0_rgb")]


def test_parse_entries_and_none_masks():
    assert parse_camera_map(["base_0_rgb=front", "right_wrist_0_rgb=none", " left_wrist_0_rgb = wrist "]) == {
        "base_0_rgb": "front",
        "right_wrist_0_rgb": None,
        "left_wrist_0_rgb": "wrist",
    }
    for bad in ("base_0_rgb", "=front", "base_0_rgb="):
        with pytest.raises(ValueError, match="POLICY_CAMERA=ROBOT_CAMERA"):
            parse_camera_map([bad])
    with pytest.raises(ValueError, match="mapped twice"):
        parse_camera_map(["a=x", "a=y"])


def test_identical_names_map_by_name_without_entries():
    cams = [CameraSpec("front", 8, 8)]
    assert resolve_camera_map(["wrist", "front"], cams) == {"front": "front"}


def test_different_names_need_an_explicit_map_and_the_error_lists_both_sides():
    with pytest.raises(ShapeError) as err:
        resolve_camera_map(["front", "wrist"], PI05)
    text = str(err.value)
    assert "['base_0_rgb', 'left_wrist_0_rgb', 'right_wrist_0_rgb']" in text and "['front', 'wrist']" in text
    assert "'base_0_rgb' has no robot camera" in text and "vlash run --camera" in text
    # the same robot, one camera fewer than the policy: two mapped, the third must be left out on purpose
    with pytest.raises(ShapeError, match="'right_wrist_0_rgb' has no robot camera"):
        resolve_camera_map(["front", "wrist"], PI05, {"base_0_rgb": "front", "left_wrist_0_rgb": "wrist"})
    resolved = resolve_camera_map(
        ["front", "wrist"], PI05, {"base_0_rgb": "front", "left_wrist_0_rgb": "wrist", "right_wrist_0_rgb": None}
    )
    assert resolved == {"base_0_rgb": "front", "left_wrist_0_rgb": "wrist", "right_wrist_0_rgb": None}


@pytest.mark.parametrize(
    ("explicit", "problem"),
    [
        ({"base_0_rgb": "front", "left_wrist_0_rgb": "front", "right_wrist_0_rgb": None}, "'front' would feed"),
        ({"base_0_rgb": "top", "left_wrist_0_rgb": None, "right_wrist_0_rgb": None}, "no such camera"),
        ({"wrist_rgb": "front", "left_wrist_0_rgb": None}, "'wrist_rgb' is not a policy camera"),
    ],
)
def test_ambiguous_or_wrong_entries_are_refused(explicit, problem):
    with pytest.raises(ShapeError, match=problem):
        resolve_camera_map(["front", "wrist"], PI05, explicit)


def test_a_name_match_and_an_explicit_entry_for_the_same_robot_camera_is_ambiguous():
    cams = [CameraSpec("front", 8, 8), CameraSpec("base_0_rgb", 8, 8)]
    with pytest.raises(ShapeError, match="'front' would feed"):
        resolve_camera_map(["front"], cams, {"base_0_rgb": "front"})


def test_match_cameras_follows_the_map_and_leaves_masked_cameras_out():
    images = {"front": np.full((6, 8, 3), 1, np.uint8), "wrist": np.full((4, 4, 3), 2, np.uint8)}
    camera_map = {"base_0_rgb": "wrist", "left_wrist_0_rgb": "front", "right_wrist_0_rgb": None}
    out = match_cameras(images, PI05, camera_map)
    assert sorted(out) == ["base_0_rgb", "left_wrist_0_rgb"]
    assert out["base_0_rgb"][0, 0, 0] == 2 and out["left_wrist_0_rgb"].shape == (6, 8, 3)  # native size
    with pytest.raises(ShapeError, match="needs robot image 'front'"):
        match_cameras({"wrist": images["wrist"]}, PI05, camera_map)
    with pytest.raises(ShapeError, match="uint8"):
        match_cameras({"front": np.zeros((4, 4), np.uint8)}, [CameraSpec("front", 4, 4)])
    big = match_cameras({"front": np.zeros((100, 300, 3), np.uint8)}, [CameraSpec("front", 4, 4)], max_side=150)
    assert big["front"].shape == (50, 150, 3)  # only an image above the protocol's limit is downscaled
